"""The model card's measured parts: the goals and the sections on the learned table's variants, each
written from the checkpoint files (`ShippedModel`) and nothing else.

A model is found by what its scheme is and how it was trained, never by its name: the model without
positions is the one whose scheme adds no rows and does nothing in attention; a table's variants are
told apart by their training windows and `GPTConfig.random_positions`. `lpos.card` assembles the card.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from lpos.analysis.lengths import training_length
from lpos.analysis.similarity import initial_position_rows
from lpos.analysis.coverage import DIRECTION_KEPT, RowDrift, drift_summary, starting_table
from lpos.analysis.timeline import BAND_DISTANCES, table_structure
from lpos.model import GPT
from lpos.positions.alibi import Alibi
from lpos.positions.fire import Fire
from lpos.positions.rope import Rope
from lpos.positions.t5 import T5Bias

MB = 2**20  # the card's MB, in the table and in the size goal
GOAL_LOSS, GOAL_SPREAD, GOAL_MINUTES, GOAL_FILE_MB = 3.1, 0.3, 25, 8
GOAL_LEARNED_BIAS = 0.1  # T5's, FIRE's and each partial rotation's loss at the training length, at most this above RoPE's
GOAL_RANDOM_LENGTH, GOAL_RANDOM_STRETCH, GOAL_RANDOM_TABLE = 512, 0.3, 0.15  # the randomized table's
RANDOM_PAPER = ('Ruoss et al. 2023, ["Randomized Positional Encodings Boost Length Generalization of Transformers"]'
                "(https://arxiv.org/abs/2305.16843)")
HELD_OUT = "held-out TinyStories stories"  # what meta["loss_by_length_tinystories"] scores, as `lpos eval` names it
PREVIOUS_TOKENS, PREVIOUS_LOSSES = 1_024_000, "3.80 to 4.07"  # the models this recipe replaced, for comparison


@dataclass(frozen=True)
class ShippedModel:
    """One checkpoint file, loaded: the card reads everything it says from these."""
    name: str
    model: GPT
    meta: dict
    path: Path

    @property
    def scheme(self):
        return self.model.scheme

    @property
    def args(self) -> dict:
        return self.meta.get("train_args", {})

    @property
    def window(self) -> int:  # the longest training window
        return training_length(self.meta, self.model)

    @property
    def standard(self) -> bool:
        """Trained by the common recipe: full windows, positions 0..T-1 (not a variant of its scheme)."""
        return self.window == self.args.get("block_size") and not self.model.config.random_positions

    @property
    def megabytes(self) -> float:
        return self.path.stat().st_size / MB

    def tinystories(self, length: int, *, key: str = "loss_by_length_tinystories") -> float | None:
        """Loss at `length` on the held-out TinyStories stories (`key="loss_by_length"`: on all held-out stories)."""
        return ({int(n): e for n, e in self.meta.get(key, {}).items()}.get(length) or {}).get("loss")


def verdict(ok: bool, missed_by: float | None = None) -> str:
    return "**met**" if ok else "**missed**" if missed_by is None else f"**missed by {missed_by:.3f}**"


def names(models: list[ShippedModel]) -> str:
    return ", ".join(m.name for m in models)


def most_common(models: list[ShippedModel], value) -> tuple[object, list[ShippedModel]]:
    """The value most models share, and the models that differ from it."""
    values = [value(m) for m in models]
    common = max(values, key=values.count)
    return common, [m for m, v in zip(models, values) if v != common]


def said(models: list[ShippedModel], value, text) -> str:
    """`text(common value)`, and each model that differs in parentheses."""
    common, others = most_common(models, value)
    return text(common) + (f" ({'; '.join(f'{m.name}: {text(value(m))}' for m in others)})" if others else "")


def held_out(models: list[ShippedModel]) -> str:
    """Which text a TinyStories loss is on, and its size."""
    size = said(models, lambda m: m.meta.get("val_tokens_tinystories", 0), lambda n: f"{n:,} tokens")
    return (f"the {HELD_OUT} of each model's own corpus ({size}): `meta[\"loss_by_length_tinystories\"]`, the "
            f"\"{HELD_OUT}\" rows of `python -m lpos eval --checkpoint NAME`")


# ------------------------------------------------------------------ the goals


def loss_goals(standard: list[ShippedModel]) -> list[str]:
    """Every scheme's held-out loss at the training length, their spread, and what no positions costs."""
    losses = {m.name: m.tinystories(m.window) for m in standard if m.tinystories(m.window) is not None}
    if not losses:
        return []
    first, worst = standard[0], max(losses, key=losses.get)
    spread = losses[worst] - min(losses.values())
    lines = [f"- Held-out TinyStories loss at {first.window} at most {GOAL_LOSS} nats for every scheme: worst "
             f"{losses[worst]:.3f} ({worst}) — {verdict(losses[worst] <= GOAL_LOSS, losses[worst] - GOAL_LOSS)}.",
             f"- Spread at most {GOAL_SPREAD} nats: {spread:.3f} — {verdict(spread <= GOAL_SPREAD)}."]
    blind = [m for m in standard if not m.scheme.adds_rows and not m.scheme.in_attention and m.name in losses]
    others = [v for n, v in losses.items() if n not in {m.name for m in blind}]
    for model in blind[:1] if len(others) > 1 else []:
        gap, worse = losses[model.name] - max(others), [n for n, v in losses.items() if v > losses[model.name]]
        lines.append(f"  Without `{model.name}` (the model that gets no position signal at all) the other {len(others)} "
                     f"schemes span {max(others) - min(others):.3f} nats; `{model.name}` sits {abs(gap):.3f} "
                     + ("above the worst of them: that gap is what having no positions costs at this size." if gap > 0
                        else f"below the worst of them: {', '.join(worse)} did worse than no positions at all."))
    if losses[worst] > GOAL_LOSS:
        a, meta = first.args, first.meta
        lines.append(f"  Tried: {meta['tokens_trained']:,} tokens a model ({meta['steps']:,} steps of {a['batch_size']} × "
                     f"{a['block_size']}), {meta['tokens_trained'] / PREVIOUS_TOKENS:.1f}× the {PREVIOUS_TOKENS:,} of the "
                     f"models shipped before 2026-12 (loss over all held-out stories {PREVIOUS_LOSSES}), at learning "
                     f"rate {a['lr']:g}. More steps would lower every loss, but the {GOAL_MINUTES}-minute budget per "
                     "model on two cores is spent.")
    lines.append(f"  Every loss here is on {held_out(standard)}.")
    return lines


def time_goal(models: list[ShippedModel]) -> list[str]:
    over = [f"{m.name} ({m.meta['wall_seconds'] / 60:.1f} min)" for m in models
            if m.meta["wall_seconds"] > GOAL_MINUTES * 60]
    longest = max(models, key=lambda m: m.meta["wall_seconds"])
    return [f"- At most {GOAL_MINUTES} minutes of training a model on the 2 cores: "
            + (f"**missed** by {', '.join(over)}; " if over else
               f"**met** (longest: {longest.name}, {longest.meta['wall_seconds'] / 60:.1f} min); ")
            + "the times are in the table (wall time, with another lane training beside each run)."]


def table_rows(model: ShippedModel) -> torch.Tensor:
    """Every row of a model's position table, in order, (rows, C), through the scheme's own hook."""
    return model.scheme.position_rows(model.model, torch.arange(model.model.max_input_length)).detach().float()


def table_goals(standard: list[ShippedModel]) -> list[str]:
    """The learned table's structure: nearby rows alike, far rows not (every standard model with a table)."""
    lines = []
    for model in (m for m in standard if m.scheme.has_table):
        trained, config = table_structure(table_rows(model)), model.model.config
        timeline = model.meta.get("timeline")
        start = table_structure(timeline["position_rows"][0].float()) if timeline else None
        random = table_structure(initial_position_rows(config.block_size, config.n_embd))
        near, far = BAND_DISTANCES[0], max(d for d in BAND_DISTANCES if f"cosine_at_{d}" in trained)  # 64: 65 rows
        drop = trained[f"cosine_at_{near}"] - trained[f"cosine_at_{far}"]
        lines += [
            f"- {model.scheme.label} (`{model.name}`), the 10 nearest positions of a position at most 10 positions away "
            f"on average: {trained['neighbour_distance']:.1f} — {verdict(trained['neighbour_distance'] <= 10)} "
            f"(random N(0, 0.02) rows: {random['neighbour_distance']:.1f}"
            + (f"; this model at step 0: {start['neighbour_distance']:.1f}" if start else "") + ").",
            f"- Mean cosine of its rows at distance {near} at least 0.5: {trained[f'cosine_at_{near}']:.3f} — "
            f"{verdict(trained[f'cosine_at_{near}'] >= 0.5)}"
            + (f"; at least 0.5 lower at distance {far}: {trained[f'cosine_at_{far}']:.3f}, {drop:.3f} lower — "
               f"{verdict(drop >= 0.5)}" if far > near else "") + ". By distance ("
            + ", ".join(str(d) for d in BAND_DISTANCES if d <= far) + "): "
            + ", ".join(f"{trained[f'cosine_at_{d}']:.3f}" for d in BAND_DISTANCES if d <= far) + ".",
            f"  Measured by `lpos.analysis.timeline.table_structure` on `{model.path.name}`'s table, all "
            f"{config.block_size} rows.",
        ]
    return lines


def alibi_goal(models: list[ShippedModel]) -> list[str]:
    """Press et al. 2021's claim, measured: the ALiBi model degrades least from its training length to the longest."""
    lines = []
    loss = lambda m, n: m.tinystories(n, key="loss_by_length")  # noqa: E731  (all held-out stories, as before)
    for alibi in (m for m in models if m.standard and isinstance(m.scheme, Alibi)):
        short, long = alibi.window, max(int(n) for n in alibi.meta.get("loss_by_length", {}))
        degrade = {m.name: loss(m, long) - loss(m, short) for m in models
                   if m.window == short and loss(m, short) is not None and loss(m, long) is not None}
        if alibi.name not in degrade:
            continue
        best = min(degrade, key=degrade.get)
        lines.append(f"- {alibi.scheme.label} degrades least from {short} to {long} tokens (Press et al. 2021), over the "
                     f"{len(degrade)} models trained at {short} that read {long}: the least is **{best}** "
                     f"({degrade[best]:+.3f} nats)" + ("" if best == alibi.name else
                                                       f"; `{alibi.name}` {degrade[alibi.name]:+.3f}")
                     + f" — {verdict(best == alibi.name)} (all held-out stories).")
    return lines


def learned_bias_goals(standard: list[ShippedModel]) -> list[str]:
    """T5's and FIRE's loss at the training length, and that of each scheme rotating part of what RoPE rotates, within
    GOAL_LEARNED_BIAS of RoPE's."""
    lines = []
    compared = [m for m in standard if isinstance(m.scheme, (T5Bias, Fire))
                or isinstance(m.scheme, Rope) and not m.scheme.rotates_fully]
    for rope in (m for m in standard if isinstance(m.scheme, Rope) and m.scheme.rotates_fully
                 and m.tinystories(m.window) is not None):
        for model in (m for m in compared if m.window == rope.window):
            loss, reference = model.tinystories(model.window), rope.tinystories(rope.window)
            if loss is None:
                continue
            gap = loss - reference
            lines.append(f"- {model.scheme.label} (`{model.name}`) within {GOAL_LEARNED_BIAS} nats of {rope.scheme.label} "
                         f"(`{rope.name}`) at {rope.window} tokens, held out: {loss:.3f} against {reference:.3f} "
                         f"({gap:+.3f}) — {verdict(gap <= GOAL_LEARNED_BIAS, gap - GOAL_LEARNED_BIAS)}.")
    return lines


def full_table_of(model: ShippedModel, models: list[ShippedModel]) -> ShippedModel | None:
    """The standard model of the same scheme as `model` (learned for learned-rand and learned-32)."""
    return next((m for m in models if m.standard and m.scheme is model.scheme), None)


def random_table_goals(models: list[ShippedModel]) -> list[str]:
    """The randomized table reads far past its training windows, and costs little at them."""
    lines = []
    for model in (m for m in models if m.model.config.random_positions):
        short, long = model.tinystories(model.window), model.tinystories(GOAL_RANDOM_LENGTH)
        if short is not None and long is not None:
            lines.append(f"- `{model.name}` at {GOAL_RANDOM_LENGTH} tokens within {GOAL_RANDOM_STRETCH} nats of itself "
                         f"at {model.window}, held out: {long:.3f} against {short:.3f} ({long - short:+.3f}) — "
                         f"{verdict(long - short <= GOAL_RANDOM_STRETCH, long - short - GOAL_RANDOM_STRETCH)}.")
        full = full_table_of(model, models)
        reference = full.tinystories(model.window) if full else None
        if short is not None and reference is not None:
            lines.append(f"- `{model.name}` at {model.window} tokens within {GOAL_RANDOM_TABLE} nats of `{full.name}` "
                         f"(its scheme with rows 0..{full.window - 1}), held out: {short:.3f} against {reference:.3f} "
                         f"({short - reference:+.3f}) — "
                         f"{verdict(short - reference <= GOAL_RANDOM_TABLE, short - reference - GOAL_RANDOM_TABLE)}.")
    if lines:
        lines.append(f"  Both on {held_out([m for m in models if m.model.config.random_positions or m.standard])}.")
    return lines


def file_goals(models: list[ShippedModel]) -> list[str]:
    """Each file's size on disk, and the token rows it stores."""
    over = [f"{m.name} ({m.megabytes:.2f} MB)" for m in models if m.megabytes >= GOAL_FILE_MB]
    largest = max(models, key=lambda m: m.megabytes)
    stored = sorted({len(m.model.output_vocab) for m in models if m.model.output_vocab is not None})
    lines = [f"- Every file under {GOAL_FILE_MB} MB on disk (MB = 2^20 bytes): "
             + (f"**missed** by {', '.join(over)}." if over else
                f"**met** (largest: `{largest.path.name}`, {largest.path.stat().st_size:,} bytes, "
                f"{largest.megabytes:.2f} MB).")]
    if stored:
        counts = f"{stored[0]:,}" if len(stored) == 1 else f"{stored[0]:,} to {stored[-1]:,}"
        lines.append(f"- Rows of tokens never seen in training keep their initial values exactly: each file stores "
                     f"{counts} token rows of {models[0].model.config.vocab_size:,} (its training vocabulary's) and "
                     "the others are rebuilt from the seed on load — **met** by construction; "
                     "`tests/training/test_train.py::test_untouched_rows_stay_initial` checks it.")
    return lines


def goal_lines(models: list[ShippedModel]) -> list[str]:
    standard = [m for m in models if m.standard]
    return (["", "### Goals, measured", ""] + loss_goals(standard) + learned_bias_goals(standard) + time_goal(models)
            + table_goals(standard) + alibi_goal(models) + random_table_goals(models) + file_goals(models))


# ------------------------------------------------------------------ the learned table's variants


def random_start(model: ShippedModel) -> tuple[torch.Tensor, torch.Tensor | None, str]:
    """The randomized table's step-0 rows and which rows those are (None: all), with how they were found:
    `coverage.starting_table`'s rebuild from the training seed (checked against the step-0 snapshot at
    the rows it holds), else the snapshot itself at those rows."""
    found = starting_table(model.meta, model.model)
    if found is not None:
        return torch.as_tensor(found[0]), None, f"{found[1]}, at the rows it holds"
    snapshot = torch.as_tensor(model.meta["timeline"]["position_rows"][0]).float()  # (T, C)
    read = model.scheme.input_positions(model.model.config, len(snapshot), 0)  # the rows the snapshot holds
    return snapshot, read, f"the step-0 snapshot (float16), which holds only the {len(read)} rows a {len(read)}-token input reads"


def _random_drift(model: ShippedModel) -> tuple[RowDrift, np.ndarray]:
    """Per row measured: cosine with its step-0 row and length relative to it, rows before the training
    length marked "trained" (the rows a full-window table has too); and the rows' positions."""
    start, subset, source = random_start(model)
    end = table_rows(model).double()[subset if subset is not None else slice(None)]  # (n, C)
    positions = subset.numpy() if subset is not None else np.arange(len(end))
    cosine = torch.nn.functional.cosine_similarity(end, start.double(), dim=-1).clamp(-1.0, 1.0).numpy()
    ratio = (end.norm(dim=-1) / start.double().norm(dim=-1).clamp(min=1e-30)).numpy()
    frame = pd.DataFrame({"position": positions, "cosine": cosine, "norm_ratio": ratio, "trained": positions < model.window})
    return RowDrift(frame, model.window, source), positions


def _random_intro(model: ShippedModel, full: ShippedModel | None, reads: np.ndarray) -> str:
    """What a randomized table is: its rows, its windows, how positions are drawn in training and at evaluation."""
    config, window = model.model.config, model.window
    rows, evaluated = config.block_size, model.scheme.input_positions(config, window, 0)
    return (f"`{model.name}` is the {model.scheme.name} scheme with a table of {rows:,} rows (`--random-positions "
            f"{rows}`), trained on {model.args['batch_size']} windows of {window} tokens a step"
            + (f" like `{full.name}`" if full else "") + f". Each training window reads a sorted random subset of "
            f"{window} of the {rows:,} rows, drawn anew for every window ({RANDOM_PAPER}), so rows far past {window} "
            f"train too: {int((reads > 0).sum()):,} of the {rows:,} rows were read in training, each by "
            f"{int(reads.min()):,} to {int(reads.max()):,} windows ({reads.mean():,.1f} on average). At evaluation, as "
            "in the paper, positions are drawn too, from one fixed permutation (`GPTConfig.position_seed`), so an input "
            f"always reads the same rows: n tokens read the first n draws, sorted; {window} tokens read {window} rows "
            f"between {int(evaluated[0])} and {int(evaluated[-1])}, one every {float(evaluated.diff().float().mean()):.1f} "
            f"on average, and {rows:,} tokens every row. A longer input draws all its positions anew, so a key/value "
            "cache cannot continue one.")


def random_table_section(model: ShippedModel, models: list[ShippedModel], *, reads: np.ndarray) -> list[str]:
    """A table read at random positions: what it is, how far its rows moved, its loss by length beside the
    full-window table's. `reads`: how many training windows read each row, (rows,)."""
    full, (drift, positions) = full_table_of(model, models), _random_drift(model)
    structure = table_structure(table_rows(model))
    lines = ["", f"## {model.name}: a table read at random positions", "", _random_intro(model, full, reads), "",
             f"What its rows learned, against its step-0 table ({drift.source}; cosine with the step-0 row and "
             "length relative to it, per row):", "",
             f"- {int((drift.rows.cosine < DIRECTION_KEPT).sum()):,} of the {len(positions):,} rows measured turned "
             f"away from their step-0 direction (cosine below {DIRECTION_KEPT}): weight decay alone only shortens a "
             "row, so these are the rows training's gradients moved."]
    for part, group in drift_summary(drift).items():
        where = "" if not full else f", rows `{full.name}` has too" if part == "trained" else f", past `{full.name}`'s last row"
        lines += [f"- Rows {group['first']}–{group['last']} ({group['count']:,} measured{where}): cosine with the "
                  f"step-0 row {group['cosine_min']:.3f} to {group['cosine_max']:.3f} ({group['cosine_mean']:.3f} on "
                  f"average); length ×{group['ratio_min']:.2f} to ×{group['ratio_max']:.2f}."] if group else []
    lines.append(f"- The whole table, all {model.model.config.block_size:,} rows (`table_structure`): the 10 nearest "
                 f"rows of a row sit {structure['neighbour_distance']:.1f} positions away on average; mean cosine at "
                 "distance " + ", ".join(f"{d}: {structure[f'cosine_at_{d}']:.3f}" for d in BAND_DISTANCES) + ".")
    return (lines + ["", f"Loss by evaluation length on the {HELD_OUT} (trained at {model.window}):", ""]
            + loss_rows([m for m in (full, model) if m], "loss_by_length_tinystories"))


def loss_rows(models: list[ShippedModel], key: str) -> list[str]:
    """A Markdown table of `meta[key]` (a loss by evaluation length) per model; a note where there is no number."""
    lengths = sorted({int(n) for m in models for n in m.meta.get(key, {})})
    rows = ["| model | " + " | ".join(str(n) for n in lengths) + " |", "|---|" + "---:|" * len(lengths)]
    for m in models:
        by_length = {int(n): e for n, e in m.meta.get(key, {}).items()}
        cells = [by_length.get(n, {"note": "not measured"}) for n in lengths]
        rows.append(f"| {m.name} | " + " | ".join(f"{e['loss']:.3f}" if e.get("loss") is not None
                                                    else e.get("note", "n/a") for e in cells) + " |")
    return rows
