"""The maths the position schemes share: sinusoid frequencies and tables, RoPE's rotation and its
rescalings for reading past the training length (Position Interpolation, NTK-aware, YaRN, Llama 3's
bands), each rescaling one `RopeMethod` record in `ROPE_METHODS`.

Scheme modules (learned.py, sinusoidal.py, rope.py, ...) build on these; they are public through
`lpos.positions` (`sinusoidal_table`, `rope_rotate`, `rope_frequencies`, `RopeScaling`, ...).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable

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


YARN_BETA_FAST = 32  # pairs turning more than this many times over the training length are left alone
YARN_BETA_SLOW = 1  # pairs turning less than once are fully interpolated
LLAMA3_LOW_FREQUENCY_FACTOR = 1.0  # Llama 3.1's: wavelengths over original_length / 1 are divided by the factor
LLAMA3_HIGH_FREQUENCY_FACTOR = 4.0  # ... and those under original_length / 4 are kept


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


def llama3_ramp(trained: torch.Tensor, *, original_length: int, low_frequency_factor: float = LLAMA3_LOW_FREQUENCY_FACTOR,
                high_frequency_factor: float = LLAMA3_HIGH_FREQUENCY_FACTOR) -> torch.Tensor:
    """Llama 3.1's share of each pair that is divided by the factor, from its frequency as trained [n]: 0 for
    wavelengths under original_length / high_frequency_factor (kept), 1 for those over original_length /
    low_frequency_factor (divided), and between them a blend linear in original_length / wavelength."""
    if not 0 < low_frequency_factor < high_frequency_factor:
        raise ValueError(f"Llama 3's frequency factors need 0 < low < high, got {low_frequency_factor} and "
                         f"{high_frequency_factor}")
    turns = original_length * trained / (2 * math.pi)  # original_length / wavelength
    kept = (turns - low_frequency_factor) / (high_frequency_factor - low_frequency_factor)  # (n,)
    return 1 - kept.clamp(0, 1)


@dataclass(frozen=True)
class RopeMethod:
    """One way of rescaling RoPE's pair frequencies for `factor` times the training length, said once: its
    name (the key in URLs, files and the CLI), its label and colour on every chart, and its maths."""

    name: str
    label: str
    colour: str
    rescaled: Callable[..., torch.Tensor]  # (trained (n,), dim, base, scaling) -> frequencies (n,)
    about: str  # one line: what it does to the pairs
    attention_factor: Callable[[float], float] = lambda factor: 1.0  # multiplies cos and sin, so q and k

    @property
    def rescales(self) -> bool:
        """False for RoPE as trained, the reference every method is drawn beside."""
        return self is not AS_TRAINED


AS_TRAINED = RopeMethod("as-trained", "RoPE as trained", "#2ca02c", lambda trained, dim, base, scaling: trained,
                        "every pair as trained")
_METHODS = (
    AS_TRAINED,
    RopeMethod("pi", "Position Interpolation", "#1f77b4", lambda trained, dim, base, scaling: trained / scaling.factor,
               "every frequency divided by the factor (Chen et al. 2023): position t turns as t / factor did"),
    RopeMethod("ntk", "NTK-aware", "#9467bd",
               lambda trained, dim, base, scaling: pair_frequencies(dim, base * scaling.factor ** (dim / (dim - 2))),
               "the base raised to base * factor^(d/(d-2)) (bloc97 2023): the fastest pair kept, the slowest divided "
               "by the factor"),
    RopeMethod("yarn", "YaRN", "#d62728",
               lambda trained, dim, base, scaling: _blend(trained, scaling.factor,
                                                          yarn_ramp(dim, base, original_length=scaling.original_length)),
               "pairs turning 32 times or more in the training length kept, those turning less than once divided "
               "by the factor, a ramp in the pair index between (Peng et al. 2023); attention sharpened by "
               "0.1 ln(factor) + 1",
               attention_factor=lambda factor: 0.1 * math.log(factor) + 1.0),
    RopeMethod("llama3", "Llama 3 bands", "#ff7f0e",
               lambda trained, dim, base, scaling: _blend(trained, scaling.factor, llama3_ramp(
                   trained, original_length=scaling.original_length, low_frequency_factor=scaling.low_frequency_factor,
                   high_frequency_factor=scaling.high_frequency_factor)),
               "wavelengths under the training length / 4 kept, over it divided by the factor, a blend in "
               "length / wavelength between (Llama 3.1)"),
)
RopeMethods = dict[str, RopeMethod]
ROPE_METHODS: RopeMethods = {method.name: method for method in _METHODS}
ROPE_METHOD_NAMES = {name: method.label for name, method in ROPE_METHODS.items()}
RESCALINGS: tuple[str, ...] = tuple(name for name, method in ROPE_METHODS.items() if method.rescales)


def _blend(trained: torch.Tensor, factor: float, divided: torch.Tensor) -> torch.Tensor:
    """Each pair's frequency divided by `factor` by its share `divided` (0: kept, 1: divided)."""
    return trained / factor * divided + trained * (1 - divided)


def check_rope_method(method: str, factor: float) -> None:
    if method not in ROPE_METHODS:
        raise ValueError(f"unknown RoPE scaling method {method!r}; choose one of {sorted(ROPE_METHODS)}")
    if not factor >= 1.0:  # also refuses NaN
        raise ValueError(f"the scaling factor must be at least 1 (the target length over the training length), got {factor}")


def rope_frequencies(dim: int, base: float = 10000.0, *, method: str = AS_TRAINED.name, factor: float = 1.0,
                     original_length: int = 128) -> torch.Tensor:
    """Angular frequency of each pair after rescaling for `factor` times the training length, [dim/2], by
    the method of that name (`ROPE_METHODS`: as-trained, pi, ntk, yarn, llama3; see each record's `about`)."""
    return RopeScaling(method, factor, original_length).frequencies(dim, base)


def applied_factor(method: str, factor: float) -> float:
    """The factor `method` stretches by: `factor`, or 1 for RoPE as trained (which stretches nothing)."""
    return factor if ROPE_METHODS[method].rescales else 1.0


def rope_attention_factor(method: str, factor: float) -> float:
    """What a method multiplies cos and sin by, so q and k each grow by it and the attention logits by its
    square: YaRN's 0.1 * ln(factor) + 1, the paper's 1/t that sharpens the softmax longer contexts flatten;
    1.0 for every other method."""
    check_rope_method(method, factor)
    return ROPE_METHODS[method].attention_factor(factor)


@dataclass(frozen=True)
class RopeScaling:
    """One RoPE scaling method, applied at inference (`GPT.forward(..., rope_scaling=...)`)."""

    method: str  # a name in ROPE_METHODS: as-trained | pi | ntk | yarn | llama3
    factor: float  # target length / training length
    original_length: int = 128  # the length the model was trained at
    low_frequency_factor: float = LLAMA3_LOW_FREQUENCY_FACTOR  # llama3 only
    high_frequency_factor: float = LLAMA3_HIGH_FREQUENCY_FACTOR  # llama3 only

    def __post_init__(self) -> None:
        check_rope_method(self.method, self.factor)
        if self.original_length < 1:
            raise ValueError(f"original_length must be positive, got {self.original_length}")

    @classmethod
    def of(cls, method: str, factor: float, original_length: int = 128) -> RopeScaling | None:
        """`method` at `factor`, or None for RoPE as trained (the model reads as it was trained)."""
        return cls(method, factor, original_length) if ROPE_METHODS[method].rescales else None

    @property
    def record(self) -> RopeMethod:
        return ROPE_METHODS[self.method]

    def frequencies(self, dim: int, base: float = 10000.0) -> torch.Tensor:
        """The pair frequencies (dim/2,) of a rotated width `dim` under this method."""
        _check_even(dim, "the rotated dimension")
        return self.record.rescaled(pair_frequencies(dim, base), dim, base, self)

    @property
    def attention_factor(self) -> float:
        return self.record.attention_factor(self.factor)


@functools.lru_cache(maxsize=64)
def rotation_frequencies(dim: int, scaling: RopeScaling | None = None, base: float = 10000.0) -> torch.Tensor:
    """The pair frequencies RoPE turns a head of `dim` columns by, [dim/2]: as trained without
    `scaling`, else rescaled by it. Computed once per (dim, scaling, base) and shared by every
    call, so the model does not rebuild them per layer and step: read it, never write to it."""
    with torch.inference_mode(False):  # a tensor made under inference_mode could not serve training later
        return pair_frequencies(dim, base) if scaling is None else scaling.frequencies(dim, base)
