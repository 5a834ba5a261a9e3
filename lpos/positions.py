"""The five position schemes, as plain functions.

- learned:    a trainable table `wpe[t]` added to the token row (GPT-2).
- sinusoidal: a fixed table added to the token row (Vaswani et al. 2017), interleaved:
              column 2i = sin(t / base^(2i/width)), column 2i+1 = cos of the same angle.
- rope:       nothing added; queries and keys are rotated pair by pair inside attention
              (Su et al. 2021, RoFormer): pair (2i, 2i+1) turns by t * base^(-2i/d).
- alibi:      nothing added; attention scores get -slope_h * (distance) per head
              (Press et al. 2021, "Train Short, Test Long").
- none:       no position information at all.
"""
from __future__ import annotations

import math
from typing import Literal, get_args

import torch

Scheme = Literal["learned", "sinusoidal", "rope", "alibi", "none"]
SCHEMES: tuple[str, ...] = get_args(Scheme)

HINTS: dict[str, str] = {
    "learned": "a trained table of position rows, added to token rows (GPT-2)",
    "sinusoidal": "a fixed table of sines and cosines, added to token rows",
    "rope": "rotates queries and keys by their position inside attention",
    "alibi": "subtracts a per-head distance penalty from attention scores",
    "none": "no position information at all",
}

ADDS_TO_EMBEDDINGS = {"learned": True, "sinusoidal": True, "rope": False, "alibi": False, "none": False}


def check_scheme(name: str) -> str:
    if name not in SCHEMES:
        raise ValueError(f"unknown position scheme {name!r}; choose one of {sorted(SCHEMES)}")
    return name


def _check_even(width: int, what: str) -> None:
    if width <= 0 or width % 2:
        raise ValueError(f"{what} must be a positive even number (sin/cos pairs), got {width}")


def pair_frequencies(width: int, base: float = 10000.0) -> torch.Tensor:
    """Angular frequency of each column pair i: base^(-2i/width), shape [width/2]."""
    _check_even(width, "width")
    return base ** (-torch.arange(0, width, 2, dtype=torch.float64) / width)


def wavelengths(width: int, base: float = 10000.0) -> torch.Tensor:
    """Positions per full turn of each pair: 2*pi / frequency, from 2*pi up to ~base*2*pi."""
    return 2 * math.pi / pair_frequencies(width, base)


def sinusoidal_table(length: int, width: int, base: float = 10000.0) -> torch.Tensor:
    """The fixed table, [length, width], float32, interleaved sin/cos."""
    _check_even(width, "width")
    t = torch.arange(length, dtype=torch.float64)[:, None]  # (length, 1)
    angles = t * pair_frequencies(width, base)[None, :]  # (length, width/2)
    table = torch.stack([angles.sin(), angles.cos()], dim=-1)  # (length, width/2, 2)
    return table.reshape(length, width).float()


def rope_angles(positions: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """Angle of pair i at position t: t * base^(-2i/dim), shape [T, dim/2]."""
    return positions.to(torch.float64)[:, None] * pair_frequencies(dim, base)[None, :]


def rope_rotate(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotate pairs (2i, 2i+1) of the last axis of x [..., T, D] by their position's angle."""
    D = x.shape[-1]
    _check_even(D, "the rotated dimension")
    angles = rope_angles(positions, D, base)  # (T, D/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    pairs = x.reshape(*x.shape[:-1], D // 2, 2)  # (..., T, D/2, 2)
    even, odd = pairs[..., 0], pairs[..., 1]
    rotated = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)
    return rotated.reshape(x.shape)


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


def alibi_bias(n_heads: int, length: int) -> torch.Tensor:
    """Bias added to causal attention scores: -slope_h * (i - j) for key j <= query i.

    Shape [n_heads, length, length]; entries above the diagonal are 0 (the causal mask hides them).
    """
    pos = torch.arange(length)
    distance = (pos[:, None] - pos[None, :]).clamp(min=0).float()  # (T, T)
    return -alibi_slopes(n_heads)[:, None, None] * distance[None]  # (nh, T, T)
