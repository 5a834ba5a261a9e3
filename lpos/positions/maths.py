"""The maths the position schemes share: sinusoid frequencies and tables, RoPE's rotation and its
rescalings for reading past the training length (Position Interpolation, NTK-aware, YaRN).

Scheme modules (learned.py, sinusoidal.py, rope.py, ...) build on these; they are public through
`lpos.positions` (`sinusoidal_table`, `rope_rotate`, `rope_frequencies`, `RopeScaling`, ...).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Literal, get_args

import torch


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


def rope_angles(positions: torch.Tensor, dim: int, base: float = 10000.0, *,
                frequencies: torch.Tensor | None = None) -> torch.Tensor:
    """Angle of pair i at position t: t * w_i, shape [T, dim/2]; w_i = base^(-2i/dim) unless
    `frequencies` (e.g. from `rope_frequencies`) says otherwise."""
    if frequencies is None:
        frequencies = pair_frequencies(dim, base)
    elif frequencies.shape != (dim // 2,):
        raise ValueError(f"expected {dim // 2} pair frequencies for dimension {dim}, got shape {tuple(frequencies.shape)}")
    return positions.to(torch.float64)[:, None] * frequencies.to(positions.device, torch.float64)[None, :]


def rope_rotate(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0, *,
                frequencies: torch.Tensor | None = None, magnitude: float = 1.0) -> torch.Tensor:
    """Rotate pairs (2i, 2i+1) of the last axis of x [..., T, D] by their position's angle.

    `frequencies` replaces base^(-2i/D) (a RoPE scaling method plugs in here); `magnitude`
    multiplies cos and sin, i.e. the rotated vector (YaRN's attention factor, applied to q and k).
    """
    D = x.shape[-1]
    _check_even(D, "the rotated dimension")
    angles = rope_angles(positions, D, base, frequencies=frequencies)  # (T, D/2)
    cos, sin = angles.cos(), angles.sin()
    if magnitude != 1.0:
        cos, sin = magnitude * cos, magnitude * sin
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    pairs = x.reshape(*x.shape[:-1], D // 2, 2)  # (..., T, D/2, 2)
    even, odd = pairs[..., 0], pairs[..., 1]
    rotated = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)
    return rotated.reshape(x.shape)


RopeMethod = Literal["none", "pi", "ntk", "yarn"]
ROPE_METHODS: tuple[str, ...] = get_args(RopeMethod)
ROPE_METHOD_NAMES = {"none": "RoPE as trained", "pi": "Position Interpolation", "ntk": "NTK-aware",
                     "yarn": "YaRN"}
YARN_BETA_FAST = 32  # pairs turning more than this many times over the training length are left alone
YARN_BETA_SLOW = 1  # pairs turning less than once are fully interpolated


def check_rope_method(method: str, factor: float) -> None:
    if method not in ROPE_METHODS:
        raise ValueError(f"unknown RoPE scaling method {method!r}; choose one of {sorted(ROPE_METHODS)}")
    if not factor >= 1.0:  # also refuses NaN
        raise ValueError(f"the scaling factor must be at least 1 (the target length over the training length), got {factor}")


def yarn_pair_index(rotations: float, dim: int, base: float, original_length: int) -> float:
    """The (fractional) pair index i whose wavelength 2*pi*base^(2i/dim) fits `rotations` times
    into `original_length` positions."""
    return dim * math.log(original_length / (rotations * 2 * math.pi)) / (2 * math.log(base))


def yarn_ramp(dim: int, base: float = 10000.0, *, original_length: int = 128) -> torch.Tensor:
    """YaRN's share of each pair that is interpolated, [dim/2], from 0 (left alone) to 1.

    The boundaries are the pairs that turn beta_fast = 32 times and beta_slow = 1 time over
    `original_length`, floored and ceiled and clamped to [0, dim - 1] as in the authors'
    reference code; between them the share rises linearly with the pair index.
    """
    low = max(math.floor(yarn_pair_index(YARN_BETA_FAST, dim, base, original_length)), 0)
    high = min(math.ceil(yarn_pair_index(YARN_BETA_SLOW, dim, base, original_length)), dim - 1)
    if low == high:
        high += 0.001  # the reference code's guard against a zero-width ramp
    return ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)


def rope_frequencies(dim: int, base: float = 10000.0, *, method: str = "none", factor: float = 1.0,
                     original_length: int = 128) -> torch.Tensor:
    """Angular frequency of each pair after rescaling for `factor` times the training length, [dim/2].

    - none: base^(-2i/dim), as trained;
    - pi:   every frequency divided by `factor` (Chen et al. 2023, Position Interpolation): position
            t now turns as t/factor did, so factor x the training length lands inside it;
    - ntk:  the base raised to base * factor^(dim/(dim-2)) ("NTK-aware", bloc97 2023): the fastest
            pair is unchanged, the slowest is divided by exactly `factor`;
    - yarn: NTK-by-parts (Peng et al. 2023): pairs that turn many times inside the training length
            are left alone, pairs that turn less than once are interpolated as PI, a ramp between
            (`yarn_ramp`). YaRN also scales attention: see `rope_attention_factor`.
    """
    check_rope_method(method, factor)
    _check_even(dim, "the rotated dimension")
    as_trained = pair_frequencies(dim, base)
    if method == "none":
        return as_trained
    if method == "pi":
        return as_trained / factor
    if method == "ntk":
        return pair_frequencies(dim, base * factor ** (dim / (dim - 2)))
    interpolated = yarn_ramp(dim, base, original_length=original_length)
    return as_trained / factor * interpolated + as_trained * (1 - interpolated)


def rope_attention_factor(method: str, factor: float) -> float:
    """YaRN's 0.1 * ln(factor) + 1 (1.0 for every other method).

    It multiplies cos and sin, so q and k each grow by it and the attention logits by its square:
    the paper's 1/t, which sharpens the softmax that longer contexts flatten.
    """
    check_rope_method(method, factor)
    return 0.1 * math.log(factor) + 1.0 if method == "yarn" else 1.0


@dataclass(frozen=True)
class RopeScaling:
    """One RoPE scaling method, applied at inference (`GPT.forward(..., rope_scaling=...)`)."""

    method: str  # none | pi | ntk | yarn
    factor: float  # target length / training length
    original_length: int = 128  # the length the model was trained at

    def __post_init__(self) -> None:
        check_rope_method(self.method, self.factor)
        if self.original_length < 1:
            raise ValueError(f"original_length must be positive, got {self.original_length}")

    def frequencies(self, dim: int, base: float = 10000.0) -> torch.Tensor:
        return rope_frequencies(dim, base, method=self.method, factor=self.factor,
                                original_length=self.original_length)

    @property
    def attention_factor(self) -> float:
        return rope_attention_factor(self.method, self.factor)


@functools.lru_cache(maxsize=64)
def rotation_frequencies(dim: int, scaling: RopeScaling | None = None, base: float = 10000.0) -> torch.Tensor:
    """The pair frequencies RoPE turns a head of `dim` columns by, [dim/2]: as trained without
    `scaling`, else rescaled by it. Computed once per (dim, scaling, base) and shared by every
    call, so the model does not rebuild them per layer and step: read it, never write to it."""
    with torch.inference_mode(False):  # a tensor made under inference_mode could not serve training later
        return pair_frequencies(dim, base) if scaling is None else scaling.frequencies(dim, base)
