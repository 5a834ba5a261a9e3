"""alibi: nothing added; every attention score gets -slope_h * (i - j) for its head h (Press et al.
2021, "Train Short, Test Long: Attention with Linear Biases"): a fixed line per head, steeper for the
first heads, so each head prefers recent keys by its own amount and no length is special."""
from __future__ import annotations

import math

import torch

from lpos.positions.base import DistanceBias, Paper, distances


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """Per-head slopes of Press et al. 2021.

    For a power of two n: the geometric sequence starting at 2^(-8/n) with that same ratio
    (8 heads: 1/2, 1/4, ..., 1/256). Otherwise: the slopes of the closest lower power of two,
    then every other slope of the next power of two, as in the authors' reference code.
    """
    if n_heads <= 0:
        raise ValueError(f"n_heads must be positive, got {n_heads}")

    def power_of_two(n: int) -> list[float]:
        start = 2 ** (-8 / n)
        return [start ** (i + 1) for i in range(n)]

    if math.log2(n_heads).is_integer():
        slopes = power_of_two(n_heads)
    else:
        closest = 2 ** math.floor(math.log2(n_heads))
        slopes = power_of_two(closest) + power_of_two(2 * closest)[0::2][: n_heads - closest]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(n_heads: int, length: int, *, first_query: int = 0) -> torch.Tensor:
    """Bias added to causal attention scores: -slope_h * (i - j) for key j <= query i.

    Shape [n_heads, length - first_query, length]: the queries are positions first_query..length-1
    (later tokens read against a cache of earlier keys), the keys 0..length-1. Entries above the
    diagonal are 0 (the causal mask hides them).
    """
    return slope_lines(n_heads, distances(first_query, length - first_query, length))


def slope_lines(n_heads: int, distance: torch.Tensor) -> torch.Tensor:
    """-slope_h * (i - j) (nh, T, S) for distances i - j (T, S); 0 where a key comes after its query."""
    slopes = alibi_slopes(n_heads).to(distance.device)
    return -slopes[:, None, None] * distance.clamp(min=0).float()[None]  # (nh, T, S)


class Alibi(DistanceBias):
    name = "alibi"
    order = 3
    label = "ALiBi"
    colour = "#d62728"
    hint = "subtracts a per-head distance penalty from attention scores"
    explanation = ("Nothing is added to the token rows. Every attention score is lowered by a fixed slope times the "
                   "distance between query and key, one slope per head, so each head prefers recent keys by its own "
                   "amount and no length is special.")
    paper = Paper("Train Short, Test Long: Attention with Linear Biases Enables Input Length Extrapolation",
                  "Press et al. 2021", "https://arxiv.org/abs/2108.12409")

    def distance_bias(self, attention, distance: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
        return slope_lines(attention.n_head, distance)  # distances only: an offset cancels


SCHEME = Alibi()
