"""fire (lpos/positions/fire.py): a model's bias against FIRE's formula written out here, scalar by
scalar, from its parameters (Li et al. 2024, section 3, with lpos's documented choices):

    b_h(i, j) = f_h( ψ(i - j) / ψ(max(L, i + 1)) ),   ψ(x) = log(c·x + 1),   c = softplus(c_raw),
    f(x) = W_out · relu(W_in · x + b_in) + b_out   (1 -> 32 -> n_head)

and the progressive interpolation: at a fixed distance the bias stays put while i + 1 <= L and moves
once i + 1 > L."""
from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from lpos.positions import NO_POSITIONS
from lpos.analysis.shuffle import first_layer_attention, shuffle_earlier
from lpos.model import GPT, GPTConfig

N_HEAD = 4


def fire_model(*, threshold: float, seed: int = 0, layers: int = 2) -> GPT:
    """A fire model whose FIRE parameters are all random: MLP weights N(0, 1), c from a random c_raw,
    L = threshold."""
    torch.manual_seed(seed)
    model = GPT(GPTConfig(position="fire", n_layer=layers, n_head=N_HEAD, n_embd=32, vocab_size=96)).eval()
    with torch.no_grad():
        for block in model.transformer.h:
            fire = block.attn.fire
            for p in (fire.mlp_in.weight, fire.mlp_in.bias, fire.mlp_out.weight, fire.mlp_out.bias):
                p.normal_(0.0, 1.0)
            fire.c_raw.fill_(float(torch.randn(())))
            fire.threshold.fill_(threshold)
    return model


def formula(fire, i: int, j: int) -> list[float]:
    """b_h(i, j) for every head, in float64 from the parameters' values."""
    c = math.log1p(math.exp(float(fire.c_raw.detach())))  # softplus
    L = float(fire.threshold.detach())
    psi = lambda x: math.log(c * x + 1)  # noqa: E731
    x = psi(i - j) / psi(max(L, i + 1))
    w_in, b_in = fire.mlp_in.weight.detach()[:, 0].tolist(), fire.mlp_in.bias.detach().tolist()
    w_out, b_out = fire.mlp_out.weight.detach().tolist(), fire.mlp_out.bias.detach().tolist()
    hidden = [max(0.0, w * x + b) for w, b in zip(w_in, b_in)]
    return [sum(w * h for w, h in zip(row, hidden)) + b for row, b in zip(w_out, b_out)]


PAIRS = [(0, 0), (5, 0), (5, 5), (40, 3), (99, 98), (127, 0), (128, 1), (129, 129), (200, 7), (300, 150), (511, 0)]


@pytest.mark.parametrize("threshold", [128.0, 60.0])
def test_bias_equals_the_formula(threshold):
    model = fire_model(threshold=threshold, seed=3)
    S = 512
    with torch.no_grad():
        for layer, block in enumerate(model.transformer.h):
            attn = block.attn
            bias = attn.scheme.bias(attn, 0, S, S)  # (nh, T, S)
            assert bias.shape == (N_HEAD, S, S)
            for i, j in PAIRS:
                expected = torch.tensor(formula(attn.fire, i, j), dtype=torch.float32)
                assert_close(bias[:, i, j], expected, rtol=1e-4, atol=1e-4,
                             msg=lambda m, i=i, j=j, layer=layer: f"layer {layer}, query {i}, key {j}: {m}")


def test_each_layer_has_its_own_function():
    model = fire_model(threshold=128.0, seed=4)
    with torch.no_grad():
        first, second = (b.attn.scheme.bias(b.attn, 0, 50, 50) for b in model.transformer.h)
    assert (first - second).abs().max() > 1e-2


def test_the_scores_carry_the_bias_in_every_layer():
    model = fire_model(threshold=100.0, seed=5)
    T = 160
    ids = torch.randint(0, 96, (2, T), generator=torch.Generator().manual_seed(1))
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    with torch.no_grad():
        streams = model.trace(ids, keep_residual=True).residual
        for layer, block in enumerate(model.transformer.h):
            attn = block.attn
            q, k, _ = attn.project(block.ln_1(streams[layer]), positions=torch.arange(T))
            added = attn.scores(q, k) - attn.scores(q, k, scheme=NO_POSITIONS)  # (B, nh, T, S)
            for i, j in [(0, 0), (10, 2), (99, 0), (100, 50), (150, 149), (159, 0)]:
                expected = torch.tensor(formula(attn.fire, i, j))
                assert_close(added[:, :, i, j], expected.expand(2, -1), rtol=1e-4, atol=1e-4)
            assert torch.isnan(added[..., ~causal]).all()  # -inf - -inf: both hide the keys after the query


def test_a_later_chunk_of_queries_reads_its_own_positions():
    model = fire_model(threshold=50.0, seed=6, layers=1)
    attn = model.transformer.h[0].attn
    with torch.no_grad():
        whole = attn.scheme.bias(attn, 0, 200, 200)
        chunk = attn.scheme.bias(attn, 190, 10, 200)  # queries 190..199 against keys 0..199
    assert_close(chunk, whole[:, 190:], rtol=0, atol=0)


def test_the_normaliser_holds_until_the_query_passes_L():
    L, d = 40, 5
    model = fire_model(threshold=float(L), seed=7, layers=1)
    attn = model.transformer.h[0].attn
    with torch.no_grad():
        bias = attn.scheme.bias(attn, 0, 200, 200)
    queries = torch.arange(d, 200)
    at_distance = bias[:, queries, queries - d]  # (nh, queries): the bias d keys back, query by query
    inside = at_distance[:, queries + 1 <= L]  # i + 1 <= L: the normaliser is ψ(L)
    assert_close(inside, inside[:, :1].expand_as(inside), rtol=0, atol=1e-6)
    past = at_distance[:, queries + 1 > L]  # the normaliser ψ(i + 1) grows with i
    assert (past[:, -1] - inside[:, 0]).abs().min() > 1e-3, "every head's bias moves once i + 1 > L"
    assert ((past[:, 1:] - past[:, :-1]).abs() > 0).any(dim=0).all(), "each step of i past L moves some head"
    for i in (L - 1, L, L + 1, 150):  # and each of them is the formula
        assert_close(bias[:, i, i - d], torch.tensor(formula(attn.fire, i, i - d), dtype=torch.float32),
                     rtol=1e-4, atol=1e-4)


def test_an_offset_moves_the_queries_and_with_them_the_normaliser():
    """`offset` shifts every position (GPT.forward): FIRE's bias reads the query's own position in its
    normaliser, so an input shifted past L reads other biases; one that stays inside L reads the same."""
    ids = torch.randint(0, 96, (1, 20), generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        inside = fire_model(threshold=200.0, seed=8)  # queries 100..119: i + 1 <= L either way
        assert_close(inside(ids, offset=100)[0], inside(ids)[0], rtol=0, atol=1e-5)
        past = fire_model(threshold=10.0, seed=8)  # queries 0..19 and 100..119: both past L, other normalisers
        change = (past(ids, offset=100)[0] - past(ids)[0]).abs().max()
    assert change > 1e-3, f"an offset of 100 changed the logits by only {float(change):.2e}"


def test_shuffling_earlier_tokens_reaches_the_first_layer():
    model = fire_model(threshold=128.0, seed=9, layers=1)
    ids = torch.randint(0, 96, (12,), generator=torch.Generator().manual_seed(9)).tolist()
    with torch.no_grad():
        before, _ = first_layer_attention(model, ids)
        after, _ = first_layer_attention(model, shuffle_earlier(ids, seed=1))
    assert abs(after - before).max() > 1e-3
