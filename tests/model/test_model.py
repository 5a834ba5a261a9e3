"""The GPT: shapes for every scheme, attention weights, embed_parts, length limits, the
order-blindness of `none` at layer 1, and the corpus-vocabulary loss."""
from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from lpos.analysis.shuffle import first_layer_attention, shuffle_earlier, shuffle_experiment
from lpos.corpus import SHIPPED_SEED
from lpos.model import GPT, SINUSOID_SCALE, GPTConfig, initial_token_table, untrained_model
from lpos.positions import SCHEMES, RopeScaling, pair_frequencies, rotation_frequencies, sinusoidal_table

ROOT = Path(__file__).resolve().parents[2]


def random_ids(B: int, T: int, seed: int = 0, high: int = 50257) -> torch.Tensor:
    return torch.randint(0, high, (B, T), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_forward_shapes(tiny_model, scheme):
    model = tiny_model(scheme)
    idx = random_ids(3, 10)
    logits, loss = model(idx)
    assert logits.shape == (3, 10, 50257)
    assert loss is None
    logits, loss = model(idx, targets=random_ids(3, 10, seed=1))
    assert loss.shape == () and torch.isfinite(loss)
    # untrained: close to the uniform guess ln(50257) = 10.82
    assert 10.0 < loss.item() < 11.6


@pytest.mark.parametrize("scheme", SCHEMES)
def test_loss_is_cross_entropy_of_the_logits(tiny_model, scheme):
    model = tiny_model(scheme)
    idx, targets = random_ids(2, 7), random_ids(2, 7, seed=5)
    logits, loss = model(idx, targets=targets)
    by_hand = -F.log_softmax(logits, dim=-1).gather(2, targets[..., None]).mean()
    assert_close(loss, by_hand)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_attention_weights(tiny_model, scheme):
    model = tiny_model(scheme, n_layer=3)
    T = 9
    logits, loss, attention = model(random_ids(2, T), return_attention=True)
    assert loss is None and logits.shape == (2, T, 50257)
    assert len(attention) == 3
    for weights in attention:
        assert weights.shape == (2, 4, T, T)
        assert_close(weights.sum(-1), torch.ones(2, 4, T))
        above_diagonal = ~torch.ones(T, T, dtype=torch.bool).tril()
        assert torch.all(weights[..., above_diagonal] == 0)  # causal: no weight on later tokens
        assert torch.all(weights[..., 0, 0] == 1)  # the first token can only see itself


@pytest.mark.parametrize("scheme", ["rope", "alibi", "none"])
def test_embed_parts_without_position_rows(tiny_model, scheme):
    model = tiny_model(scheme)
    idx = random_ids(2, 6)
    parts = model.embed_parts(idx)
    assert parts.position is None
    assert torch.equal(parts.token, model.transformer.wte.weight[idx])
    assert torch.equal(parts.total, parts.token)


def test_embed_parts_learned(tiny_model):
    model = tiny_model("learned")
    idx = random_ids(2, 6)
    parts = model.embed_parts(idx)
    assert torch.equal(parts.token, model.transformer.wte.weight[idx])
    assert torch.equal(parts.position, model.transformer.wpe.weight[:6])
    assert torch.equal(parts.total, parts.token + parts.position)


def test_embed_parts_sinusoidal(tiny_model):
    model = tiny_model("sinusoidal")
    idx = random_ids(2, 6)
    parts = model.embed_parts(idx)
    assert torch.equal(parts.token, model.transformer.wte.weight[idx])
    assert_close(parts.position, SINUSOID_SCALE * sinusoidal_table(6, 32))
    # scaled, a position row has the norm of an initial token row: 0.02 * sqrt(C)
    assert_close(parts.position.norm(dim=-1), torch.full((6,), 0.02 * 32 ** 0.5))
    assert torch.equal(parts.total, parts.token + parts.position)
    assert not hasattr(model.transformer, "wpe")  # nothing to train


def test_same_token_at_two_positions(tiny_model):
    idx = torch.tensor([[464, 3797, 464]])  # "The cat The"
    for scheme in SCHEMES:
        parts = tiny_model(scheme).embed_parts(idx)
        assert torch.equal(parts.token[0, 0], parts.token[0, 2])
        if scheme in ("learned", "sinusoidal"):
            assert not torch.allclose(parts.total[0, 0], parts.total[0, 2])
        else:
            assert torch.equal(parts.total[0, 0], parts.total[0, 2])


def test_learned_table_length_limit(tiny_model):
    model = tiny_model("learned", block_size=16)
    model(random_ids(1, 16))  # exactly the table is fine
    with pytest.raises(ValueError) as error:
        model(random_ids(1, 17))
    message = str(error.value)
    assert "16 rows" in message and "17 tokens" in message
    for scheme in [s for s in SCHEMES if s != "learned"]:  # every other scheme runs at any length
        assert scheme in message
    with pytest.raises(ValueError):
        model.embed_parts(random_ids(1, 17))


@pytest.mark.parametrize("scheme", [s for s in SCHEMES if s != "learned"])
def test_other_schemes_run_past_block_size(tiny_model, scheme):
    model = tiny_model(scheme, block_size=16)
    logits, _, attention = model(random_ids(1, 24), return_attention=True)
    assert logits.shape == (1, 24, 50257) and torch.isfinite(logits).all()
    assert attention[0].shape == (1, 4, 24, 24)


def sharpened(model: GPT) -> GPT:
    """Scale the query/key/value projections up so attention is far from uniform (an untrained
    model spreads attention almost evenly, which would hide any effect of order)."""
    with torch.no_grad():
        for block in model.transformer.h:
            block.attn.c_attn.weight.mul_(10)
    return model


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_none_is_order_blind_at_layer_one(tiny_model, seed):
    model = sharpened(tiny_model("none"))
    ids = random_ids(1, 12, seed=seed)[0].tolist()
    output, weights = first_layer_attention(model, ids)
    for shuffle_seed in range(4):
        shuffled = shuffle_earlier(ids, seed=shuffle_seed)
        assert shuffled != ids and shuffled[-1] == ids[-1] and sorted(shuffled) == sorted(ids)
        output_after, weights_after = first_layer_attention(model, shuffled)
        assert_close(torch.from_numpy(output_after), torch.from_numpy(output), rtol=0, atol=1e-6)
        # the same weights, moved with their tokens
        order = [ids[:-1].index(t) for t in shuffled[:-1]] if len(set(ids)) == len(ids) else None
        if order is not None:
            assert_close(torch.from_numpy(weights_after[:, :-1]), torch.from_numpy(weights[:, order]), rtol=0, atol=1e-6)
    result = shuffle_experiment(model, ids, seed=seed)
    assert result.attention_change < 1e-6
    assert result.logits_change > 1e-3  # from layer 2 on the causal mask leaks order


@pytest.mark.parametrize("scheme", ["learned", "sinusoidal", "rope", "alibi"])
def test_other_schemes_see_order_at_layer_one(tiny_model, scheme):
    model = sharpened(tiny_model(scheme))
    for seed in range(3):
        ids = random_ids(1, 12, seed=seed)[0].tolist()
        output, _ = first_layer_attention(model, ids)
        output_after, _ = first_layer_attention(model, shuffle_earlier(ids, seed=seed))
        change = float(abs(output_after - output).max())
        assert change > 1e-3, (scheme, seed, change)


def test_vocab_loss_equals_forward_loss(tiny_model):
    model = tiny_model("rope")
    vocab = torch.tensor(sorted({13, 262, 464, 3797, 3332, 50256, 999, 12345}))
    model.output_vocab = vocab
    g = torch.Generator().manual_seed(3)
    idx = vocab[torch.randint(0, len(vocab), (2, 9), generator=g)]
    targets = vocab[torch.randint(0, len(vocab), (2, 9), generator=g)]
    logits, loss = model(idx, targets=targets)
    outside = torch.ones(50257, dtype=torch.bool)
    outside[vocab] = False
    assert torch.all(logits[..., outside] == float("-inf"))
    assert torch.isfinite(logits[..., vocab]).all()
    assert_close(model.vocab_loss(idx, targets), loss)
    per_token = model.vocab_loss(idx, targets, reduction="none")
    assert per_token.shape == (2, 9)
    assert_close(per_token.mean(), loss)
    # a target outside the vocabulary has probability zero: left out of vocab_loss's mean
    targets_with_outsider = targets.clone()
    targets_with_outsider[0, 0] = 7
    per_token = model.vocab_loss(idx, targets_with_outsider, reduction="none")
    assert torch.isnan(per_token[0, 0]) and not torch.isnan(per_token).flatten()[1:].any()
    assert_close(model.vocab_loss(idx, targets_with_outsider), per_token.flatten()[1:].mean())
    assert model(idx, targets=targets_with_outsider)[1].item() == float("inf")


def test_vocab_loss_without_output_vocab(tiny_model):
    model = tiny_model("learned")
    idx, targets = random_ids(2, 5), random_ids(2, 5, seed=9)
    assert_close(model.vocab_loss(idx, targets), model(idx, targets=targets)[1])


def trained_rows(model: GPT, vocab: torch.Tensor) -> GPT:
    """`model` with its vocabulary's rows moved off their initial values, as training leaves them."""
    model.output_vocab = vocab
    with torch.no_grad():
        model.transformer.wte.weight[vocab] += 0.5 * torch.randn(len(vocab), model.config.n_embd,
                                                                generator=torch.Generator().manual_seed(4))
    return model.eval()


@pytest.mark.parametrize("scheme", SCHEMES)
def test_shared_token_table_gives_the_same_numbers(tiny_model, scheme):
    vocab = torch.tensor([3, 13, 262, 464, 999, 12345, 50256])
    dense = trained_rows(tiny_model(scheme), vocab)
    shared = trained_rows(tiny_model(scheme), vocab)
    base = initial_token_table(shared.config)
    assert shared.share_token_table(base)
    wte = shared.transformer.wte
    assert wte.base is base and wte.rows.shape == (len(vocab), 32)  # the base is held, not copied
    assert shared.lm_head is None
    idx = torch.tensor([[262, 7, 464, 50256, 13, 9999, 3]])  # in and out of the vocabulary
    with torch.no_grad():
        assert torch.equal(shared.embed_parts(idx).total, dense.embed_parts(idx).total)
        assert torch.equal(shared(idx)[0], dense(idx)[0])
        targets = torch.tensor([[13, 262, 3, 464, 999, 12345, 7]])
        assert torch.equal(shared.vocab_loss(idx, targets, reduction="none").nan_to_num(-1),
                           dense.vocab_loss(idx, targets, reduction="none").nan_to_num(-1))
    assert torch.equal(wte.weight, dense.transformer.wte.weight)
    assert shared.num_params() == dense.num_params()
    assert not shared.share_token_table(base)  # already shared


def test_shared_token_table_refuses_what_it_cannot_hold(tiny_model):
    vocab = torch.tensor([3, 13, 262])
    base = initial_token_table(tiny_model("rope").config)
    assert not tiny_model("rope").share_token_table(base)  # no output vocabulary: every row is output
    moved = trained_rows(tiny_model("rope"), vocab)
    with torch.no_grad():
        moved.transformer.wte.weight[5] += 1.0  # a row outside the vocabulary that is not its initial value
    assert not moved.share_token_table(base)
    assert not trained_rows(tiny_model("rope", tied=False), vocab).share_token_table(base)
    assert not trained_rows(tiny_model("rope"), vocab).share_token_table(base[:, :16])


def test_building_a_model_draws_the_random_stream_the_shipped_models_were_trained_from():
    """Sums of a few weights after torch.manual_seed(0), and the stream's next draw, as the code that
    trained checkpoints/*.pt gave them (commit 78fcaa5): a change to what GPT() draws, or in which
    order, would make `lpos train` stop reproducing the shipped files."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layer=2, n_head=2, n_embd=16, block_size=32, position="learned"))
    weights = dict(model.named_parameters())
    sums = [float(weights[name].detach().double().sum()) for name in
            ("transformer.h.0.attn.c_attn.weight", "transformer.wpe.weight", "transformer.h.1.mlp.c_proj.weight")]
    assert sums == pytest.approx([-0.834432, 0.533595, -0.291112], abs=1e-6)
    assert torch.rand(1).item() == pytest.approx(0.15394151210784912, abs=1e-7)


@pytest.mark.parametrize("tied", [True, False])
def test_empty_model_has_the_shape_of_a_built_one(tied):
    config = GPTConfig(n_layer=2, n_head=2, n_embd=16, block_size=32, tied=tied)
    built, empty = GPT(config), GPT.empty(config)
    assert {k: v.shape for k, v in empty.state_dict().items()} == {k: v.shape for k, v in built.state_dict().items()}
    assert all(p.device.type == "cpu" for p in empty.parameters())
    assert (empty.lm_head.weight is empty.transformer.wte.weight) == tied
    empty.load_state_dict(built.state_dict())
    idx = random_ids(1, 6, high=config.vocab_size)
    assert torch.equal(empty(idx)[0], built(idx)[0])


def test_token_table_starts_from_its_own_generator(tiny_model):
    model = tiny_model("alibi", init_seed=7)
    assert torch.equal(model.transformer.wte.weight, initial_token_table(model.config))
    assert model.lm_head.weight is model.transformer.wte.weight  # tied
    torch.manual_seed(123)  # the global seed does not move the token table
    assert torch.equal(GPT(model.config).transformer.wte.weight, initial_token_table(model.config))


def test_config_is_frozen_and_validated():
    config = GPTConfig(n_layer=1, n_head=2, n_embd=8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.position = "rope"
    assert dataclasses.replace(config, position="rope").position == "rope"
    with pytest.raises(ValueError, match="unknown activation 'swish'; choose 'gelu', 'gelu_tanh' or 'relu'"):
        GPTConfig(activation="swish")
    with pytest.raises(ValueError, match="head_bias needs an untied head"):
        GPTConfig(head_bias=True)
    with pytest.raises(ValueError, match="unknown position scheme 'absolute'"):
        GPTConfig(position="absolute")
    with pytest.raises(ValueError, match="divisible"):
        GPTConfig(n_embd=30, n_head=4)
    with pytest.raises(ValueError, match="even head size"):
        GPTConfig(n_embd=12, n_head=4, position="rope")
    assert GPTConfig.from_dict({"n_layer": 2, "unknown_field": 1}).n_layer == 2


def test_gelu_variants_differ(tiny_model):
    exact, tanh = tiny_model("learned"), tiny_model("learned", activation="gelu_tanh")
    assert exact.transformer.h[0].mlp.gelu.approximate == "none"
    assert tanh.transformer.h[0].mlp.gelu.approximate == "tanh"


def test_untrained_model_is_the_apps_and_leaves_the_random_state_alone():
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    model = untrained_model("rope")
    assert torch.equal(torch.random.get_rng_state(), before)
    torch.manual_seed(0)  # how the app built its untrained model before the factory
    reference = GPT(GPTConfig(position="rope", init_seed=SHIPPED_SEED)).eval()
    assert not model.training
    for (name, got), (_, expected) in zip(model.state_dict().items(), reference.state_dict().items()):
        assert torch.equal(got, expected), name


@pytest.mark.parametrize("scheme", SCHEMES)
def test_max_input_length_is_the_table_or_none(tiny_model, scheme):
    model = tiny_model(scheme, block_size=16)
    assert model.max_input_length == (16 if scheme == "learned" else None)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_trace_keeps_every_residual_stream_and_the_models_numbers(tiny_model, scheme):
    model, idx = tiny_model(scheme), random_ids(2, 12)
    with torch.no_grad():
        logits, _, attention = model(idx, return_attention=True)
        traced = model.trace(idx, keep_residual=True)
        x = model.embed_parts(idx).total
        for block, stream in zip(model.transformer.h, traced.residual):
            assert torch.equal(stream, x)
            x, _ = block(x)
    assert torch.equal(traced.residual[-1], x) and len(traced.residual) == model.config.n_layer + 1
    assert torch.equal(model.output_logits(traced.hidden), logits)
    assert all(torch.equal(a, b) for a, b in zip(traced.attention, attention))
    assert model.trace(idx, keep_attention=False).attention == [] and model.trace(idx).residual == []


@pytest.mark.parametrize("scheme", SCHEMES)
def test_attention_steps_compose_to_its_forward(tiny_model, scheme):
    model, idx = tiny_model(scheme), random_ids(1, 9)
    block = model.transformer.h[0]
    with torch.no_grad():
        x = block.ln_1(model.embed_parts(idx, offset=3).total)
        _, weights = block.attn(x, offset=3)
        q, k, _ = block.attn.project(x, positions=torch.arange(3, 12))  # (1, nh, T, hs)
        scores = block.attn.scores(q, k)  # (1, nh, T, T)
    assert torch.equal(F.softmax(scores, dim=-1), weights)
    assert torch.isinf(scores[0, :, 0, 1:]).all() and scores[0, :, -1].isfinite().all()  # the causal mask
    raw, _, _ = block.attn.project(x, positions=None)  # before any rotation
    assert torch.equal(raw, q) == (not model.scheme.shows("rotation"))  # block 1 rotates in every rotating scheme


def test_rope_frequencies_are_built_once_per_head_size_and_scaling():
    yarn = RopeScaling("yarn", 4.0, 16)
    assert rotation_frequencies(16, yarn) is rotation_frequencies(16, RopeScaling("yarn", 4.0, 16))
    assert torch.equal(rotation_frequencies(16, yarn), yarn.frequencies(16))
    assert torch.equal(rotation_frequencies(16), pair_frequencies(16))


def test_counting_and_building_on_the_meta_device_imports_no_compiler():
    """A file's parameter count and an in-place build run on the meta device with their initialisation
    skipped (lpos.meta_device): an init on a meta tensor would import torch._dynamo and sympy, about
    2.5 s of a cold server's first page. Run in a fresh process: this one may have imported them."""
    script = ("import sys\n"
              "from lpos import checkpoints\n"
              "from lpos.checkpoints.build import build_model\n"
              "from lpos.layers import parameter_count\n"
              "from lpos.meta_device import shapes_only\n"
              "from lpos.model import GPT, GPTConfig\n"
              "from lpos.positions import scheme_info\n"
              "model = checkpoints.load('checkpoints/learned.pt')\n"
              "for scheme in ('learned', 'alibi', 't5', 'fire', 'cope', 'rope'):\n"
              "    config = GPTConfig(vocab_size=300, block_size=64, n_layer=2, n_head=2, n_embd=32, position=scheme)\n"
              "    built, info = GPT(config), scheme_info(scheme)\n"
              "    on_cpu = [sum(p.numel() for m in modules.values() for p in m.parameters())\n"
              "              for modules in (info.model_parameters(config), info.layer_parameters(config))]\n"
              "    assert info.parameter_count(config) == on_cpu[0] + config.n_layer * on_cpu[1], scheme\n"
              "    assert parameter_count(config) > on_cpu[0], scheme\n"
              "    with shapes_only():\n"
              "        empty = GPT(config, init_weights=False)\n"
              "    assert all(p.is_meta for p in empty.parameters())\n"
              "    rebuilt = build_model(config, dict(built.state_dict()), scheme, in_place=True)\n"
              "    assert all(torch.equal(a, b) for a, b in zip(rebuilt.state_dict().values(), built.state_dict().values()))\n"
              "print(sorted(m for m in ('torch._dynamo', 'sympy') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", "import torch\n" + script], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
