"""`python -m lpos inspect|shuffle|train|eval|extend|generate|bench|...`."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from lpos.positions import SCHEMES
from lpos.train import TrainArgs

TRAIN_DEFAULTS = TrainArgs()
CHECKPOINT_HELP = ("a shipped name, a file of any layout lpos reads, or a Hugging Face folder "
                   "(default: the scheme's shipped trained model, as the app opens)")
# The training corpus beside the project (it is not part of the repository); LPOS_DATA_DIR moves it.
DEFAULT_DATA_DIR = Path(os.environ.get("LPOS_DATA_DIR") or Path(__file__).resolve().parent.parent.parent / "shared" / "data")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lpos", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    inspect = commands.add_parser("inspect", help="each token, its id and the norms of its token, position and summed rows")
    inspect.add_argument("text")
    inspect.add_argument("--scheme", choices=SCHEMES, help="default learned; a checkpoint's own scheme wins")
    inspect.add_argument("--checkpoint", help=CHECKPOINT_HELP)
    inspect.add_argument("--n-head", type=int, help="the head count, for a file that does not say it")
    inspect.add_argument("--untrained", action="store_true", help="the scheme's freshly initialised model (seed 0)")
    inspect.add_argument("--json", action="store_true")

    shuffle = commands.add_parser("shuffle", help="permute all tokens but the last; what changes?")
    shuffle.add_argument("text")
    shuffle.add_argument("--scheme", choices=SCHEMES, help="default learned; a checkpoint's own scheme wins")
    shuffle.add_argument("--checkpoint", help=CHECKPOINT_HELP)
    shuffle.add_argument("--n-head", type=int, help="the head count, for a file that does not say it")
    shuffle.add_argument("--untrained", action="store_true", help="the scheme's freshly initialised model (seed 0)")
    shuffle.add_argument("--seed", type=int, default=0)
    shuffle.add_argument("--json", action="store_true")

    train = commands.add_parser("train", help="train a GPT of one position scheme on story text")
    train.add_argument("--scheme", choices=SCHEMES, default="learned")
    train.add_argument("--data", nargs="+", required=True, help="UTF-8 files, stories separated by <|endoftext|> lines")
    train.add_argument("--out", required=True, help="checkpoint path to write")
    budget = train.add_mutually_exclusive_group()
    budget.add_argument("--steps", type=int, help=f"optimizer steps (default {TRAIN_DEFAULTS.steps})")
    budget.add_argument("--tokens", type=int, help="tokens to train on (rounded up to whole steps)")
    train.add_argument("--batch-size", type=int, default=TRAIN_DEFAULTS.batch_size, help="global batch, in sequences")
    train.add_argument("--block-size", type=int, default=128)
    train.add_argument("--max-length", type=int, help="longest training window (default: the block size); the same "
                       "tokens a step in more, shorter windows, so learned rows from here on never train")
    train.add_argument("--lr", type=float, default=TRAIN_DEFAULTS.lr)
    train.add_argument("--seed", type=int, default=1337)
    train.add_argument("--layers", type=int, default=4)
    train.add_argument("--heads", type=int, default=4)
    train.add_argument("--width", type=int, default=128)
    train.add_argument("--save-every", type=int, default=100, help="steps between resumable snapshots")
    train.add_argument("--resume", action="store_true", help="continue from <out>.resume.pt")
    train.add_argument("--threads", type=int, default=0,
                       help="torch threads (default: torch's choice); a run is bit-identical only for the same count")
    train.add_argument("--no-progress", action="store_true")

    evaluate = commands.add_parser("eval", help="validation loss per evaluation length")
    evaluate.add_argument("--checkpoint", required=True, help="a shipped name or a path")
    evaluate.add_argument("--lengths", type=int, nargs="+", default=[64, 128, 256, 512, 1024])
    evaluate.add_argument("--data", nargs="+", help="corpus files (default: those the checkpoint was trained on)")
    evaluate.add_argument("--json", action="store_true")

    probe = commands.add_parser("probe", help="where position lives: a linear probe per layer, and what each head does")
    probe.add_argument("--checkpoint", help="a shipped name or a path (default: a freshly initialised model, seed 0)")
    probe.add_argument("--scheme", choices=SCHEMES, help="default learned; a checkpoint's own scheme wins")
    probe.add_argument("--stream", type=int, metavar="W", help="also stream the text through windows of W tokens, "
                       "alone and with the first 4 tokens kept (the attention-sink test)")
    probe.add_argument("--json", action="store_true")

    convert = commands.add_parser("convert", help="write any model file lpos reads (nanoGPT, a trainer's dict, a "
                                  "state_dict, a GPT-2 folder) in the lpos format, e.g. for LPOS_CHECKPOINT_DIR")
    convert.add_argument("path", help="the file or Hugging Face folder to read")
    convert.add_argument("--out", required=True, help="the .pt file to write")
    convert.add_argument("--n-head", type=int, help="the head count, for a file that does not say it")

    extend = commands.add_parser("extend", help="loss by evaluation length of a RoPE model under a scaling method")
    extend.add_argument("--method", choices=("none", "pi", "ntk", "yarn"), default="yarn")
    extend.add_argument("--factor", type=float, default=4.0, help="target length / training length")
    extend.add_argument("--checkpoint", default="rope", help="a shipped name or a path (method none: any scheme)")
    extend.add_argument("--lengths", type=int, nargs="+", default=[128, 256, 512, 1024], help="each must divide 1024")
    extend.add_argument("--json", action="store_true")

    write = commands.add_parser("generate", help="continue a prompt with a checkpoint, one token at a time (KV cache)")
    write.add_argument("prompt")
    write.add_argument("--checkpoint", required=True, help="a shipped name or a path")
    write.add_argument("--tokens", type=int, default=200, help="new tokens at most (learned: stops at its table)")
    write.add_argument("--temperature", type=float, default=0.8, help="0 = greedy")
    write.add_argument("--top-k", type=int, default=40, help="0 = the whole vocabulary")
    write.add_argument("--seed", type=int, default=0)

    card = commands.add_parser("card", help="rewrite checkpoints/README.md from the shipped checkpoints' meta")
    card.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "checkpoints" / "README.md"))
    card.add_argument("--rebuild-seconds", type=float, help="measured wall time of checkpoints/rebuild.sh")

    bench = commands.add_parser("bench", help="speed of training and evaluation; the app measured in headless Chromium")
    bench.add_argument("--runs", type=int, default=5, help="repetitions of each browser measurement")
    bench.add_argument("--quick", action="store_true", help="a short smoke version: one run, fewer steps")
    bench.add_argument("--model-only", action="store_true", help="skip the browser (no Playwright or Chromium needed)")
    bench.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    bench.add_argument("--out", help="also write the results as JSON to this file")

    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except ValueError as e:  # user errors (bad scheme, bad file, too long) are one line, not a traceback
        print(f"error: {e}", file=sys.stderr)
        return 2


def model_for(args):
    """The checkpoint named by --checkpoint (its own scheme wins), else a seeded untrained model."""
    import torch

    from lpos import checkpoints
    from lpos.model import GPT, GPTConfig

    if args.checkpoint:
        model, _ = checkpoints.load(args.checkpoint)
        if args.scheme is not None and model.config.position != args.scheme:
            print(f"note: {args.checkpoint} uses the {model.config.position!r} scheme", file=sys.stderr)
        return model
    torch.manual_seed(0)
    return GPT(GPTConfig(position=args.scheme or "learned")).eval()


def load_checkpoint(name: str, *, n_head: int | None = None):
    """checkpoints.load, with a head-count question put as the flag that answers it."""
    from lpos import checkpoints
    from lpos.layouts import NeedsHeadCount

    try:
        return checkpoints.load(name, n_head=n_head)
    except NeedsHeadCount as e:
        raise ValueError(f"{e}; pass it as --n-head N") from None


def chosen_model(args):
    """inspect's and shuffle's model, as the app opens: --checkpoint (its own scheme wins), else
    the scheme's shipped trained model, else (--untrained, or none shipped) a seeded untrained
    one; and the line that says which (printed to stderr once the command has its result)."""
    import torch

    from lpos import checkpoints
    from lpos.model import GPT, GPTConfig

    scheme = args.scheme or "learned"
    if args.checkpoint:
        model, meta = load_checkpoint(args.checkpoint, n_head=args.n_head)
        if args.scheme is not None and model.config.position != args.scheme:
            print(f"note: {args.checkpoint} uses the {model.config.position!r} scheme", file=sys.stderr)
        return model, f"model: {args.checkpoint} (read as: {meta.get('source', 'lpos checkpoint')})"
    if not args.untrained and scheme in checkpoints.available():
        return checkpoints.load(scheme)[0], f"model: {scheme} (trained, shipped; --untrained for the random one)"
    note = "" if args.untrained else f" (no trained {scheme} model is shipped)"
    torch.manual_seed(0)
    return GPT(GPTConfig(position=scheme)).eval(), f"model: untrained {scheme} (random init, seed 0){note}"


def run_inspect(args) -> int:
    from lpos.analysis.embeddings import embedding_view, row_norms
    from lpos.tokenizer import encode

    model, used = chosen_model(args)
    ids = encode(args.text)
    if not ids:
        raise ValueError("the text is empty: give a sentence to inspect")
    frame = row_norms(embedding_view(model, ids))
    print(used, file=sys.stderr)
    if args.json:
        print(frame.to_json(orient="records", force_ascii=False))
    else:
        print(f"scheme {model.config.position}, {len(ids)} tokens")
        print(frame.to_string(index=False, float_format=lambda v: f"{v:.4f}", na_rep="-"))
    return 0


def run_shuffle(args) -> int:
    from lpos.analysis.shuffle import shuffle_experiment
    from lpos.tokenizer import decode, encode

    model, used = chosen_model(args)
    ids = encode(args.text)
    result = shuffle_experiment(model, ids, seed=args.seed)
    print(used, file=sys.stderr)
    summary = {
        "scheme": model.config.position,
        "original": decode(result.original),
        "shuffled": decode(result.shuffled),
        "layer1_attention_output_max_abs_change": result.attention_change,
        "full_model_logits_max_abs_change": result.logits_change,
    }
    if args.json:
        print(json.dumps(summary, ensure_ascii=False, indent=2))
        return 0
    print(f"scheme:   {summary['scheme']}")
    print(f"original: {summary['original']!r}")
    print(f"shuffled: {summary['shuffled']!r}  (every token but the last permuted, seed {args.seed})")
    print(f"(a) last position, layer-1 attention output: max |change| = {result.attention_change:.3g}")
    print(f"(b) last position, full-model logits:        max |change| = {result.logits_change:.3g}")
    if result.attention_change < 1e-5:
        print("With no positions, layer-1 attention is blind to the order of earlier tokens; the full model still "
              "changes, because the causal mask lets each earlier position see only its own prefix.")
    return 0


def run_train(args) -> int:
    from lpos.train import TrainArgs, train

    tokens_per_step = args.batch_size * args.block_size
    steps = args.steps or (-(-args.tokens // tokens_per_step) if args.tokens else TRAIN_DEFAULTS.steps)
    options = TrainArgs(scheme=args.scheme, data=tuple(args.data), out=args.out, steps=steps, batch_size=args.batch_size,
                        lr=args.lr, seed=args.seed, n_layer=args.layers, n_head=args.heads, n_embd=args.width,
                        block_size=args.block_size, max_length=args.max_length, save_every=args.save_every, resume=args.resume,
                        threads=args.threads)
    _, meta = train(options, progress=not args.no_progress)
    if meta:
        print(f"wrote {args.out}: val loss {meta['val_loss']} after {meta['tokens_trained']:,} tokens in {meta['wall_seconds']} s")
    return 0


def run_eval(args) -> int:
    from lpos import checkpoints
    from lpos.analysis import length_losses
    from lpos.train import load_corpus

    model, meta = checkpoints.load(args.checkpoint)
    files = args.data or [str(DEFAULT_DATA_DIR / name) for name in meta.get("data_files", [])]
    if not files:
        raise ValueError("this checkpoint does not record its corpus; pass --data FILE...")
    missing = [f for f in files if not Path(f).is_file()]
    if missing:
        raise ValueError(f"corpus file not found: {missing[0]}; pass --data FILE...")
    seed = meta.get("train_args", {}).get("seed", 1337)
    corpus = load_corpus(files, seed=seed)
    streams = {"all held-out stories": corpus.val, "held-out TinyStories stories": corpus.val_tinystories}
    results = {name: length_losses(model, stream, lengths=args.lengths) for name, stream in streams.items()}
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"{args.checkpoint}: {model.config.position}")
    for name, by_length in results.items():
        print(f"{name} ({len(streams[name]):,} tokens):")
        for length, result in by_length.items():
            shown = f"{result['loss']:.4f}" if result["loss"] is not None else result["note"]
            print(f"  length {length:>5}: {shown}")
    return 0


def run_convert(args) -> int:
    from lpos import checkpoints

    out = Path(args.out)
    if out.suffix != ".pt":
        raise ValueError(f"--out {args.out}: the name must end in .pt (LPOS_CHECKPOINT_DIR offers .pt files)")
    model, meta = load_checkpoint(args.path, n_head=args.n_head)
    checkpoints.save(model, {**meta, "converted_from": Path(args.path).name}, out)
    print("\n".join(checkpoints.describe(model, meta)))
    print(f"wrote {out} (lpos format, {out.stat().st_size / 2**20:,.0f} MB)")
    return 0


def run_extend(args) -> int:
    import pandas as pd
    import torch

    from lpos import checkpoints
    from lpos.analysis import stretch
    from lpos.analysis.lengths import story, training_length
    from lpos.positions import RopeScaling, check_rope_method
    from lpos.tokenizer import encode

    check_rope_method(args.method, args.factor)
    if any(length < 1 or stretch.CHUNK % length for length in args.lengths):
        raise ValueError(f"each length must divide {stretch.CHUNK} (every length scores the same chunks of {stretch.CHUNK} tokens)")
    model, meta = checkpoints.load(args.checkpoint)
    scheme, trained_at = model.config.position, training_length(meta, model)
    scaling = RopeScaling(args.method, args.factor, trained_at)
    if scheme != "rope" and args.method != "none":
        raise ValueError(f"{args.checkpoint} uses the {scheme!r} scheme; RoPE scaling needs a rope model (or --method none)")
    texts = {"story": stretch.chunks(torch.tensor(encode(story())), count=1)}
    held_out = stretch.eval_stream(meta)
    if held_out is None:
        print("note: the training corpus is not here; scoring the built-in story only", file=sys.stderr)
    else:
        texts["held-out"] = stretch.chunks(held_out, count=stretch.EVAL_CHUNKS)
    methods = ["none"] + ([args.method] if args.method != "none" else [])
    results = {text: {method: stretch.chunk_losses(model, chunks, lengths=args.lengths,
                                                   rope_scaling=RopeScaling(method, args.factor, trained_at)
                                                   if method != "none" else None)
                      for method in methods} for text, chunks in texts.items()}
    if args.json:
        print(json.dumps({"checkpoint": args.checkpoint, "scheme": scheme, "method": args.method, "factor": args.factor,
                          "original_length": trained_at, "attention_factor": scaling.attention_factor,
                          "predictions": {t: int(c.shape[0] * stretch.CHUNK) for t, c in texts.items()},
                          "losses": results}, indent=2))
        return 0
    name = f"{args.method}×{args.factor:g}"
    print(f"{args.checkpoint} ({scheme}, trained at {trained_at}): loss by evaluation length"
          + (f", as trained and under {name}" if args.method != "none" else ""))
    rows = {}
    for text, by_method in results.items():
        for method, table in by_method.items():
            column = f"{text}: {'as trained' if method == 'none' else name}"
            rows[column] = {length: entry["loss"] for length, entry in table.items()}
        if args.method != "none":
            pairs = {length: (by_method[args.method][length]["loss"], by_method["none"][length]["loss"])
                     for length in args.lengths}
            rows[f"{text}: change"] = {length: f"{a - b:+.4f}" if a is not None else "n/a"
                                       for length, (a, b) in pairs.items()}
    print(pd.DataFrame(rows).rename_axis("length").to_string(float_format=lambda v: f"{v:.4f}", na_rep="n/a"))
    print(", ".join(f"{text}: {c.shape[0]} chunk(s) of {stretch.CHUNK} tokens" for text, c in texts.items())
          + "; every length scores the same predictions")
    return 0


def run_generate(args) -> int:
    from lpos import checkpoints
    from lpos.analysis.generate import Sampling, continue_text
    from lpos.tokenizer import encode

    model, _ = checkpoints.load(args.checkpoint)
    sampling = Sampling(args.temperature, args.top_k or None, args.seed)
    result = continue_text(model, encode(args.prompt), max_new_tokens=args.tokens, sampling=sampling)
    print(result.text)
    if result.stopped_at_wall:
        print(f"note: stopped after {len(result.new)} new tokens: the learned table has {model.config.block_size} rows "
              "(no sliding window)", file=sys.stderr)
    return 0


def run_card(args) -> int:
    from lpos.card import model_card

    Path(args.out).write_text(model_card(rebuild_seconds=args.rebuild_seconds))
    print(f"wrote {args.out}")
    return 0


def run_bench(args) -> int:
    from lpos import bench

    if not args.model_only:
        try:
            bench.check_browser()
        except RuntimeError as e:
            raise ValueError(f"{e} (or pass --model-only)") from None
    results = bench.run(runs=args.runs, quick=args.quick, browser=not args.model_only,
                        progress=lambda message: print(message, file=sys.stderr))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2) if args.json else bench.table(results))
    return 0


def run_probe(args) -> int:
    from lpos import checkpoints
    from lpos.analysis.heads import head_portraits, heads_reading
    from lpos.analysis.lengths import story
    from lpos.analysis.probes import held_out_stream, position_probes, probe_text
    from lpos.analysis.streaming import sink_reading, sink_summary, sink_test, streamed_tokens
    from lpos.tokenizer import encode

    model = model_for(args)
    shipped = checkpoints.available()
    name = args.checkpoint or (shipped[0] if shipped else None)
    meta = checkpoints.load(name)[1] if name else {}  # the corpus whose held-out stories to read
    files = [DEFAULT_DATA_DIR / f for f in meta.get("data_files", [])]
    texts = {"the built-in story": encode(story()),
             "held-out stories": held_out_stream(files, seed=meta.get("train_args", {}).get("seed", 1337))}
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


COMMANDS = {"bench": run_bench, "card": run_card, "convert": run_convert, "extend": run_extend, "generate": run_generate, "inspect": run_inspect, "shuffle": run_shuffle, "train": run_train, "eval": run_eval,
            "probe": run_probe}
