"""The learned table's second limit: rows that training never reaches.

A model trained on windows of at most L tokens (`python -m lpos train --max-length L`) reads rows
0..L-1 of its learned table in every batch and rows L.. never: those get no gradient, so the only
thing that moves them is weight decay, which scales a row without turning it. Measured here
against the model's own step-0 table (rebuilt from its seed, checked against the step-0
snapshot): per row, the cosine with its starting row and its length relative to it; and the
loss at every position of windows longer than L, where the untrained rows are read. Every
sentence is written from those numbers.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from lpos.analysis.timeline import starting_rows
from lpos.corpus import held_out_stream, story
from lpos.model import GPT, GPTConfig, seeded_model
from lpos.tokenizer import encode

DIRECTION_KEPT = 0.9995  # a cosine at least this high prints as 1.000 (to 3 decimals) and is "direction kept"


def trained_rows(meta: dict, model: GPT) -> int | None:
    """L when the model's learned table has more rows than its longest training window L (rows L
    onwards never trained); None for full-window training, a table read at random positions (any row
    can be drawn), other schemes, or no record. `model`: a GPT, or what else has its `config` and `scheme` (a
    shipped model's card, lpos.checkpoints.cards)."""
    args = meta.get("train_args") if isinstance(meta, dict) else None
    if not isinstance(args, dict) or not model.scheme.has_table or model.config.random_positions:
        return None
    length = args.get("max_length")
    if isinstance(length, int) and 2 <= length < model.config.block_size:
        return length
    return None


def starting_table(meta: dict, model: GPT) -> tuple[np.ndarray, str] | None:
    """The learned table as training started it, (T, C), and how it was obtained: rebuilt exactly
    from the recorded seed (when that rebuild rounds to the stored float16 step-0 snapshot bit
    for bit, at the rows the snapshot holds: a randomized table's snapshot holds the rows a window
    reads), else the snapshot itself when it is the whole table; None without a step-0 snapshot."""
    c = model.config
    snapshot = starting_rows(meta, c.block_size)
    if snapshot is None:
        return None
    args = meta.get("train_args", {})
    if {"seed", "wpe_init_std"} <= set(args):
        config = GPTConfig(block_size=c.block_size, n_layer=c.n_layer, n_head=c.n_head, n_embd=c.n_embd,
                           position=c.position, init_seed=int(args["seed"]), random_positions=c.random_positions,
                           position_seed=c.position_seed)
        with torch.random.fork_rng(devices=[]):
            start = seeded_model(config, seed=int(args["seed"]), wpe_init_std=float(args["wpe_init_std"]))
        rows = start.transformer.wpe.weight.detach()
        read = model.scheme.input_positions(c, len(snapshot), 0)  # the rows the snapshot took
        if torch.equal(rows[read].half(), torch.as_tensor(snapshot).half()):
            return rows.numpy(), "rebuilt from the training seed, matching the stored step-0 snapshot"
    if len(snapshot) != c.block_size:
        return None
    return snapshot, "the step-0 snapshot (float16)"


@dataclass(frozen=True)
class RowDrift:
    rows: pd.DataFrame  # position, cosine (with its step-0 row), norm_ratio (its length / step-0 length), trained
    trained_rows: int  # L: rows 0..L-1 trained
    source: str  # how the step-0 table was obtained


def row_drift(model: GPT, meta: dict) -> RowDrift | None:
    """How far every row of the learned table moved from its step-0 row; None unless the model
    trained on windows shorter than its table, or read it at random positions (every row can be drawn:
    all count as trained), and kept its step-0 snapshot."""
    length = model.config.block_size if model.config.random_positions else trained_rows(meta, model)
    found = starting_table(meta, model) if length is not None else None
    if found is None:
        return None
    start, source = torch.as_tensor(found[0], dtype=torch.float64), found[1]
    end = model.transformer.wpe.weight.detach().double()  # (T, C)
    cosine = torch.nn.functional.cosine_similarity(end, start, dim=-1).clamp(-1.0, 1.0)  # (T,)
    ratio = end.norm(dim=-1) / start.norm(dim=-1).clamp(min=1e-30)  # (T,)
    positions = np.arange(len(end))
    return RowDrift(pd.DataFrame({"position": positions, "cosine": cosine.numpy(), "norm_ratio": ratio.numpy(),
                                  "trained": positions < length}), length, source)


def _group(rows: pd.DataFrame) -> dict:
    return {"first": int(rows.position.min()), "last": int(rows.position.max()), "count": len(rows),
            "cosine_min": float(rows.cosine.min()), "cosine_max": float(rows.cosine.max()),
            "cosine_mean": float(rows.cosine.mean()), "ratio_min": float(rows.norm_ratio.min()),
            "ratio_max": float(rows.norm_ratio.max()), "ratio_mean": float(rows.norm_ratio.mean())}


def drift_summary(drift: RowDrift, *, upto: int | None = None) -> dict[str, dict | None]:
    """{"trained": ..., "untrained": ...}: cosine and length ratio (min, max, mean) of the rows
    before L and from L on, among the first `upto` rows (all when None); a group with no rows is None."""
    rows = drift.rows if upto is None else drift.rows[drift.rows.position < upto]
    return {name: _group(part) if len(part) else None
            for name, part in (("trained", rows[rows.trained]), ("untrained", rows[~rows.trained]))}


def _span(low: float, high: float, digits: int) -> str:
    return f"{low:.{digits}f}" if f"{low:.{digits}f}" == f"{high:.{digits}f}" else f"{low:.{digits}f} to {high:.{digits}f}"


def _direction(group: dict) -> str:
    if group["cosine_min"] >= DIRECTION_KEPT:
        return f"direction kept (cosine with the step-0 row: {_span(group['cosine_min'], group['cosine_max'], 3)})"
    return (f"turned away from the step-0 row (cosine with it: {_span(group['cosine_min'], group['cosine_max'], 3)}, "
            f"{group['cosine_mean']:.3f} on average)")


def _length(group: dict) -> str:
    low, high = group["ratio_min"], group["ratio_max"]
    if f"{low:.3f}" == f"{high:.3f}" == "1.000":
        return "length unchanged (×1.000)"
    grew = "shrunk" if high < 1 else "grown" if low > 1 else "shrunk or grown"
    return f"length {grew} to ×{_span(low, high, 3 if high < 10 else 1)} of the step-0 length"


def drift_reading(drift: RowDrift, *, upto: int | None = None) -> list[str]:
    """Markdown sentences: what the trained and the never-trained rows did, from the numbers."""
    lines = []
    summary = drift_summary(drift, upto=upto)
    for name, group in summary.items():
        if group is None:
            continue
        rows = f"rows {group['first']}–{group['last']}" if group["count"] > 1 else f"row {group['first']}"
        what = ("read in every training batch" if name == "trained" else
                f"never read in training (windows of at most {drift.trained_rows} tokens)")
        lines.append(f"**{rows.capitalize()}**, {what}: {_direction(group)}; {_length(group)}.")
    return lines


POSITION_WINDOWS = 64  # windows scored per model for the loss by position


def position_loss_streams(meta: dict | None, *, length: int) -> list[tuple[torch.Tensor, str]]:
    """The texts the loss by position can read, preferred first, each with how a caption names it:
    the held-out stories of `meta`'s corpus (when on this machine), then the built-in story."""
    streams = []
    held_out = held_out_stream(meta or {}, tokens=POSITION_WINDOWS * length + 1)
    if held_out is not None and len(held_out) > length:
        streams.append((held_out, "held-out stories the models never trained on"))
    streams.append((torch.tensor(encode(story()), dtype=torch.long), "the built-in story"))  # a learner reads no
    # remark about where the corpus is: the caption names the text read, and that is all it needs
    return streams


def position_loss_text(meta: dict | None, *, length: int) -> tuple[torch.Tensor, str]:
    """The text the loss by position reads, and how a caption names it: the first of position_loss_streams."""
    return position_loss_streams(meta, length=length)[0]


@torch.no_grad()
def loss_by_position(model: GPT, stream: torch.Tensor, *, length: int, max_windows: int = 64) -> np.ndarray:
    """Mean next-token loss at each position 0..length-1 over non-overlapping windows of `length`
    tokens of `stream` (at most `max_windows`): position p predicts the token after it, having
    read rows 0..p. NaN where no target was in the model's vocabulary. (length,)"""
    windows = min(max_windows, (len(stream) - 1) // length)
    if windows < 1:
        raise ValueError(f"the text has {len(stream)} tokens; one window needs {length + 1}")
    x = stream[: windows * length].view(windows, length)  # (n, L)
    y = stream[1 : windows * length + 1].view(windows, length)  # (n, L) the next tokens
    losses = model.vocab_loss(x, y, reduction="none")  # (n, L), NaN outside the vocabulary
    counted = (~losses.isnan()).sum(dim=0)
    return (losses.nansum(dim=0) / counted.clamp(min=1)).masked_fill(counted == 0, float("nan")).numpy()


def position_loss_summary(losses: dict[str, np.ndarray], *, trained: int) -> dict[str, tuple[float, float]]:
    """Per model: (mean loss at positions < trained, mean loss at positions >= trained)."""
    return {name: (float(np.nanmean(curve[:trained])), float(np.nanmean(curve[trained:]))) for name, curve in losses.items()}


def position_loss_reading(losses: dict[str, np.ndarray], *, short: str, full: str, trained: int, windows: int) -> str:
    """Markdown: what reading never-trained rows does to `short`'s predictions, beside `full`'s."""
    means = position_loss_summary(losses, trained=trained)
    (short_in, short_out), (full_in, full_out) = means[short], means[full]
    last = len(losses[short]) - 1  # the last position
    gap_in, gap_out = short_in - full_in, short_out - full_out
    return (f"Over {windows} windows of {last + 1} tokens: at positions 0–{trained - 1}, whose rows trained, "
            f"**{short}** averages **{short_in:.2f}** nats against {full_in:.2f} for **{full}** ({gap_in:+.2f}). "
            f"At positions {trained}–{last}, read through rows that never trained, **{short}** averages "
            f"**{short_out:.2f}** against {full_out:.2f} ({gap_out:+.2f}): "
            + (f"the gap to {full} is {gap_out - gap_in:.2f} nats wider there than where its rows trained."
               if gap_out > gap_in else f"the gap to {full} is no wider there than where its rows trained."))


def split_band(rows: np.ndarray | torch.Tensor, trained: int) -> dict[str, float]:
    """Mean cosine of neighbouring rows (distance 1) among rows < trained and among rows >= trained,
    rounded to 2 decimals (+ 0.0: no "-0.00")."""
    rows = torch.as_tensor(rows, dtype=torch.float64)
    unit = rows / rows.norm(dim=-1, keepdim=True).clamp(min=1e-30)
    neighbours = (unit[1:] * unit[:-1]).sum(dim=-1)  # (T-1,) cosine of rows i and i+1
    return {"trained": round(float(neighbours[: trained - 1].mean()), 2) + 0.0,
            "untrained": round(float(neighbours[trained:].mean()), 2) + 0.0}


def timeline_coverage_reading(steps: list[int], tables: np.ndarray, trained: int) -> str:
    """One sentence on a timeline of the learned table (S, T, C): the band forms among the rows
    training reads, and what the rows it never reads do, at the first and last snapshot."""
    first, last = split_band(tables[0], trained), split_band(tables[-1], trained)
    rows = tables.shape[1]
    return (f"Only rows 0–{trained - 1} are read in training (windows of at most {trained} tokens): neighbouring "
            f"rows there go from cosine {first['trained']:.2f} at step {steps[0]} to {last['trained']:.2f} at step "
            f"{steps[-1]}, while rows {trained}–{rows - 1} go from {first['untrained']:.2f} to "
            f"{last['untrained']:.2f}.")
