"""The model card (checkpoints/README.md), written from the checkpoint files' own config and meta.

Every number, size and name in the card is read from a checkpoint file, so the card and the files
cannot disagree; `python -m lpos card` rewrites it after a rebuild (`--checkpoints DIR` describes the
files of another folder). The models are the files present; a model is one of the per-scheme set when
it was trained by the common recipe (full windows, positions 0..T-1), else a variant with its own
section. The goals and those sections are in lpos.card_sections.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import torch

from lpos import checkpoints
from lpos.analysis.lengths import length_reading
from lpos.analysis.coverage import drift_reading, row_drift, trained_rows
from lpos.analysis.timeline import table_structure
from lpos.card_sections import (HELD_OUT, ShippedModel, full_table_of, goal_lines, loss_rows, most_common, names,
                                random_table_section, said)
from lpos.positions import REGISTRY
from lpos.train import TrainArgs, window_positions

REBUILD = "bash checkpoints/rebuild.sh ../shared/data/*.txt"
# Not written from any file's meta: the layouts and tokenizers lpos reads, kept in the card so that
# `python -m lpos card` keeps the section (tests/pages/test_pages_own_vocab.py checks the card holds it).
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
- a Hugging Face Llama folder, llama2.c's `model.bin` or `ckpt.pt` (with `tokenizer.model`);
- a Hugging Face folder of today's small open models, each with its config's own position practice
  (the README's table says what the pages show of each): `qwen2` (Qwen2.5: base 1,000,000, q/k/v biases,
  a yarn `rope_scaling`), `qwen3` (Qwen3: q/k norms, heads of 128 columns), `gpt_neox` (Pythia: a quarter
  of each head turns, parallel attention and feed-forward), `smollm3` (every fourth layer without RoPE) and
  `gemma3_text` or `gemma3` (Gemma 3: sliding-window layers with base 10,000 and global layers with base
  1,000,000). Linear, dynamic, yarn and llama3 rescalings are reproduced; other settings are refused by name.

Tokenizers (`--tokenizer`): nanoGPT's `meta.pkl`, a Hugging Face `tokenizer.json`, a SentencePiece or
minbpe `.model`, or a character model's training text (`.txt`). `lpos/checkpoints/layouts/` holds
the layouts' code and `lpos/vocab/` the tokenizers'.
"""
NUMBER_WORDS = ("No", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine", "Ten", "Eleven", "Twelve")
NORMS = {"layernorm": "pre-LayerNorm", "rmsnorm": "pre-RMSNorm"}
# What the per-scheme models share besides the scheme, each read from a file (the intro says which differ)
RECIPE = {
    "training text": lambda m: m.meta.get("corpus_sha256"), "steps": lambda m: m.meta.get("steps"),
    "training windows": lambda m: m.window, "width": lambda m: m.model.config.n_embd,
    "layers": lambda m: m.model.config.n_layer, "heads": lambda m: m.model.config.n_head,
    "batch": lambda m: m.args.get("batch_size"), "learning rate": lambda m: m.args.get("lr"),
    "seed": lambda m: m.args.get("seed"),
}


def read_models(folder: Path) -> list[ShippedModel]:
    """Every checkpoint in `folder` (not *.resume.pt): the per-scheme models in registry order, then the variants."""
    models = [ShippedModel(path.stem, *checkpoints.load(path), path)
              for path in sorted(folder.glob("*.pt")) if "." not in path.stem]
    order = list(REGISTRY.values())
    return sorted(models, key=lambda m: (not m.standard, order.index(m.scheme) if m.standard else 0, m.name))


def intro(models: list[ShippedModel]) -> list[str]:
    standard, variants = [m for m in models if m.standard], [m for m in models if not m.standard]
    differ = [what for what, value in RECIPE.items() if most_common(standard, value)[1]]
    alike = ("identical except for the position scheme" if not differ else
             f"alike except for the position scheme and their {', '.join(differ)} (the tables give each model's)")
    count = NUMBER_WORDS[len(standard)] if len(standard) < len(NUMBER_WORDS) else f"{len(standard):,}"
    return ["# Shipped checkpoints: model card", "",
            f"{count} small GPTs, one per position scheme ({names(standard)}), {alike}, trained by "
            "`python -m lpos train` on children's stories"
            + (f", and {names(variants)}: {'variants' if len(variants) > 1 else 'a variant'} described below" if variants else "")
            + ". Written by `python -m lpos card` from each file's own `config` and `meta`."]


def data_section(models: list[ShippedModel]) -> list[str]:
    corpora = {}
    for model in models:
        corpora.setdefault(model.meta.get("corpus_sha256"), []).append(model)
    groups = sorted(corpora.values(), key=len, reverse=True)
    first = groups[0][0].meta
    lines = ["", "## Data", "",
             f"{first['stories']:,} stories ({', '.join(first['data_files'])}; sha256 of the files in that order",
             f"`{first['corpus_sha256']}`): TinyStories (Eldan & Li 2023, licence CDLA-Sharing-1.0) excerpts",
             "and public-domain Grimm tales, Aesop's fables and *Alice's Adventures in Wonderland*. The text is",
             "not part of this repository; see the README for where it comes from.",
             f"{first['val_stories']} whole stories ({first['val_tokens']:,} tokens) are held out for validation",
             f"(seed {first['train_args']['seed']}); training draws from the other {first['train_tokens_available']:,} "
             "tokens." + (f" Every model but {names([m for g in groups[1:] for m in g])} trained on it." if len(groups) > 1
                          else "")]
    for group in groups[1:]:
        meta = group[0].meta
        lines.append(f"{names(group)} trained on {', '.join(meta['data_files'])} ({meta['stories']:,} stories, sha256 "
                     f"`{meta['corpus_sha256']}`): {meta['val_stories']} stories ({meta['val_tokens']:,} tokens) held "
                     f"out, training draws from the other {meta['train_tokens_available']:,} tokens.")
    return lines


def _vocabulary(model: ShippedModel) -> str:
    tokenizer = model.meta.get("tokenizer")
    kind = "GPT-2" if tokenizer is None or tokenizer.is_gpt2 else tokenizer.name
    return f"{kind} vocabulary ({model.model.config.vocab_size:,})"


def _windows(model: ShippedModel) -> str:
    args, config = model.args, model.model.config
    count = args["batch_size"] * args["block_size"] // model.window
    if config.random_positions:
        return f"{count} × {model.window} tokens, each a sorted random {model.window} of the {config.block_size:,} rows"
    return f"{count} × {model.window} tokens, rows 0–{model.window - 1}"


def architecture_section(models: list[ShippedModel]) -> list[str]:
    c = lambda m: m.model.config  # noqa: E731
    facts = [said(models, _vocabulary, str), said(models, lambda m: m.window, lambda w: f"trained on windows of {w}"),
             said(models, lambda m: c(m).n_embd, lambda w: f"width {w}"),
             said(models, lambda m: c(m).n_layer, lambda n: f"{n} layer{'s' if n != 1 else ''}"),
             said(models, lambda m: c(m).n_head, lambda n: f"{n} head{'s' if n != 1 else ''}"),
             said(models, lambda m: c(m).norm, lambda n: NORMS.get(n, n)),
             said(models, lambda m: c(m).tied, lambda t: "tied output head" if t else "untied output head")]
    lines = ["", "## Architecture and training", "", ", ".join(facts) + ".",
             f"The softmax runs over the {said(models, lambda m: m.meta['vocab_trained'], lambda n: f'{n:,}')} tokens "
             "that occur in the training stories: every other token has probability zero and keeps its random initial "
             "row, rebuilt from the seed on load (that is what keeps each file under 8 MB). Validation losses below "
             "are over held-out tokens inside that vocabulary; "
             + said(models, lambda m: round(100 * m.meta["val_oov_share"], 2), lambda p: f"{p:.2f}%")
             + " of held-out tokens fall outside it.", "",
             "| model | scheme | position weights | longest input | training windows a step |", "|---|---|---:|---:|---|"]
    for m in models:
        longest = m.model.max_input_length
        lines.append(f"| {m.name} | {m.scheme.label} | {m.scheme.parameter_count(c(m)):,} "
                     f"| {f'{longest:,} tokens' if longest else 'any length'} | {_windows(m)} |")
    return lines


def results_section(models: list[ShippedModel]) -> list[str]:
    block = models[0].args.get("block_size")  # meta["val_loss"] is the loss at the block size, for every model
    lines = ["", "## Results", "",
             f"Validation loss at {said(models, lambda m: m.args.get('block_size'), lambda n: f'{n} tokens')}, in nats: "
             f"on the {HELD_OUT} "
             f"({said(models, lambda m: m.meta.get('val_tokens_tinystories', 0), lambda n: f'{n:,} tokens')}), and on "
             "every held-out story (classics included).", "",
             f"| model | val loss @{block}, TinyStories | val loss @{block}, all | unigram baseline (all) "
             "| tokens trained | steps | wall time (train) | file |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for m in models:
        meta, ts = m.meta, m.meta.get("val_loss_tinystories")
        lines.append(f"| {m.name} | {f'{ts:.3f}' if ts is not None else 'n/a'} | {meta['val_loss']:.3f} "
                     f"| {meta['unigram_val_loss']:.3f} | {meta['tokens_trained']:,} | {meta['steps']} "
                     f"| {meta['wall_seconds']:.0f} s | {m.megabytes:.1f} MB |")
    return lines


def loss_sections(models: list[ShippedModel]) -> list[str]:
    lines = ["", "### Loss by evaluation length", "",
             "Mean next-token loss over non-overlapping windows of the held-out stream, in nats ("
             f"{said(models, lambda m: m.window, lambda w: f'trained at {w}')}):", ""]
    lines += loss_rows(models, "loss_by_length")
    if all("loss_by_length_tinystories" in m.meta for m in models):
        lines += ["", f"The same, over the {HELD_OUT} only:", ""] + loss_rows(models, "loss_by_length_tinystories")
    standard = [m for m in models if m.standard]
    tables = {m.name: {int(n): e for n, e in m.meta["loss_by_length"].items()} for m in standard}
    return lines + ["", "What these numbers say (written by `lpos.analysis.lengths.length_reading` from the table above, "
                    "one model per scheme):", "", length_reading(tables, train_length=standard[0].window)]


def machine_lines(models: list[ShippedModel], rebuild_seconds: float | None, rebuilt_models: int | None) -> list[str]:
    def runs(m):
        processes, threads = m.meta.get("processes", 1), m.meta.get("torch_threads", "default")
        return (f"{m.meta['machine']}, {'one process' if processes == 1 else f'{processes} processes'} per run, "
                f"{threads} torch thread(s) per run")
    lines = ["", f"Machine: {said(models, runs, str)}."]
    if rebuild_seconds is not None:
        timed, later = models[: rebuilt_models or len(models)], models[rebuilt_models or len(models):]
        sectioned = [m for m in later if not m.standard]  # a variant's section says how it trained
        plain = [m for m in later if m.standard]
        lines.append(f"`checkpoints/rebuild.sh` ran {names(timed)} as two one-thread lanes side by side and took "
                     f"{rebuild_seconds / 60:.1f} minutes of wall time; each run's own training time is in the table."
                     + (f" {names(plain)} trained after that measurement." if plain else "")
                     + "".join(f" {m.name} trained after that measurement (its section below says how)."
                               for m in sectioned))
    return lines


def training_reads(model: ShippedModel) -> np.ndarray:
    """How many training windows read each row of a randomized table, from the recorded seed and steps (rows,)."""
    fields = {f.name for f in dataclasses.fields(TrainArgs)}
    args = TrainArgs(**{k: tuple(v) if isinstance(v, list) else v for k, v in model.args.items() if k in fields})
    reads = torch.zeros(model.model.config.block_size, dtype=torch.long)
    for step in range(model.meta["steps"]):
        reads += torch.bincount(window_positions(step, args).flatten(), minlength=len(reads))
    return reads.numpy()


# What else ran on the machine while a shipped file trained, when it was not rebuild.sh's other lane;
# keyed by the file's own recorded wall time, so a retrained file never inherits the note.
TRAINED_BESIDE: dict[tuple[str, float], str] = {
    ("learned-32", 3022.7): "no second training lane ran beside it; other engineers ran tests and helper scripts on "
    "the other core. It stopped after its last step, while writing the file, when the code changed under it (a "
    "restructuring of the package), and was resumed from its step-1000 snapshot with the same batches",
}


def trained_beside(model: ShippedModel) -> list[str]:
    beside = TRAINED_BESIDE.get((model.name, model.meta["wall_seconds"]))
    threads = model.meta.get("torch_threads", 1)
    return ["", f"While it trained ({model.meta['wall_seconds'] / 60:.1f} min, "
            f"{'one thread' if threads == 1 else f'{threads} threads'}), {beside}."] if beside else []


def short_window_section(model: ShippedModel, models: list[ShippedModel]) -> list[str]:
    """What a model trained on windows shorter than its table is, and its untrained rows, measured."""
    limit = trained_rows(model.meta, model.model)
    drift = row_drift(model.model, model.meta) if limit is not None else None
    if drift is None:
        return []
    args, rows, full = model.args, model.model.config.block_size, full_table_of(model, models)
    windows, step = args["batch_size"] * args["block_size"] // limit, args["batch_size"] * args["block_size"]
    same = [key for key in ("data_files", "steps", "tokens_trained") if full and full.meta.get(key) == model.meta.get(key)]
    lines = ["", f"## {model.name}: the learned table's second limit", "",
             f"`{model.name}` is the {model.scheme.name} scheme trained on windows of at most {limit} tokens "
             f"(`--max-length {limit}`): {windows} windows of {limit} tokens a step instead of {args['batch_size']} of "
             f"{args['block_size']}, so the same {step:,} tokens a step"
             + (f"; the same {', '.join(same).replace('_', ' ')} as `{full.name}`" if same else "")
             + f". Its table keeps all {rows} rows, but rows {limit}–{rows - 1} are never read in training and get no "
             f"gradient. Measured against its own step-0 table ({drift.source}; `lpos.analysis.coverage`):", ""]
    return lines + [f"- {line}" for line in drift_reading(drift)]


def variant_sections(models: list[ShippedModel]) -> list[str]:
    lines = []
    for model in (m for m in models if not m.standard):
        if model.model.config.random_positions:
            lines += random_table_section(model, models, reads=training_reads(model)) + trained_beside(model)
        elif trained_rows(model.meta, model.model) is not None:
            lines += short_window_section(model, models) + trained_beside(model)
    return lines


def scheme_paragraphs(models: list[ShippedModel]) -> list[str]:
    """One paragraph per scheme the files use, from the scheme's own explanation and paper."""
    lines = ["", "## The position schemes", "",
             "What each scheme does (`lpos.positions`: each scheme's `explanation` and `paper`), and its models here:"]
    for scheme in dict.fromkeys(m.scheme for m in models):
        using = [m for m in models if m.scheme is scheme]
        paper = scheme.paper
        cite = f" ({paper.authors}, [\"{paper.title}\"]({paper.url}))" if paper else ""
        weights = scheme.parameter_count(using[0].model.config)
        lines += ["", f"**{scheme.label}**{cite}: {scheme.explanation} Its position weights in `{using[0].name}`: "
                  f"{weights:,}. Models: {names(using)}."]
    return lines


def snapshot_section(models: list[ShippedModel]) -> list[str]:
    standard = [m for m in models if m.standard and "timeline" in m.meta]
    if not standard:
        return []
    timeline, groups = standard[0].meta["timeline"], {}
    for m in (m for m in models if "timeline" in m.meta):
        groups.setdefault(tuple(m.meta["timeline"]["steps"]), []).append(m)  # the first: the first standard model's
    steps, shown = timeline["steps"], [m for m in standard if m.meta["timeline"]["steps"] == timeline["steps"]]
    kinds = {kind: [m for m in models if m.meta.get("timeline", {}).get("position_kind") == kind]
             for kind in ("table", "block1")}
    taken = "; ".join(f"{names(group)}: {len(at)}, at steps {', '.join(str(s) for s in at)}" for at, group in groups.items())
    lines = ["", "## Training snapshots", "",
             f"Each file's `meta[\"timeline\"]` holds snapshots taken at step 0, then evenly spaced in log(step) ({taken})"
             + f": the validation loss on the first {timeline['eval_tokens']:,} held-out TinyStories tokens, the "
             f"position rows (the table's rows a {standard[0].window}-token input reads: {names(kinds['table'])}; "
             f"what block 1 writes at each position: {names(kinds['block1'])}), the 8 nearest tokens of 40 probe "
             "words, the first layer's attention on a probe sentence, and the cosine between the summed rows of its "
             "repeated word. The Training timeline page replays them.", "",
             f"Loss per snapshot (on those {timeline['eval_tokens']:,} tokens, so not the table above's figure) and "
             "each full table as it forms:", ""]
    tables = [m for m in shown if m.scheme.has_table]
    structure = {m.name: [table_structure(rows.float()) for rows in m.meta["timeline"]["position_rows"]] for m in tables}
    head = "| step | " + " | ".join(f"{m.name} loss" for m in shown) + "".join(
        f" | {m.name}: 10 nearest rows, mean distance | cosine at 1 | cosine at 64" for m in tables)
    lines += [head + " |", "|---:|" + "---:|" * (len(shown) + 3 * len(tables))]
    for i, step in enumerate(steps):
        row = [str(step)] + [f"{m.meta['timeline']['val_loss'][i]:.3f}" for m in shown]
        for m in tables:
            s = structure[m.name][i]
            row += [f"{s['neighbour_distance']:.1f}"] + [f"{s[k]:.2f}" if k in s else "n/a"
                                                         for k in ("cosine_at_1", "cosine_at_64")]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def _command(model: ShippedModel, data: dict[tuple, str]) -> str:
    args = model.args
    options = ([f"--max-length {args['max_length']}"] if args.get("max_length") else []) + (
        [f"--random-positions {args['random_positions']}"] if args.get("random_positions") else [])
    return (f"python -m lpos train --scheme {model.model.config.position} {' '.join(options + [''])}--data "
            f"${data[tuple(model.meta['data_files'])]} --out checkpoints/{model.path.name} --steps {model.meta['steps']} "
            f"--threads {args.get('threads') or model.meta.get('torch_threads', 1)} --resume")


def rebuild_section(models: list[ShippedModel]) -> list[str]:
    files = list(dict.fromkeys(tuple(m.meta["data_files"]) for m in models))
    data = {f: "data" if i == 0 else f"data{i + 1}" for i, f in enumerate(files)}
    a, recipe = models[0].args, ("lr", "warmup", "min_lr_fraction", "batch_size", "block_size", "weight_decay")
    differ = [m for m in models if any(m.args.get(k) != a.get(k) for k in recipe)]
    script = ([f"{name}=\"{' '.join('../shared/data/' + f for f in group)}\"" for group, name in data.items()]
              + [_command(m, data) for m in models])
    return ["", "## Rebuild", "", "```bash", REBUILD, "python -m lpos card   # rewrite this card from the new files", "```",
            "", "which runs, two one-thread lanes at a time, each model's command (from its own `train_args`):", "",
            "```bash", *script, "```", "",
            "A run is bit-identical to the shipped file for the same torch thread count (one here): a 30-step run of",
            "`learned` and of `rope` gave identical weights from the code that trained the files and from this code.",
            f"Training: AdamW (betas 0.9, 0.95), learning rate {a['lr']:g} with {a['warmup']} warm-up steps and a cosine "
            f"decay to {a['min_lr_fraction']:.0%}, batch {a['batch_size']} × {a['block_size']}, weight decay "
            f"{a['weight_decay']:g} on every matrix but the token table (the learned position tables included), and "
            f"the learned table drawn at N(0, {a.get('wpe_init_std', 0.02):g}) instead of GPT-2's N(0, 0.02), so the "
            "initial noise does not outweigh what training writes"
            + (f" ({names(differ)}: other settings, in their `train_args`)" if differ else "") + "."
            + "".join(f" {m.name}'s own position weights learn at {m.meta['scheme_learning_rate_scale']:g} times that "
                      f"rate, without weight decay (its module, `lpos/positions/{m.scheme.name}.py`, says why)."
                      for m in models if m.meta.get("scheme_learning_rate_scale", 1.0) != 1.0), "",
            "and `python -m lpos eval --checkpoint NAME` reproduces the loss-by-length rows of NAME (its \"all held-out "
            f"stories\" and \"{HELD_OUT}\" rows).", "", OTHER_MODELS]


def model_card(*, rebuild_seconds: float | None = None, rebuilt_models: int | None = None,
               folder: Path | str | None = None) -> str:
    """The card of the checkpoints in `folder` (the shipped checkpoints/ by default); `rebuild_seconds` is a
    measured rebuild.sh wall time, over its first `rebuilt_models` models (all when None)."""
    models = read_models(Path(folder or checkpoints.CHECKPOINT_DIR))
    if not any(m.standard for m in models):
        raise ValueError(f"no checkpoints trained by the common recipe to describe in {folder or checkpoints.CHECKPOINT_DIR}")
    lines = (intro(models) + data_section(models) + architecture_section(models) + results_section(models)
             + goal_lines(models)
             + loss_sections(models) + machine_lines(models, rebuild_seconds, rebuilt_models)
             + variant_sections(models) + scheme_paragraphs(models) + snapshot_section(models) + rebuild_section(models))
    return "\n".join(lines)
