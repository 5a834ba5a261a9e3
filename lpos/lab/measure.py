"""What the lab measures on a model: accuracy on a task's scored tokens (teacher forcing, argmax), by evaluation
length from half to four times the training window, and the scheme's own picture while it trains.

The picture follows what the scheme says it does (its views): a table of rows added to the tokens gives the
rows' cosine map; a bias on the scores gives the first layer's bias against distance, a line per head; any
other scheme (rotations, counted positions, none) gives the last layer's attention on one sample, averaged
over heads, where a task that reads by position shows its diagonal.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from lpos.analysis.similarity import cosine_similarity_map
from lpos.lab.tasks import Batch
from lpos.model import GPT

EVAL_SAMPLES = 64  # samples scored at each evaluation length
LENGTH_FACTORS = (0.5, 1, 1.5, 2, 3, 4)  # evaluation lengths, as multiples of the training window
EVAL_SEED = 1_000_003  # the evaluation samples' generator: the same for every run


def evaluation_lengths(window: int) -> list[int]:
    return sorted({max(4, round(window * f)) for f in LENGTH_FACTORS})


def scores_and_targets(model: GPT, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The model's scores over the tokens it can write (B, T, V'), each target's index among them (B, T), and
    which targets are scored and writable (B, T)."""
    h, _ = model.hidden_states(batch.x, keep_attention=False)
    scores = model.output_scores(h)  # (B, T, V')
    if model.output_vocab is None:
        return scores, batch.y, batch.scored
    vocab = model.output_vocab  # sorted
    index = torch.searchsorted(vocab, batch.y).clamp(max=len(vocab) - 1)  # (B, T)
    return scores, index, batch.scored & (vocab[index] == batch.y)


def loss_and_accuracy(model: GPT, batch: Batch) -> tuple[torch.Tensor, float]:
    """Cross-entropy over the scored targets (a target the model cannot write is left out of the loss and
    counted wrong) and the share of scored targets predicted exactly."""
    scores, targets, writable = scores_and_targets(model, batch)
    loss = F.cross_entropy(scores[writable], targets[writable])
    right = (scores.argmax(-1) == targets) & writable
    return loss, float(right.sum()) / max(1, int(batch.scored.sum()))


@torch.no_grad()
def accuracy(model: GPT, batch: Batch) -> float:
    return loss_and_accuracy(model, batch)[1]


@torch.no_grad()
def accuracy_by_length(model: GPT, task, window: int) -> dict[int, float | None]:
    """Accuracy at each evaluation length; None where the model cannot read that far (its table's last row,
    `model.max_input_length`) or, for a text, where the held-out part is shorter."""
    was_training = model.training
    model.eval()
    found = {}
    for length in evaluation_lengths(window):
        limit = model.max_input_length
        batch = None if limit is not None and length > limit else evaluation_batch(task, length)
        found[length] = None if batch is None else round(accuracy(model, batch), 4)
    model.train(was_training)
    return found


def evaluation_batch(task, length: int) -> Batch | None:
    """The fixed samples a task is scored on at `length` tokens (a text's held-out windows)."""
    if hasattr(task, "held_out"):
        return task.held_out(EVAL_SAMPLES, length)
    return task.batch(EVAL_SAMPLES, length, torch.Generator().manual_seed(EVAL_SEED + length), exact=True)


@dataclass(frozen=True)
class Picture:
    """The scheme's own picture at one moment of training."""
    kind: str  # "rows": a cosine map of position rows; "bias": bias (nh, D) by distance; "attention": a map
    values: np.ndarray
    title: str


@torch.no_grad()
def scheme_picture(model: GPT, sample: torch.Tensor) -> Picture:
    """What the scheme shows of itself now (the module docstring says which), for one sample (1, T)."""
    was_training = model.training
    model.eval()
    scheme, T = model.scheme, sample.shape[1]
    if scheme.adds_rows:
        positions = scheme.input_positions(model.config, T, 0)
        rows = scheme.position_rows(model, positions)  # (T, C)
        picture = Picture("rows", cosine_similarity_map(rows).astype(np.float32),
                          f"{scheme.label}: cosine of the position rows")
    elif scheme.shows("bias"):
        bias = scheme.bias(model.transformer.h[0].attn, 0, T, T)  # (nh, T, S)
        last = bias[:, T - 1].flip(-1)  # (nh, T): the last query's bias, distance 0 first
        picture = Picture("bias", last.float().numpy(), f"{scheme.label}: layer 1's bias by distance")
    else:
        _, attention = model.hidden_states(sample, keep_attention=True)
        picture = Picture("attention", attention[-1][0].mean(0).float().numpy(),
                          f"{scheme.label}: last layer's attention on one sample")
    model.train(was_training)
    return picture
