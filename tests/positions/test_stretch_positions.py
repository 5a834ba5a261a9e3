"""RoPE scaling: PI, NTK-aware and YaRN frequencies against implementations written here from the
papers' formulas (loops over pairs, plain floats), YaRN's attention factor, and rope_rotate's
new options keeping its old behaviour."""
from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from lpos.positions import (RopeScaling, alibi_bias, pair_frequencies, rope_attention_factor, rope_frequencies,
                            rope_rotate)

DIMS = [8, 16, 32, 64, 128]
FACTORS = [1.0, 2.0, 4.0, 8.0, 16.0]
LENGTHS = [128, 2048, 4096]


def theta(d: int, dim: int, base: float) -> float:
    """RoFormer's angular frequency of pair d: base^(-2d/|D|)."""
    return base ** (-2 * d / dim)


def pi_reference(dim: int, base: float, factor: float) -> list[float]:
    """Chen et al. 2023, eq. 4: f'(x, m) = f(x, m L / L'), i.e. theta_d m / s for every pair."""
    return [theta(d, dim, base) / factor for d in range(dim // 2)]


def ntk_reference(dim: int, base: float, factor: float) -> list[float]:
    """bloc97 2023 (YaRN paper, eq. 14-16): b' = b * s^(|D| / (|D| - 2)), theta'_d = b'^(-2d/|D|)."""
    scaled_base = base * factor ** (dim / (dim - 2))
    return [scaled_base ** (-2 * d / dim) for d in range(dim // 2)]


def yarn_reference(dim: int, base: float, factor: float, original: int, *, alpha: float = 1, beta: float = 32) -> list[float]:
    """Peng et al. 2023, "NTK-by-parts" (eq. 17-19 and their reference code): the wavelength of
    pair d is lambda_d = 2 pi b^(2d/|D|) and it turns r(d) = L / lambda_d times in the original
    length L. The pairs where r = beta and r = alpha bound the ramp (floored, ceiled, clamped to
    [0, |D| - 1]); gamma = 1 below the lower bound (kept), 0 above the upper (theta_d / s)."""
    def pair_where_turns(r: float) -> float:  # solve L / (2 pi b^(2d/|D|)) = r for d
        return (dim / 2) * math.log(original / (2 * math.pi * r)) / math.log(base)

    low = max(math.floor(pair_where_turns(beta)), 0)
    high = min(math.ceil(pair_where_turns(alpha)), dim - 1)
    width = (high - low) or 0.001
    out = []
    for d in range(dim // 2):
        interpolated = min(max((d - low) / width, 0.0), 1.0)
        gamma = 1.0 - interpolated
        out.append((1 - gamma) * theta(d, dim, base) / factor + gamma * theta(d, dim, base))
    return out


@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("factor", FACTORS)
def test_pi_and_ntk_follow_their_formulas(dim, factor):
    for base in (10000.0, 500000.0):
        assert_close(rope_frequencies(dim, base, method="pi", factor=factor),
                     torch.tensor(pi_reference(dim, base, factor), dtype=torch.float64), rtol=1e-12, atol=0)
        assert_close(rope_frequencies(dim, base, method="ntk", factor=factor),
                     torch.tensor(ntk_reference(dim, base, factor), dtype=torch.float64), rtol=1e-12, atol=0)


@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("factor", FACTORS)
@pytest.mark.parametrize("original", LENGTHS)
def test_yarn_follows_the_paper(dim, factor, original):
    for base in (10000.0, 500000.0):
        got = rope_frequencies(dim, base, method="yarn", factor=factor, original_length=original)
        assert_close(got, torch.tensor(yarn_reference(dim, base, factor, original), dtype=torch.float64),
                     rtol=1e-12, atol=0)


@pytest.mark.parametrize("dim", [64, 128])
def test_yarn_keeps_fast_pairs_and_interpolates_pairs_that_never_turn(dim):
    original, factor, base = 4096, 8.0, 10000.0
    got = rope_frequencies(dim, base, method="yarn", factor=factor, original_length=original)
    trained = pair_frequencies(dim, base)
    turns = original * trained / (2 * math.pi)
    assert (turns > 64).any() and (turns < 0.5).any()  # both regions exist at this size
    assert torch.equal(got[turns > 64], trained[turns > 64])  # many turns: untouched
    assert_close(got[turns < 0.5], trained[turns < 0.5] / factor, rtol=1e-15, atol=0)  # < 1 turn: PI
    assert torch.all(got <= trained) and torch.all(got >= trained / factor)


def test_the_shipped_head_size_regions():
    """The numbers the page states for the shipped model (head size 32, 128 tokens)."""
    got = rope_frequencies(32, method="yarn", factor=4.0, original_length=128)
    trained = pair_frequencies(32)
    assert torch.equal(got[0], trained[0])
    assert_close(got[6:], trained[6:] / 4, rtol=1e-15, atol=0)
    assert torch.all(got[1:6] < trained[1:6]) and torch.all(got[1:6] > trained[1:6] / 4)


def test_as_trained_and_factor_one_change_nothing():
    for method in ("as-trained", "pi", "ntk", "yarn"):
        assert_close(rope_frequencies(32, method=method, factor=1.0), pair_frequencies(32), rtol=1e-15, atol=0)
    assert torch.equal(rope_frequencies(32, method="as-trained", factor=8.0), pair_frequencies(32))


def test_ntk_keeps_the_fastest_pair_and_divides_the_slowest_by_the_factor():
    got, trained = rope_frequencies(64, method="ntk", factor=8.0), pair_frequencies(64)
    assert got[0] == trained[0] == 1.0
    assert_close(got[-1], trained[-1] / 8, rtol=1e-12, atol=0)


def test_attention_factor():
    assert rope_attention_factor("yarn", 4.0) == pytest.approx(0.1 * math.log(4) + 1)
    assert rope_attention_factor("yarn", 1.0) == 1.0
    for method in ("as-trained", "pi", "ntk"):
        assert rope_attention_factor(method, 8.0) == 1.0
    scaling = RopeScaling("yarn", 8.0, 128)
    assert scaling.attention_factor == pytest.approx(1.2079441541679836)
    assert torch.equal(scaling.frequencies(32), rope_frequencies(32, method="yarn", factor=8.0, original_length=128))


@pytest.mark.parametrize("method, factor, message", [("linear", 2.0, "unknown RoPE scaling method"),
                                                     ("pi", 0.5, "at least 1"), ("yarn", float("nan"), "at least 1")])
def test_bad_scalings_are_refused(method, factor, message):
    with pytest.raises(ValueError, match=message):
        RopeScaling(method, factor)
    with pytest.raises(ValueError, match=message):
        rope_frequencies(32, method=method, factor=factor)


def test_scaling_is_frozen():
    scaling = RopeScaling("pi", 2.0)
    with pytest.raises(AttributeError):
        scaling.factor = 4.0  # type: ignore[misc]
    assert scaling.original_length == 128


def test_rope_rotate_with_frequencies_and_magnitude():
    x = torch.randn(2, 3, 7, 16, generator=torch.Generator().manual_seed(0))
    positions = torch.arange(5, 12)
    assert torch.equal(rope_rotate(x, positions), rope_rotate(x, positions, frequencies=pair_frequencies(16)))
    frequencies = rope_frequencies(16, method="pi", factor=4.0)
    # PI at position t is plain RoPE at t / 4
    assert_close(rope_rotate(x.double(), positions, frequencies=frequencies),
                 rope_rotate(x.double(), positions.double() / 4), rtol=1e-12, atol=1e-12)
    scaled = rope_rotate(x, positions, frequencies=frequencies, magnitude=1.5)
    assert_close(scaled, 1.5 * rope_rotate(x, positions, frequencies=frequencies))
    with pytest.raises(ValueError, match="8 pair frequencies"):
        rope_rotate(x, positions, frequencies=pair_frequencies(8))


def test_alibi_bias_for_queries_after_a_cache():
    full = alibi_bias(4, 10)
    assert torch.equal(alibi_bias(4, 10, first_query=6), full[:, 6:, :])
    assert alibi_bias(4, 10, first_query=9).shape == (4, 1, 10)


def test_yarn_ramp_boundaries_for_a_llama_sized_head():
    """By hand: head size 128, base 10000, 4,096 tokens. 32 turns at pair
    64 ln(4096 / 64 pi) / ln 10000 = 20.9 -> floor 20; 1 turn at 64 ln(4096 / 2 pi) / ln 10000 = 45.0 -> ceil 46."""
    from lpos.positions import yarn_ramp

    ramp = yarn_ramp(128, original_length=4096)
    assert ramp[20] == 0 and ramp[46] == 1
    assert ramp[33] == pytest.approx(13 / 26)
    assert torch.all(ramp[:21] == 0) and torch.all(ramp[46:] == 1)


def transformers_llama3(dim: int, base: float, factor: float, original: int, low: float, high: float) -> torch.Tensor:
    """transformers' own `ROPE_INIT_FUNCTIONS["llama3"]` for a head of `dim` columns (the reference for Llama 3.1)."""
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    config = LlamaConfig(hidden_size=dim * 4, num_attention_heads=4, rope_parameters=dict(
        rope_type="llama3", rope_theta=base, factor=factor, low_freq_factor=low, high_freq_factor=high,
        original_max_position_embeddings=original))
    inv_freq, attention_factor = ROPE_INIT_FUNCTIONS["llama3"](config, "cpu")
    assert attention_factor == 1.0
    return inv_freq.double()


def test_llama3_is_transformers_llama3_for_the_shipped_head():
    assert_close(RopeScaling("llama3", 8.0, original_length=128).frequencies(32, 10000.0),
                 transformers_llama3(32, 10000.0, 8.0, 128, 1.0, 4.0), rtol=0, atol=1e-6)


@pytest.mark.parametrize("dim,base,factor,original,low,high", [
    (128, 500000.0, 8.0, 8192, 1.0, 4.0),  # Llama 3.1's own settings
    (64, 10000.0, 4.0, 256, 2.0, 8.0),
    (16, 1e6, 32.0, 128, 0.5, 3.0),
])
def test_llama3_follows_transformers_for_other_settings(dim, base, factor, original, low, high):
    ours = RopeScaling("llama3", factor, original, low_frequency_factor=low, high_frequency_factor=high)
    assert_close(ours.frequencies(dim, base), transformers_llama3(dim, base, factor, original, low, high),
                 rtol=1e-6, atol=1e-9)
    assert ours.attention_factor == 1.0


def test_llama3_keeps_short_wavelengths_and_divides_long_ones():
    trained = pair_frequencies(32)
    scaled = RopeScaling("llama3", 8.0, original_length=128).frequencies(32)
    wavelength = 2 * math.pi / trained
    kept, divided = wavelength < 128 / 4, wavelength > 128
    assert kept.any() and divided.any() and (~kept & ~divided).any()  # the head has all three bands
    assert_close(scaled[kept], trained[kept], rtol=0, atol=0)
    assert_close(scaled[divided], trained[divided] / 8, rtol=1e-12, atol=0)
    between = ~kept & ~divided
    assert ((scaled[between] < trained[between]) & (scaled[between] > trained[between] / 8)).all()
