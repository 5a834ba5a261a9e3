"""GPT.forward's offset, rope_scaling and KV cache: the defaults give exactly the numbers of the
forward as it was before they existed (copied below), an offset is invisible to the relative
schemes and visible to the absolute ones, and a cache gives the numbers of a full recompute."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import CLASSIC_SCHEMES
from torch.testing import assert_close

from lpos import checkpoints
from lpos.model import SINUSOID_SCALE, GPT, KVCache
from lpos.positions import SCHEMES, RopeScaling, alibi_slopes, sinusoidal_table

# Shifting every position changes nothing for these (fire: while each query's i + 1 stays within its L, 128,
# as in the tests below); it moves the rows the other two add.
RELATIVE = ["rope", "alibi", "none", "t5", "fire", "cope", "rope-partial", "p-rope", "rnope"]
ABSOLUTE = ["learned", "sinusoidal"]


# --- the forward of lpos/model.py at 60ae55f (before offset, rope_scaling and the cache), verbatim maths ---
def old_rope_rotate(x, positions, base=10000.0):
    D = x.shape[-1]
    frequencies = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    angles = positions.to(torch.float64)[:, None] * frequencies[None, :]
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    pairs = x.reshape(*x.shape[:-1], D // 2, 2)
    even, odd = pairs[..., 0], pairs[..., 1]
    rotated = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)
    return rotated.reshape(x.shape)


def old_alibi_bias(n_heads, length):
    pos = torch.arange(length)
    distance = (pos[:, None] - pos[None, :]).clamp(min=0).float()
    return -alibi_slopes(n_heads)[:, None, None] * distance[None]


def old_attention(attn, x, position):
    B, T, C = x.shape
    nh, hs = attn.n_head, C // attn.n_head
    q, k, v = attn.c_attn(x).split(C, dim=2)
    q = q.view(B, T, nh, hs).transpose(1, 2)
    k = k.view(B, T, nh, hs).transpose(1, 2)
    v = v.view(B, T, nh, hs).transpose(1, 2)
    if position == "rope":
        positions = torch.arange(T, device=x.device)
        q, k = old_rope_rotate(q, positions), old_rope_rotate(k, positions)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
    if position == "alibi":
        scores = scores + old_alibi_bias(nh, T).to(scores)
    causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
    scores = scores.masked_fill(~causal, float("-inf"))
    weights = F.softmax(scores, dim=-1)
    y = attn.attn_dropout(weights) @ v
    y = y.transpose(1, 2).contiguous().view(B, T, C)
    return attn.resid_dropout(attn.c_proj(y))


def old_forward(model: GPT, idx: torch.Tensor) -> torch.Tensor:
    T = idx.shape[1]
    token = model.transformer.wte(idx)
    if model.config.position == "learned":
        x = token + model.transformer.wpe(torch.arange(T, device=idx.device))
    elif model.config.position == "sinusoidal":
        x = token + SINUSOID_SCALE * sinusoidal_table(T, model.config.n_embd).to(token)
    else:
        x = token
    x = model.transformer.drop(x)
    for block in model.transformer.h:
        x = x + old_attention(block.attn, block.ln_1(x), model.config.position)
        x = x + block.mlp(block.ln_2(x))
    logits = model.lm_head(model.transformer.ln_f(x))
    if model.output_vocab is not None:
        outside = torch.ones(model.config.vocab_size, dtype=torch.bool)
        outside[model.output_vocab] = False
        logits = logits.masked_fill(outside, float("-inf"))
    return logits
# --- end of the copy ---


def random_ids(B: int, T: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 50257, (B, T), generator=torch.Generator().manual_seed(seed))


def shipped(scheme: str):
    return pytest.param(scheme, marks=pytest.mark.skipif(scheme not in checkpoints.available(),
                                                         reason=f"checkpoints/{scheme}.pt is not shipped"))


@pytest.fixture(scope="module")
def shipped_models():
    return {name: checkpoints.load(name)[0] for name in checkpoints.available()}


@pytest.mark.parametrize("scheme", CLASSIC_SCHEMES)  # the old forward knows these five
def test_defaults_give_the_old_logits_bit_for_bit(tiny_model, scheme):
    model = tiny_model(scheme)
    idx = random_ids(2, 40)
    with torch.no_grad():
        assert torch.equal(model(idx)[0], old_forward(model, idx))
        assert torch.equal(model(idx, offset=0, rope_scaling=None)[0], old_forward(model, idx))


@pytest.mark.parametrize("scheme", [shipped(s) for s in CLASSIC_SCHEMES])
def test_shipped_defaults_give_the_old_logits_bit_for_bit(shipped_models, scheme):
    model, idx = shipped_models[scheme], random_ids(1, 128, seed=3)
    with torch.no_grad():
        assert torch.equal(model(idx)[0], old_forward(model, idx))


@pytest.mark.parametrize("scheme", [shipped("rope")])
def test_method_none_gives_the_unscaled_logits_bit_for_bit(shipped_models, scheme):
    model, idx = shipped_models["rope"], random_ids(1, 300, seed=4)
    with torch.no_grad():
        plain = model(idx)[0]
        assert torch.equal(model(idx, rope_scaling=RopeScaling("as-trained", 4.0))[0], plain)
        assert torch.equal(model.vocab_loss(idx[:, :-1], idx[:, 1:], rope_scaling=RopeScaling("as-trained", 8.0)),
                           model.vocab_loss(idx[:, :-1], idx[:, 1:]))
        for method in ("pi", "ntk", "yarn"):
            assert not torch.allclose(model(idx, rope_scaling=RopeScaling(method, 4.0))[0], plain)


def max_offset_change(model: GPT, idx: torch.Tensor, offset: int) -> float:
    with torch.no_grad():
        a, b = model(idx)[0], model(idx, offset=offset)[0]
    finite = a.isfinite()
    return float((a[finite] - b[finite]).abs().max())


@pytest.mark.parametrize("offset", [1, 17, 100])
def test_an_offset_is_invisible_to_relative_schemes_and_visible_to_absolute_ones(tiny_model, offset):
    idx = random_ids(2, 20)
    for scheme in RELATIVE:
        assert max_offset_change(tiny_model(scheme), idx, offset) < 1e-5, scheme
    for scheme in ABSOLUTE:
        assert max_offset_change(tiny_model(scheme, block_size=128), idx, offset) > 1e-3, scheme


@pytest.mark.parametrize("scheme", [shipped(s) for s in SCHEMES])
def test_offset_property_on_the_shipped_models(shipped_models, scheme):
    model, idx = shipped_models[scheme], random_ids(1, 48, seed=2)
    change = max_offset_change(model, idx, 64)
    if scheme in RELATIVE:
        assert change < 1e-4
    else:
        assert change > 0.1  # a trained absolute table moves real predictions


def test_offset_shifts_the_added_rows(tiny_model):
    idx = random_ids(1, 5)
    learned = tiny_model("learned")
    assert torch.equal(learned.embed_parts(idx, offset=7).position, learned.transformer.wpe.weight[7:12])
    sinusoidal = tiny_model("sinusoidal")
    assert_close(sinusoidal.embed_parts(idx, offset=7).position, sinusoidal.embed_parts(random_ids(1, 12)).position[7:])


def test_learned_offset_past_the_table_names_both_numbers(tiny_model):
    model = tiny_model("learned")  # 64 rows
    model(random_ids(1, 10), offset=54)
    with pytest.raises(ValueError, match=r"64 rows; this sequence has 10 tokens from position 55, so it needs 65 rows"):
        model(random_ids(1, 10), offset=55)
    with pytest.raises(ValueError, match="offset must be 0 or more"):
        model(random_ids(1, 10), offset=-1)


def test_rope_scaling_on_another_scheme_is_refused(tiny_model):
    with pytest.raises(ValueError, match="this model uses 'alibi'"):
        tiny_model("alibi")(random_ids(1, 4), rope_scaling=RopeScaling("pi", 2.0))


@pytest.mark.parametrize("scheme, scaling", [(s, None) for s in SCHEMES] + [("rope", RopeScaling("yarn", 4.0, 16))])
def test_a_cache_gives_the_logits_of_a_full_recompute(tiny_model, scheme, scaling):
    model, idx = tiny_model(scheme), random_ids(2, 30, seed=5)
    with torch.no_grad():
        full, _, full_attention = model(idx, return_attention=True, rope_scaling=scaling, offset=3 * (scheme != "learned"))
        cache = KVCache(model.config.n_layer)
        pieces = [model(idx[:, :12], cache=cache, rope_scaling=scaling, offset=3 * (scheme != "learned"))[0]]
        for t in range(12, 30):
            logits, _, attention = model(idx[:, t : t + 1], cache=cache, rope_scaling=scaling, return_attention=True,
                                         offset=3 * (scheme != "learned"))
            pieces.append(logits)
            assert attention[0].shape == (2, 4, 1, t + 1)
            assert_close(attention[-1][:, :, 0], full_attention[-1][:, :, t, : t + 1], atol=1e-6, rtol=1e-5)
    assert cache.length == 30
    assert_close(torch.cat(pieces, dim=1), full, atol=1e-5, rtol=1e-5)


def test_a_cache_stops_the_learned_model_at_its_table(tiny_model):
    model = tiny_model("learned")  # 64 rows
    cache = KVCache(model.config.n_layer)
    with torch.no_grad():
        model(random_ids(1, 64), cache=cache)
        with pytest.raises(ValueError, match="from position 64, so it needs 65 rows"):
            model(random_ids(1, 1), cache=cache)


def test_every_scheme_is_relative_or_absolute():
    assert sorted(RELATIVE + ABSOLUTE) == sorted(SCHEMES)
