"""The model card (checkpoints/README.md), written from the shipped checkpoints' own meta.

Every number in the card is read from a checkpoint file, so the card and the files cannot
disagree; `python -m lpos card` rewrites it after a rebuild.
"""
from __future__ import annotations

from lpos import checkpoints
from lpos.analysis.lengths import length_reading, loss_table
from lpos.positions import SCHEMES

REBUILD = "bash checkpoints/rebuild.sh ../shared/data/*.txt"


def _loss(result: dict) -> str:
    return f"{result['loss']:.3f}" if result.get("loss") is not None else result.get("note", "n/a")


def model_card(*, rebuild_seconds: float | None = None) -> str:
    metas = {}
    for name in checkpoints.available():
        model, meta = checkpoints.load(name)
        metas[name] = (model, meta)
    shipped = [s for s in SCHEMES if s in metas]
    if not shipped:
        raise ValueError("no shipped checkpoints to describe")
    _, first = metas[shipped[0]]
    lengths = list(first["loss_by_length"])
    lines = [
        "# Shipped checkpoints: model card",
        "",
        "Five small GPTs, identical except for the position scheme, trained by `python -m lpos train` on",
        "children's stories. Written by `python -m lpos card` from each file's own `meta`.",
        "",
        "## Data",
        "",
        f"{first['stories']:,} stories ({', '.join(first['data_files'])}; sha256 of the files in that order",
        f"`{first['corpus_sha256']}`): TinyStories (Eldan & Li 2023, licence CDLA-Sharing-1.0) excerpts",
        "and public-domain Grimm tales, Aesop's fables and *Alice's Adventures in Wonderland*. The text is",
        "not part of this repository; see the README for where it comes from.",
        f"{first['val_stories']} whole stories ({first['val_tokens']:,} tokens) are held out for validation",
        f"(seed {first['train_args']['seed']}); training draws from the other {first['train_tokens_available']:,} tokens.",
        "",
        "## Architecture and training",
        "",
        "GPT-2 vocabulary (50,257), context 128, width 128, 4 layers, 4 heads, pre-LayerNorm, tied output head.",
        f"The softmax runs over the {first['vocab_trained']:,} tokens that occur in the training stories: every",
        "other token has probability zero and keeps its random initial row, rebuilt from the seed on load",
        "(that is what keeps each file under 8 MB). Validation losses below are over held-out tokens inside",
        f"that vocabulary; {100 * first['val_oov_share']:.2f}% of held-out tokens fall outside it.",
        "",
        "## Results",
        "",
        "| scheme | val loss @128 | unigram baseline | tokens trained | steps | wall time (train) | file |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in shipped:
        _, meta = metas[name]
        size = (checkpoints.CHECKPOINT_DIR / f"{name}.pt").stat().st_size / 2**20
        lines.append(f"| {name} | {meta['val_loss']:.3f} | {meta['unigram_val_loss']:.3f} | {meta['tokens_trained']:,} "
                     f"| {meta['steps']} | {meta['wall_seconds']:.0f} s | {size:.1f} MB |")
    lines += ["", "Loss by evaluation length (mean next-token loss over non-overlapping windows of the held-out",
              "stream; trained at 128):", "",
              "| scheme | " + " | ".join(str(n) for n in lengths) + " |",
              "|---|" + "---:|" * len(lengths)]
    for name in shipped:
        _, meta = metas[name]
        lines.append(f"| {name} | " + " | ".join(_loss(meta["loss_by_length"][n]) for n in lengths) + " |")
    tables = {name: loss_table(metas[name][1]) for name in shipped}
    lines += [
        "",
        "What these numbers say (written by `lpos.analysis.lengths.length_reading` from the table above):",
        "",
        length_reading(tables, train_length=first["train_args"]["block_size"]),
        "",
        f"Machine: {first['machine']}, one process per run.",
    ]
    if rebuild_seconds is not None:
        lines.append(f"Rebuilding all five, one after another (training and evaluation), took {rebuild_seconds / 60:.1f} "
                     "minutes on this machine: the sum of the five runs' measured wall times.")
    lines += [
        "",
        "## Rebuild",
        "",
        "```bash",
        REBUILD,
        "python -m lpos card   # rewrite this card from the new files",
        "```",
        "",
        "which runs, for each scheme S in learned, sinusoidal, rope, alibi, none:",
        "",
        "```bash",
        f"python -m lpos train --scheme S --data {' '.join('../shared/data/' + f for f in first['data_files'])} "
        f"--out checkpoints/S.pt --steps {first['steps']}",
        "```",
        "",
        "and `python -m lpos eval --checkpoint S` reproduces the loss-by-length row of S.",
        "",
    ]
    return "\n".join(lines)
