"""Commands on one model: inspect its rows, shuffle a sentence, generate text, convert a file."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lpos.cli.choosing import TOKENIZER_HELP, chosen_model, load_checkpoint, model_flags

UNTRAINED_HELP = "the scheme's untrained model, the one the app shows as 'untrained'"


def add_commands(commands) -> None:
    sentence = argparse.ArgumentParser(add_help=False, parents=[model_flags()])
    sentence.add_argument("text")
    sentence.add_argument("--untrained", action="store_true", help=UNTRAINED_HELP)
    default = " (default: the scheme's shipped trained model, as the app opens)"

    inspect = commands.add_parser("inspect", parents=[sentence], help="each token, its id and the norms of its "
                                  "token, position and summed rows" + default)
    inspect.set_defaults(run=run_inspect)

    shuffle = commands.add_parser("shuffle", parents=[sentence], help="permute all tokens but the last; what "
                                  "changes?" + default)
    shuffle.add_argument("--seed", type=int, default=0)
    shuffle.set_defaults(run=run_shuffle)

    write = commands.add_parser("generate", help="continue a prompt with a checkpoint, one token at a time (KV cache)")
    write.add_argument("prompt")
    write.add_argument("--checkpoint", required=True, help="a shipped name or a path")
    write.add_argument("--tokens", type=int, default=200, help="new tokens at most (learned: stops at its table)")
    write.add_argument("--temperature", type=float, default=0.8, help="0 = greedy")
    write.add_argument("--top-k", type=int, default=40, help="0 = the whole vocabulary")
    write.add_argument("--seed", type=int, default=0)
    write.add_argument("--tokenizer", help=TOKENIZER_HELP)
    write.set_defaults(run=run_generate)

    convert = commands.add_parser("convert", help="write any model file lpos reads (nanoGPT, a trainer's dict, a "
                                  "state_dict, a GPT-2 or Llama folder, llama2.c's ckpt.pt or model.bin) in the lpos "
                                  "format, e.g. for LPOS_CHECKPOINT_DIR")
    convert.add_argument("path", help="the file or Hugging Face folder to read (a tokenizer.json or tokenizer.model "
                         "beside a Llama is taken with it)")
    convert.add_argument("--out", required=True, help="the .pt file to write")
    convert.add_argument("--n-head", type=int, help="the head count, for a file that does not say it")
    convert.add_argument("--tokenizer", help=TOKENIZER_HELP + "; the lpos file carries it")
    convert.set_defaults(run=run_convert)


def run_inspect(args) -> int:
    from lpos.analysis.embeddings import embedding_view, row_norms

    chosen = chosen_model(args)
    ids = chosen.tokenizer.encode(args.text)
    if not ids:
        raise ValueError("the text is empty: give a sentence to inspect")
    frame = row_norms(embedding_view(chosen.model, ids, tokenizer=chosen.tokenizer))  # the model's own tokens
    print(chosen.line, file=sys.stderr)
    if args.json:
        print(frame.to_json(orient="records", force_ascii=False))
    else:
        scheme = chosen.model.scheme
        if frame["position_norm"].isna().all():  # a scheme that adds no rows: no column of None
            frame = frame.drop(columns="position_norm")
            print(f"scheme {chosen.model.config.position}, {len(ids)} tokens; no position rows to measure: "
                  f"{scheme.label} {scheme.acts}, so sum_norm is token_norm")
        else:
            print(f"scheme {chosen.model.config.position}, {len(ids)} tokens")
        print(frame.to_string(index=False, float_format=lambda v: f"{v:.4f}", na_rep="-"))
    return 0


def run_shuffle(args) -> int:
    from lpos.analysis.shuffle import gives_positions, shuffle_experiment

    chosen = chosen_model(args)
    decode = chosen.tokenizer.decode
    result = shuffle_experiment(chosen.model, chosen.tokenizer.encode(args.text), seed=args.seed)
    print(chosen.line, file=sys.stderr)
    summary = {
        "scheme": chosen.model.config.position,
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
    if result.order_blind and not gives_positions(result.scheme):
        print("With no positions, layer-1 attention is blind to the order of earlier tokens; the full model still "
              "changes, because the causal mask lets each earlier position see only its own prefix.")
    elif result.order_blind:
        print(f"The {result.scheme} scheme does give positions, but with this model's weights layer 1 moved by no more "
              f"than float rounding (recomputed in float64: {result.exact_change:.1e}).")
    return 0


def run_generate(args) -> int:
    from lpos.analysis.generate import Sampling, continue_text
    from lpos.tokenizer import GPT2

    model, meta = load_checkpoint(args.checkpoint, tokenizer=args.tokenizer)
    tokenizer = meta.get("tokenizer") or GPT2
    sampling = Sampling(args.temperature, args.top_k or None, args.seed)
    result = continue_text(model, tokenizer.encode(args.prompt), max_new_tokens=args.tokens, sampling=sampling)
    print(tokenizer.decode(result.prompt + result.new))
    if result.stopped_at_wall:
        print(f"note: stopped after {len(result.new)} new tokens: the learned table has {model.config.block_size} rows "
              "(no sliding window)", file=sys.stderr)
    return 0


def run_convert(args) -> int:
    from lpos import checkpoints

    out = Path(args.out)
    if out.suffix != ".pt":
        raise ValueError(f"--out {args.out}: the name must end in .pt (LPOS_CHECKPOINT_DIR offers .pt files)")
    model, meta = load_checkpoint(args.path, n_head=args.n_head, tokenizer=args.tokenizer)
    # read back, the file is an lpos file: its "read as" line says so, and names what it was converted from
    source = f"lpos checkpoint (converted from {Path(args.path).name}, a {meta.get('source', 'checkpoint')})"
    checkpoints.save(model, {**meta, "converted_from": Path(args.path).name, "source": source}, out)
    print("\n".join(checkpoints.describe(model, meta)))
    print(f"wrote {out} (lpos format, {out.stat().st_size / 2**20:,.0f} MB)")
    return 0
