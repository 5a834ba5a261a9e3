"""The position schemes' shared maths: table values worked out by hand, the relative-position
properties the app teaches, RoPE against a slow loop, and ALiBi's published slopes."""
from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from lpos.positions import (
    alibi_bias,
    alibi_slopes,
    pair_frequencies,
    rope_angles,
    rope_rotate,
    sinusoidal_table,
    wavelengths,
)


def test_sinusoidal_table_known_cells():
    # width 4: pair 0 turns at 1 rad per position, pair 1 at 10000^(-2/4) = 1/100 rad
    table = sinusoidal_table(3, 4)
    expected = torch.tensor(
        [
            [0.0, 1.0, 0.0, 1.0],
            [0.8414709848, 0.5403023059, 0.0099998333, 0.9999500004],  # sin 1, cos 1, sin .01, cos .01
            [0.9092974268, -0.4161468365, 0.0199986667, 0.9998000067],  # sin 2, cos 2, sin .02, cos .02
        ]
    )
    assert table.dtype == torch.float32
    assert_close(table, expected, rtol=0, atol=1e-7)


def test_sinusoidal_table_width_six_and_other_base():
    # width 6: frequencies 1, 10000^(-1/3) = 0.0464158883, 10000^(-2/3) = 0.0021544347
    row = sinusoidal_table(4, 6)[3]
    angles = [3.0, 3 * 0.0464158883, 3 * 0.0021544347]
    expected = [f(a) for a in angles for f in (math.sin, math.cos)]
    assert_close(row, torch.tensor(expected), rtol=0, atol=1e-6)
    # base 100, width 4: the second pair turns at 100^(-1/2) = 0.1 rad per position
    assert_close(sinusoidal_table(6, 4, base=100.0)[5, 2:], torch.tensor([math.sin(0.5), math.cos(0.5)]), rtol=0, atol=1e-7)


def test_frequencies_and_wavelengths():
    assert_close(pair_frequencies(8), torch.tensor([1.0, 0.1, 0.01, 0.001], dtype=torch.float64))
    assert_close(wavelengths(8), 2 * math.pi * torch.tensor([1.0, 10.0, 100.0, 1000.0], dtype=torch.float64))
    assert_close(rope_angles(torch.tensor([0, 2, 5]), 4), torch.tensor([[0.0, 0.0], [2.0, 0.02], [5.0, 0.05]], dtype=torch.float64))


@pytest.mark.parametrize("width", [3, 0, -2, 127])
def test_odd_width_is_refused(width):
    with pytest.raises(ValueError, match="positive even number"):
        sinusoidal_table(8, width)
    with pytest.raises(ValueError, match="positive even number"):
        rope_rotate(torch.zeros(2, max(width, 1)), torch.arange(2))


@pytest.mark.parametrize("width", [8, 64, 128])
def test_sinusoidal_dot_product_depends_only_on_offset(width):
    table = sinusoidal_table(300, width).double()
    frequencies = pair_frequencies(width)
    for k in [0, 1, 3, 17, 100]:
        closed_form = torch.cos(k * frequencies).sum()  # sum_i sin a sin b + cos a cos b = cos(a - b)
        for t in [0, 5, 42, 199]:
            assert_close(table[t] @ table[t + k], closed_form, rtol=0, atol=1e-5)
            assert_close(table[t + k] @ table[t], table[0] @ table[k], rtol=0, atol=1e-5)
    assert not math.isclose(float(table[0] @ table[1]), float(table[0] @ table[17]), abs_tol=1e-3)


def slow_rope(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """One 2x2 rotation per (position, pair), written as a loop."""
    out = x.clone().double()
    T, D = x.shape[-2], x.shape[-1]
    for t in range(T):
        for i in range(D // 2):
            angle = float(positions[t]) * base ** (-2 * i / D)
            c, s = math.cos(angle), math.sin(angle)
            a, b = x[..., t, 2 * i].double(), x[..., t, 2 * i + 1].double()
            out[..., t, 2 * i] = a * c - b * s
            out[..., t, 2 * i + 1] = a * s + b * c
    return out.to(x.dtype)


@pytest.mark.parametrize("shape", [(1, 2), (5, 4), (7, 16), (2, 3, 6, 8), (2, 4, 9, 32)])
def test_rope_matches_slow_loop(shape):
    g = torch.Generator().manual_seed(sum(shape))
    x = torch.randn(*shape, generator=g)
    positions = torch.arange(shape[-2])
    assert_close(rope_rotate(x, positions), slow_rope(x, positions), rtol=1e-5, atol=1e-5)
    odd_positions = torch.tensor([3 * t + 11 for t in range(shape[-2])])  # not 0..T-1
    assert_close(rope_rotate(x, odd_positions, base=500.0), slow_rope(x, odd_positions, base=500.0), rtol=1e-5, atol=1e-5)


def test_rope_position_zero_is_identity():
    x = torch.randn(3, 1, 8)
    assert torch.equal(rope_rotate(x, torch.tensor([0])), x)


@pytest.mark.parametrize("dim", [2, 8, 32])
def test_rope_preserves_norms(dim):
    x = torch.randn(4, 20, dim, dtype=torch.float64)
    rotated = rope_rotate(x, torch.arange(20))
    assert_close(rotated.norm(dim=-1), x.norm(dim=-1))
    assert not torch.allclose(rotated[:, 1:], x[:, 1:])  # it did rotate


@pytest.mark.parametrize("dim", [4, 16, 64])
def test_rope_dot_product_depends_only_on_relative_position(dim):
    g = torch.Generator().manual_seed(dim)
    q, k = torch.randn(dim, generator=g, dtype=torch.float64), torch.randn(dim, generator=g, dtype=torch.float64)

    def score(m: int, n: int) -> float:
        qm = rope_rotate(q[None, :], torch.tensor([m]))[0]
        kn = rope_rotate(k[None, :], torch.tensor([n]))[0]
        return float(qm @ kn)

    for m, n in [(5, 2), (9, 9), (3, 10), (40, 1)]:
        for shift in [1, 7, 250]:
            assert math.isclose(score(m + shift, n + shift), score(m, n), abs_tol=1e-9)
    assert not math.isclose(score(5, 2), score(5, 4), abs_tol=1e-6)  # distance does matter


def test_alibi_slopes_eight_heads():
    assert_close(alibi_slopes(8), torch.tensor([1 / 2 ** i for i in range(1, 9)]), rtol=0, atol=0)


def test_alibi_slopes_published_non_powers_of_two():
    # Press et al.'s reference get_slopes(n)
    assert_close(alibi_slopes(6), torch.tensor([0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125]), rtol=0, atol=0)
    twelve = [1 / 2 ** i for i in range(1, 9)] + [2 ** -0.5, 2 ** -1.5, 2 ** -2.5, 2 ** -3.5]
    assert_close(alibi_slopes(12), torch.tensor(twelve), rtol=1e-7, atol=0)
    assert_close(alibi_slopes(4), torch.tensor([0.25, 0.0625, 0.015625, 0.00390625]), rtol=0, atol=0)
    assert_close(alibi_slopes(1), torch.tensor([2.0 ** -8]), rtol=0, atol=0)
    with pytest.raises(ValueError):
        alibi_slopes(0)


def test_alibi_bias_values():
    bias = alibi_bias(2, 4)  # slopes 2^-4, 2^-8
    assert bias.shape == (2, 4, 4)
    distance = torch.tensor([[0, 0, 0, 0], [1, 0, 0, 0], [2, 1, 0, 0], [3, 2, 1, 0]], dtype=torch.float32)
    assert_close(bias[0], -distance / 16, rtol=0, atol=0)
    assert_close(bias[1], -distance / 256, rtol=0, atol=0)
    assert float(bias[0, 3, 0]) == -3 / 16  # linear in distance: three steps back costs three slopes


def test_alibi_bias_is_linear_per_head():
    bias = alibi_bias(8, 10)
    slopes = alibi_slopes(8)
    for i in range(10):
        for j in range(i + 1):
            assert_close(bias[:, i, j], -slopes * (i - j), rtol=0, atol=1e-7)
