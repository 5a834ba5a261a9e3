"""Loss against evaluation length, per-token loss along a text, and the unigram baseline.

Loss at length L is the mean next-token loss over non-overlapping windows of L tokens of the
held-out stream (Press et al. 2021 evaluate the same way). When the model's softmax runs over a
corpus vocabulary, targets outside it are left out and their share is reported separately:
the model gives them probability zero.
"""
from __future__ import annotations

import math
from collections import Counter

import torch
import torch.nn.functional as F

from lpos.model import GPT


def not_applicable(model: GPT, length: int) -> str | None:
    """Why `model` cannot be evaluated at `length`, or None if it can."""
    rows = model.config.block_size
    if model.config.position == "learned" and length > rows:
        return f"n/a: the table has {rows} rows"
    return None


@torch.no_grad()
def token_losses(model: GPT, ids: torch.Tensor) -> torch.Tensor:
    """Next-token loss at every position of one sequence (T,) -> (T-1,); NaN where the target
    is outside the model's vocabulary."""
    logits, _ = model(ids[None, :-1])  # (1, T-1, vocab)
    targets = ids[1:]
    logp = F.log_softmax(logits[0].float(), dim=-1)  # (T-1, vocab)
    losses = -logp.gather(1, targets[:, None])[:, 0]
    return losses.masked_fill(torch.isinf(losses), float("nan"))


@torch.no_grad()
def length_losses(model: GPT, stream: torch.Tensor, *, lengths=(64, 128, 256, 512, 1024), batch_size: int = 8) -> dict:
    """{length: {"loss": mean loss, "windows": n, "tokens": n}} or {"loss": None, "note": why}."""
    results = {}
    for length in lengths:
        note = not_applicable(model, length)
        n = (len(stream) - 1) // length
        if note or n == 0:
            results[length] = {"loss": None, "note": note or "n/a: the text is shorter than this length"}
            continue
        total, count = 0.0, 0
        for first in range(0, n, batch_size):
            rows = range(first, min(n, first + batch_size))
            x = torch.stack([stream[i * length : (i + 1) * length] for i in rows])  # (b, L)
            y = torch.stack([stream[i * length + 1 : (i + 1) * length + 1] for i in rows])  # (b, L)
            losses = model.vocab_loss(x, y, reduction="none")
            total += float(losses.nansum())
            count += int((~losses.isnan()).sum())
        results[length] = {"loss": round(total / count, 4), "windows": n, "tokens": count}
    return results


def unigram_loss(counts: Counter, stream: torch.Tensor) -> float:
    """Loss of predicting each held-out token by its training frequency alone (in-vocab tokens)."""
    total = sum(counts.values())
    known = [counts[t] for t in stream.tolist() if t in counts]
    return round(sum(-math.log(c / total) for c in known) / len(known), 4)
