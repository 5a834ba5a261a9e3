"""The experiments as commands: extend (a RoPE model past its training length under a scaling
method) and probe (where position lives: linear probes per layer, what each head does)."""
from __future__ import annotations

import json
import sys

from lpos.cli.choosing import chosen_model, load_checkpoint, model_flags
from lpos.positions import AS_TRAINED, ROPE_METHODS


def add_commands(commands) -> None:
    extend = commands.add_parser("extend", help="loss by evaluation length of a RoPE model under a scaling method")
    extend.add_argument("--method", choices=ROPE_METHODS, default="yarn")
    extend.add_argument("--factor", type=float, default=4.0, help="target length / training length")
    extend.add_argument("--checkpoint", default="rope", help="a shipped name or a path (method as-trained: any scheme)")
    extend.add_argument("--lengths", type=int, nargs="+", default=[128, 256, 512, 1024], help="each must divide 1024")
    extend.add_argument("--json", action="store_true")
    extend.set_defaults(run=run_extend)

    probe = commands.add_parser("probe", parents=[model_flags()], help="where position lives: a linear probe per "
                                "layer, and what each head does (default: the scheme's untrained model)")
    probe.add_argument("--stream", type=int, metavar="W", help="also stream the text through windows of W tokens, "
                       "alone and with the first 4 tokens kept (the attention-sink test)")
    probe.set_defaults(run=run_probe, untrained=True)


def run_extend(args) -> int:
    import pandas as pd
    import torch

    from lpos.analysis import stretch
    from lpos.analysis.lengths import training_length
    from lpos.corpus import held_out_stream, story
    from lpos.positions import RopeScaling, check_rope_method
    from lpos.tokenizer import encode

    check_rope_method(args.method, args.factor)
    if any(length < 1 or stretch.CHUNK % length for length in args.lengths):
        raise ValueError(f"each length must divide {stretch.CHUNK} (every length scores the same chunks of {stretch.CHUNK} tokens)")
    model, meta = load_checkpoint(args.checkpoint)
    scheme, trained_at = model.config.position, training_length(meta, model)
    scaling = RopeScaling(args.method, args.factor, trained_at)
    if not model.scheme.shows("rotation") and args.method != AS_TRAINED.name:
        raise ValueError(f"{args.checkpoint} uses the {scheme!r} scheme, which rotates nothing; RoPE scaling needs a "
                         f"scheme that rotates queries and keys (or --method {AS_TRAINED.name})")
    texts = {"story": stretch.chunks(torch.tensor(encode(story())), count=1)}
    held_out = held_out_stream(meta)
    if held_out is None:
        print("note: the training corpus is not here; scoring the built-in story only", file=sys.stderr)
    else:
        texts["held-out"] = stretch.chunks(held_out, count=stretch.EVAL_CHUNKS)
    methods = [AS_TRAINED.name] + ([args.method] if args.method != AS_TRAINED.name else [])
    results = {text: {method: stretch.chunk_losses(model, chunks, lengths=args.lengths,
                                                   rope_scaling=RopeScaling.of(method, args.factor, trained_at))
                      for method in methods} for text, chunks in texts.items()}
    if args.json:
        print(json.dumps({"checkpoint": args.checkpoint, "scheme": scheme, "method": args.method, "factor": args.factor,
                          "original_length": trained_at, "attention_factor": scaling.attention_factor,
                          "predictions": {t: int(c.shape[0] * stretch.CHUNK) for t, c in texts.items()},
                          "losses": results}, indent=2))
        return 0
    name = f"{args.method}×{args.factor:g}"
    print(f"{args.checkpoint} ({scheme}, trained at {trained_at}): loss by evaluation length"
          + (f", as trained and under {name}" if args.method != AS_TRAINED.name else ""))
    rows = {}
    for text, by_method in results.items():
        for method, table in by_method.items():
            column = f"{text}: {'as trained' if method == AS_TRAINED.name else name}"
            rows[column] = {length: entry["loss"] for length, entry in table.items()}
        if args.method != AS_TRAINED.name:
            pairs = {length: (by_method[args.method][length]["loss"], by_method[AS_TRAINED.name][length]["loss"])
                     for length in args.lengths}
            rows[f"{text}: change"] = {length: f"{a - b:+.4f}" if a is not None else "n/a"
                                       for length, (a, b) in pairs.items()}
    print(pd.DataFrame(rows).rename_axis("length").to_string(float_format=lambda v: f"{v:.4f}", na_rep="n/a"))
    print(", ".join(f"{text}: {c.shape[0]} chunk(s) of {stretch.CHUNK} tokens" for text, c in texts.items())
          + "; every length scores the same predictions")
    return 0


def run_probe(args) -> int:
    from lpos import checkpoints
    from lpos.analysis.heads import head_portraits, heads_reading
    from lpos.analysis.probes import HELD_OUT_TOKENS, position_probes, probe_text
    from lpos.analysis.streaming import sink_reading, sink_summary, sink_test, streamed_tokens
    from lpos.corpus import held_out_stream, story
    from lpos.tokenizer import encode

    chosen = chosen_model(args)
    model, meta = chosen.model, chosen.meta
    if not args.checkpoint:  # the untrained model reads the held-out stories of the shipped models' corpus
        shipped = checkpoints.available()
        meta = checkpoints.load(shipped[0])[1] if shipped else {}
    held_out = held_out_stream(meta, tokens=HELD_OUT_TOKENS)
    texts = {"the built-in story": encode(story()), "held-out stories": [] if held_out is None else held_out.tolist()}
    text = probe_text({k: v for k, v in texts.items() if v}, model=model)
    probes, portraits = position_probes(model, text), head_portraits(model, text)
    streamed = None
    if args.stream:
        ids = [t for part in texts.values() for t in part]
        streamed = sink_test(model, ids[: streamed_tokens(model, window=args.stream)], window=args.stream)
    if args.json:
        print(json.dumps({"scheme": model.config.position, "text": text.sources,
                          "probes": probes.to_dict(orient="records"), "heads": portraits.table.to_dict(orient="records"),
                          "stream": None if streamed is None else {"window": args.stream, "streamed": len(streamed.alone) + 1,
                                                                  **sink_summary(streamed)}}, indent=2))
        return 0
    table = probes.pivot(index="stream name", columns="target", values=["r2", "mae", "penalty"])
    table = table.reindex(probes["stream name"].unique()).swaplevel(axis=1).sort_index(axis=1, level=0, sort_remaining=False)
    table = table.apply(lambda column: column.map("{:.0e}".format if column.name[1] == "penalty" else "{:.3f}".format))
    print(f"scheme {model.config.position}; windows of {text.windows.shape[1]} tokens of {text.sources}")
    print(f"ridge probes fitted on {probes['fitted'].iloc[0]:,} tokens, scored on {probes['scored'].iloc[0]:,} others")
    print(table.to_string())
    print("(r2 on the scored windows; mae: mean absolute error in tokens; penalty: ridge λ as a multiple of the mean "
          "eigenvalue of XᵀX, picked on held-out windows)\n")
    print(portraits.table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    for line in heads_reading(portraits, scheme=model.config.position):
        print(line.replace("**", ""))
    if streamed is not None:
        print(f"\nstreaming the first {len(streamed.alone) + 1:,} tokens through windows of {args.stream}:")
        print(sink_reading({model.config.position: sink_summary(streamed)}, window=args.stream)[0].replace("**", ""))
    return 0
