"""cope (lpos/positions/cope.py): with random count tables, the counted positions are gate sums that
never fall as a key moves back, stay in [0, npos_max - 1] and are 0 after the query; the added score
is q·e[p], e interpolated between the rows either side of p (written out here); and a CoPE model's
first layer sees the order of earlier tokens, which a model without positions does not."""
from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from lpos.positions import NO_POSITIONS
from lpos.analysis import shuffle_experiment
from lpos.model import GPT, GPTConfig
from lpos.positions.cope import counts
from lpos.tokenizer import encode

T = 40


def cope_model(*, npos_max: int, seed: int = 0, vocab_size: int = 96, layers: int = 2) -> GPT:
    torch.manual_seed(seed)
    model = GPT(GPTConfig(position="cope", n_layer=layers, n_head=4, n_embd=32, vocab_size=vocab_size,
                          npos_max=npos_max)).eval()
    with torch.no_grad():
        for block in model.transformer.h:
            block.attn.cope.rows.normal_(0.0, 1.0)  # the tables start at 0: make them count for something
            block.attn.c_attn.weight.mul_(10.0)  # large q·k: gates near 0 and 1 as well as between
    return model


def layers_of(model: GPT, ids: torch.Tensor):
    """(layer, attention, q, k) of every layer, from the model's own streams and steps."""
    with torch.no_grad():
        streams = model.trace(ids, keep_residual=True).residual
        for layer, block in enumerate(model.transformer.h):
            q, k, _ = block.attn.project(block.ln_1(streams[layer]), positions=torch.arange(ids.shape[1]))
            yield layer, block.attn, q, k


def ids_for(seed: int, *, length: int = T, vocab: int = 96) -> torch.Tensor:
    return torch.randint(0, vocab, (2, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("npos_max", [128, 8])  # 8: a 40-token input counts past the last row, so p is clamped
def test_positions_are_gate_sums_that_never_fall_going_back(npos_max):
    model = cope_model(npos_max=npos_max, seed=1)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for layer, attn, q, k in layers_of(model, ids_for(2)):
        masked = attn.scores(q, k, scheme=NO_POSITIONS)  # (B, nh, T, S): q·k / sqrt(hs), -inf after the query
        p = counts(masked, npos_max)
        assert ((p >= 0) & (p <= npos_max - 1)).all()
        assert (p[..., ~causal] == 0).all(), "a key after the query counts nothing"
        # going back from the query (j = i, i-1, ..., 0) the count never falls
        assert (p[..., :-1] - p[..., 1:] >= -1e-6).all()  # p[i, j - 1] >= p[i, j] for every key
        gates = torch.sigmoid(masked)
        for i in (0, 7, T - 1):  # the count written out: the gates from key j to the query, summed
            for j in range(i + 1):
                expected = gates[..., i, j : i + 1].sum(-1).clamp(max=npos_max - 1)
                assert_close(p[..., i, j], expected, rtol=1e-5, atol=1e-5, msg=lambda m: f"layer {layer} {i},{j}: {m}")
        assert_close(p[..., torch.arange(T), torch.arange(T)], gates[..., torch.arange(T), torch.arange(T)],
                     rtol=1e-6, atol=1e-6)  # the key at the query counts its own gate only
        if npos_max == 8:
            assert (p == npos_max - 1).any(), "the test input should reach the clamp"
        assert (gates[..., causal] < 0.05).any() and (gates[..., causal] > 0.95).any()


@pytest.mark.parametrize("npos_max", [128, 8])
def test_the_score_change_is_q_dot_the_interpolated_row(npos_max):
    model = cope_model(npos_max=npos_max, seed=3)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for layer, attn, q, k in layers_of(model, ids_for(4)):
        masked = attn.scores(q, k, scheme=NO_POSITIONS)
        p = counts(masked, npos_max)  # (B, nh, T, S)
        rows = attn.cope.rows.detach()  # (npos, hs)
        low, high = p.floor().long(), p.ceil().long()
        share = (p - low)[..., None]  # how far p sits from the row below, toward the row above
        e = rows[low] * (1 - share) + rows[high] * share  # (B, nh, T, S, hs): the position vector at p
        expected = (q[:, :, :, None, :] * e).sum(-1)  # q_i · e[p_ij]
        change = attn.scores(q, k) - masked
        assert_close(change[..., causal], expected[..., causal], rtol=1e-4, atol=1e-4,
                     msg=lambda m: f"layer {layer}: {m}")
        assert torch.isneginf(attn.scores(q, k)[..., ~causal]).all()
        assert (p.frac()[..., causal] > 0.01).any(), "some counts fall between rows: the interpolation is tested"


def test_an_untrained_model_counts_nothing_into_its_scores():
    torch.manual_seed(0)
    model = GPT(GPTConfig(position="cope", n_layer=1, n_head=4, n_embd=32, vocab_size=96)).eval()
    assert (model.transformer.h[0].attn.cope.rows == 0).all()  # tables start at 0
    for _, attn, q, k in layers_of(model, ids_for(5)):
        assert_close(attn.scores(q, k), attn.scores(q, k, scheme=NO_POSITIONS), rtol=0, atol=0)


def test_each_layer_has_its_own_table():
    model = cope_model(npos_max=16)
    names = [name for name in model.state_dict() if "cope" in name]
    assert names == [f"transformer.h.{i}.attn.cope.rows" for i in range(2)]
    assert model.state_dict()[names[0]].shape == (16, 8)  # npos_max rows of head width


@pytest.mark.parametrize("scheme, blind", [("cope", False), ("none", True)])
def test_shuffling_earlier_tokens_reaches_the_first_layer(scheme, blind):
    ids = encode("The dog bit the man and the cat sat on the mat by the door")
    if scheme == "cope":
        model = cope_model(npos_max=128, seed=6, vocab_size=50257)
    else:
        torch.manual_seed(6)
        model = GPT(GPTConfig(position="none", n_layer=2, n_head=4, n_embd=32)).eval()
    with torch.no_grad():
        result = shuffle_experiment(model, ids, seed=1)
    assert result.shuffled != result.original and result.shuffled[-1] == result.original[-1]
    if blind:
        assert result.attention_change < 1e-5 and result.order_blind
    else:
        assert result.attention_change > 1e-3 and not result.order_blind
