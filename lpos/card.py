"""The model card (checkpoints/README.md), written from the shipped checkpoints' own meta.

Every number in the card is read from a checkpoint file, so the card and the files cannot
disagree; `python -m lpos card` rewrites it after a rebuild.
"""
from __future__ import annotations

from lpos import checkpoints
from lpos.analysis.lengths import length_reading, loss_table
from lpos.analysis.similarity import initial_position_rows
from lpos.analysis.table_coverage import drift_reading, row_drift, trained_rows
from lpos.analysis.timeline import BAND_DISTANCES, table_structure
from lpos.positions import SCHEMES

REBUILD = "bash checkpoints/rebuild.sh ../shared/data/*.txt"
# Not written from any file's meta: the layouts and tokenizers lpos reads (issue 22), kept in the card so that
# `python -m lpos card` keeps the section (tests/test_own_vocab_sentences.py checks the card holds it).
OTHER_MODELS = """## Other models: the layouts lpos reads

Besides these files, `checkpoints.load`, `python -m lpos convert` and the app's upload read (see the
README's "Your own model" for what to give with each):

- an lpos `.pt`; a nanoGPT `ckpt.pt` (also `shakespeare_char`, with `--tokenizer meta.pkl`);
- a trainer's dict (`model`, `optimizer`, `config`); a bare `state_dict`;
- "Build a Large Language Model (From Scratch)"'s `GPTModel`: a bare `state_dict` or
  `{"model_state_dict": ..., "optimizer_state_dict": ...}` (`--n-head`: the file does not say it);
- Karpathy's "Let's build GPT" lecture (`gpt.py`): a bare `state_dict`, with `--tokenizer` the training text;
- a Hugging Face GPT-2 folder (`config.json` + `model.safetensors` or `pytorch_model.bin`, and
  `tokenizer.json` when it has its own BPE) or a `pytorch_model.bin` alone;
- a Hugging Face Llama folder, llama2.c's `model.bin` or `ckpt.pt` (with `tokenizer.model`).

Tokenizers (`--tokenizer`): nanoGPT's `meta.pkl`, a Hugging Face `tokenizer.json`, a SentencePiece or
minbpe `.model`, or a character model's training text (`.txt`). `lpos/checkpoints/layouts/` holds
the layouts' code and `lpos/vocab/` the tokenizers'.
"""
COUNTS = {1: "One", 2: "Two", 3: "Three", 4: "Four", 5: "Five"}
PREVIOUS_TOKENS, PREVIOUS_LOSSES = 1_024_000, "3.80 to 4.07"  # the models this recipe replaced, for comparison


def _loss(result: dict) -> str:
    return f"{result['loss']:.3f}" if result.get("loss") is not None else result.get("note", "n/a")


def _value(number) -> str:
    return f"{number:.3f}" if isinstance(number, (int, float)) else "n/a"


def _goals(metas: dict, shipped: list[str]) -> list[str]:
    """The training goals, each with the measured figure and whether it is met."""
    losses = {n: metas[n][1].get("val_loss_tinystories") for n in shipped}
    known = [v for v in losses.values() if v is not None]
    lines = ["", "### Goals, measured", ""]
    if known:
        worst, spread = max(known), max(known) - min(known)
        lines.append(f"- Held-out TinyStories loss at 128 at most 3.1 nats for every scheme: worst {worst:.3f} "
                     f"({max(losses, key=lambda n: losses[n] or 0)}) — **{'met' if worst <= 3.1 else 'missed by ' + f'{worst - 3.1:.3f}'}**.")
        lines.append(f"- Spread at most 0.3 nats: {spread:.3f} — **{'met' if spread <= 0.3 else 'missed'}**.")
        positioned = [v for n, v in losses.items() if n != "none" and v is not None]
        if "none" in losses and losses["none"] is not None and len(positioned) > 1:
            lines.append(f"  Without `none` (the model that gets no position signal at all) the four schemes span "
                         f"{max(positioned) - min(positioned):.3f} nats; `none` sits {losses['none'] - max(positioned):.3f} "
                         "above the worst of them: that gap is what having no positions costs at this size.")
        if worst > 3.1:
            lines.append(f"  Tried: {metas[shipped[0]][1]['tokens_trained']:,} tokens a model "
                         f"({metas[shipped[0]][1]['steps']:,} steps of {metas[shipped[0]][1]['train_args']['batch_size']} × "
                         f"{metas[shipped[0]][1]['train_args']['block_size']}), "
                         f"{metas[shipped[0]][1]['tokens_trained'] / PREVIOUS_TOKENS:.1f}× the {PREVIOUS_TOKENS:,} of the "
                         f"models shipped before 2026-12 (loss over all held-out stories {PREVIOUS_LOSSES}), at learning rate "
                         f"{metas[shipped[0]][1]['train_args']['lr']:g}. More steps would lower every loss, but the "
                         "25-minute budget per model on two cores is spent.")
    budget = 25 * 60
    over = [f"{n} ({metas[n][1]['wall_seconds'] / 60:.1f} min)" for n in shipped if metas[n][1]["wall_seconds"] > budget]
    lines.append("- At most 25 minutes of training a model on the 2 cores: "
                 + (f"**missed** by {', '.join(over)}; " if over else "**met**; ")
                 + "the times are in the table (wall time, with another lane training beside each run).")
    if "learned" in metas:
        model, meta = metas["learned"]
        trained = table_structure(model.transformer.wpe.weight.detach())
        timeline = meta.get("timeline")
        start = table_structure(timeline["position_rows"][0].float()) if timeline else None
        random = table_structure(initial_position_rows(model.config.block_size, model.config.n_embd))
        drop = trained["cosine_at_1"] - trained["cosine_at_64"]
        lines += [
            f"- Learned table, the 10 nearest positions of a position at most 10 positions away on average: "
            f"{trained['neighbour_distance']:.1f} — **{'met' if trained['neighbour_distance'] <= 10 else 'missed'}** "
            f"(random N(0, 0.02) rows: {random['neighbour_distance']:.1f}"
            + (f"; this model at step 0: {start['neighbour_distance']:.1f}" if start else "") + ").",
            f"- Mean cosine of the learned rows at distance 1 at least 0.5: {trained['cosine_at_1']:.3f} — "
            f"**{'met' if trained['cosine_at_1'] >= 0.5 else 'missed'}**; at least 0.5 lower at distance 64: "
            f"{trained['cosine_at_64']:.3f}, {drop:.3f} lower — **{'met' if drop >= 0.5 else 'missed'}**. "
            f"By distance ({', '.join(str(d) for d in BAND_DISTANCES)}): "
            + ", ".join(f"{trained[f'cosine_at_{d}']:.3f}" for d in BAND_DISTANCES) + ".",
            "  Measured by `lpos.analysis.timeline.table_structure` on `checkpoints/learned.pt`'s `transformer.wpe`.",
        ]
    tables = {n: loss_table(metas[n][1]) for n in shipped}
    degrade = {n: t[1024]["loss"] - t[128]["loss"] for n, t in tables.items()
               if t.get(1024, {}).get("loss") is not None and t.get(128, {}).get("loss") is not None}
    if degrade:
        best = min(degrade, key=degrade.get)
        lines.append(f"- ALiBi degrades least from 128 to 1024 tokens: the least is **{best}** ({degrade[best]:+.3f} nats) — "
                     f"**{'met' if best == 'alibi' else 'missed'}**.")
    lines.append("- Rows of tokens never seen in training keep their initial values exactly: the file stores only the "
                 "trained vocabulary's rows, and `tests/test_train.py::test_untouched_rows_stay_initial` checks it.")
    return lines


# What else ran on the machine while a shipped file trained, when it was not rebuild.sh's other lane;
# keyed by the file's own recorded wall time, so a retrained file never inherits the note.
TRAINED_BESIDE: dict[tuple[str, float], str] = {
    ("learned-32", 3022.7): "no second training lane ran beside it; other engineers ran tests and helper scripts on "
    "the other core. It stopped after its last step, while writing the file, when the code changed under it (a "
    "restructuring of the package), and was resumed from its step-1000 snapshot with the same batches",
}


def short_window_section(metas: dict, rows: list[str]) -> list[str]:
    """What each model trained on windows shorter than its table is, and its untrained rows, measured."""
    lines = []
    for name in rows:
        model, meta = metas[name]
        limit = trained_rows(meta, model)
        drift = row_drift(model, meta) if limit is not None else None
        if drift is None:
            continue
        args, full = meta["train_args"], metas.get("learned", (None, None))[1]
        windows, _ = divmod(args["batch_size"] * args["block_size"], limit)
        same = [key for key in ("data_files", "steps", "tokens_trained") if full and full.get(key) == meta.get(key)]
        lines += ["", f"## {name}: the learned table's second limit", "",
                  f"`{name}` is the learned scheme trained on windows of at most {limit} tokens "
                  f"(`--max-length {limit}`): {windows} windows of {limit} tokens a step instead of "
                  f"{args['batch_size']} of {args['block_size']}, so the same {args['batch_size'] * args['block_size']:,} "
                  f"tokens a step" + (f"; the same {', '.join(same).replace('_', ' ')} as `learned`" if same else "")
                  + f". Its table keeps all {model.config.block_size} rows, but rows {limit}–{model.config.block_size - 1} "
                  "are never read in training and get no gradient. Measured against its own step-0 table "
                  f"({drift.source}; `lpos.analysis.table_coverage`):", ""]
        lines += [f"- {line}" for line in drift_reading(drift)]
        beside = TRAINED_BESIDE.get((name, meta["wall_seconds"]))
        if beside:
            lines += ["", f"While it trained ({meta['wall_seconds'] / 60:.1f} min, one thread), {beside}."]
    return lines


def _schedule(metas: dict, shipped: list[str]) -> list[str]:
    timeline = metas[shipped[0]][1].get("timeline")
    if not timeline:
        return []
    return ["", "## Training snapshots", "",
            f"Each file's `meta[\"timeline\"]` holds {len(timeline['steps'])} snapshots, at steps "
            f"{', '.join(str(s) for s in timeline['steps'])} (0, then evenly spaced in log(step)): the validation loss on "
            f"the first {timeline['eval_tokens']:,} held-out TinyStories tokens, the position rows (learned: the table; "
            "other schemes: what block 1 writes at each position), the 8 nearest tokens of 40 probe words, the first "
            "layer's attention on a probe sentence, and the cosine between the summed rows of its repeated word. "
            "The Training timeline page replays them.", "",
            f"Loss per snapshot (on those {timeline['eval_tokens']:,} tokens, so not the table above's figure) and the "
            "learned table as it forms:", ""] + _snapshot_table(metas, shipped, timeline["steps"])


def _snapshot_table(metas: dict, shipped: list[str], steps: list[int]) -> list[str]:
    """Loss per snapshot for every scheme, and the learned table's structure as it forms."""
    learned = [table_structure(rows.float()) for rows in metas["learned"][1]["timeline"]["position_rows"]] \
        if "learned" in metas and "timeline" in metas["learned"][1] else None
    head = "| step | " + " | ".join(f"{n} loss" for n in shipped)
    rule = "|---:|" + "---:|" * len(shipped)
    if learned:
        head += " | learned: 10 nearest rows, mean distance | cosine at 1 | cosine at 64"
        rule += "---:|---:|---:|"
    lines = [head + " |", rule]
    for i, step in enumerate(steps):
        row = [str(step)] + [f"{metas[n][1]['timeline']['val_loss'][i]:.3f}" if "timeline" in metas[n][1] else "n/a"
                             for n in shipped]
        if learned:
            row += [f"{learned[i]['neighbour_distance']:.1f}", f"{learned[i]['cosine_at_1']:.2f}",
                    f"{learned[i]['cosine_at_64']:.2f}"]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def model_card(*, rebuild_seconds: float | None = None, rebuilt_models: int | None = None) -> str:
    """The card; `rebuild_seconds` is a measured rebuild.sh wall time, over its first `rebuilt_models`
    models (the five schemes, then the rest; all when None)."""
    metas = {}
    for name in checkpoints.available():
        model, meta = checkpoints.load(name)
        metas[name] = (model, meta)
    shipped = [s for s in SCHEMES if s in metas]  # one model per scheme: the goals compare these
    if not shipped:
        raise ValueError("no shipped checkpoints to describe")
    rows = shipped + [n for n in metas if n not in SCHEMES]  # and the others (learned-32) in the tables
    _, first = metas[shipped[0]]
    lengths = list(first["loss_by_length"])
    lines = [
        "# Shipped checkpoints: model card",
        "",
        f"{COUNTS.get(len(shipped), len(shipped))} small GPTs, identical except for the position scheme, trained by `python -m lpos train` on",
        "children's stories" + (f", and {', '.join(rows[len(shipped):])} (described below)" if len(rows) > len(shipped)
                                else "") + ". Written by `python -m lpos card` from each file's own `meta`.",
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
        f"Validation loss at 128 tokens, in nats: on the held-out TinyStories stories "
        f"({first.get('val_tokens_tinystories', 0):,} tokens), and on every held-out story (classics included).",
        "",
        "| scheme | val loss @128, TinyStories | val loss @128, all | unigram baseline (all) | tokens trained | steps "
        "| wall time (train) | file |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in rows:
        _, meta = metas[name]
        size = (checkpoints.CHECKPOINT_DIR / f"{name}.pt").stat().st_size / 2**20
        lines.append(f"| {name} | {_value(meta.get('val_loss_tinystories'))} | {meta['val_loss']:.3f} "
                     f"| {meta['unigram_val_loss']:.3f} | {meta['tokens_trained']:,} "
                     f"| {meta['steps']} | {meta['wall_seconds']:.0f} s | {size:.1f} MB |")
    lines += _goals(metas, shipped)
    lines += ["", "Loss by evaluation length (mean next-token loss over non-overlapping windows of the held-out",
              "stream; trained at 128):", "",
              "| scheme | " + " | ".join(str(n) for n in lengths) + " |",
              "|---|" + "---:|" * len(lengths)]
    for name in rows:
        _, meta = metas[name]
        lines.append(f"| {name} | " + " | ".join(_loss(meta["loss_by_length"][n]) for n in lengths) + " |")
    if all("loss_by_length_tinystories" in metas[name][1] for name in rows):
        lines += ["", "The same, over the held-out TinyStories stories only:", "",
                  "| scheme | " + " | ".join(str(n) for n in lengths) + " |", "|---|" + "---:|" * len(lengths)]
        for name in rows:
            by_length = metas[name][1]["loss_by_length_tinystories"]
            lines.append(f"| {name} | " + " | ".join(_loss(by_length[n]) for n in lengths) + " |")
    tables = {name: loss_table(metas[name][1]) for name in shipped}
    lines += [
        "",
        "What these numbers say (written by `lpos.analysis.lengths.length_reading` from the table above):",
        "",
        length_reading(tables, train_length=first["train_args"]["block_size"]),
        "",
        f"Machine: {first['machine']}, one process per run, {first.get('torch_threads', 'default')} torch thread(s) "
        "per run.",
    ]
    if rebuild_seconds is not None:
        timed = rows[:rebuilt_models or len(rows)]  # the models that rebuild measured, in rebuild.sh's set
        lines.append(f"`checkpoints/rebuild.sh` ran {', '.join(timed)} as two one-thread lanes side by side and took "
                     f"{rebuild_seconds / 60:.1f} minutes of wall time; each run's own training time is in the table."
                     + (f" {', '.join(rows[len(timed):])} trained after that measurement (its section below says how)."
                        if len(timed) < len(rows) else ""))
    lines += short_window_section(metas, rows)
    lines += _schedule(metas, shipped)
    lines += [
        "",
        "## Rebuild",
        "",
        "```bash",
        REBUILD,
        "python -m lpos card   # rewrite this card from the new files",
        "```",
        "",
        "which runs, for each scheme S in learned, sinusoidal, rope, alibi, none (two lanes at a time):",
        "",
        "```bash",
        f"python -m lpos train --scheme S --data {' '.join('../shared/data/' + f for f in first['data_files'])} "
        f"--out checkpoints/S.pt --steps {first['steps']} --threads 1 --resume",
        *[f"python -m lpos train --scheme {metas[n][0].config.position} --max-length "
          f"{metas[n][1]['train_args']['max_length']} --data "
          f"{' '.join('../shared/data/' + f for f in metas[n][1]['data_files'])} --out checkpoints/{n}.pt "
          f"--steps {metas[n][1]['steps']} --threads 1 --resume   # {n}" for n in rows[len(shipped):]],
        "```",
        "",
        "A run is bit-identical to the shipped file for the same torch thread count (one here): a 30-step run of",
        "`learned` and of `rope` gave identical weights from the code that trained the files and from this code.",
        f"Training: AdamW (betas 0.9, 0.95), learning rate {first['train_args']['lr']:g} with "
        f"{first['train_args']['warmup']} warm-up steps and a cosine decay to "
        f"{first['train_args']['min_lr_fraction']:.0%}, batch {first['train_args']['batch_size']} × "
        f"{first['train_args']['block_size']}, weight decay {first['train_args']['weight_decay']:g} on every matrix "
        "but the token table (the learned position table included: all its rows are used in every batch), and the "
        f"learned table drawn at N(0, {first['train_args'].get('wpe_init_std', 0.02):g}) instead of GPT-2's N(0, 0.02), "
        "so the initial noise does not outweigh what training writes.",
        "",
        "and `python -m lpos eval --checkpoint S` reproduces the loss-by-length rows of S (all held-out stories,",
        "and the TinyStories ones).",
        "",
        OTHER_MODELS,
    ]
    return "\n".join(lines)
