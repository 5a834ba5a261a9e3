"""t5 (lpos/positions/t5.py): its buckets against Hugging Face's T5 for every distance up to 4,096,
and a model's scores against its one shared table looked up by bucket, head by head, in every layer."""
from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from lpos.positions import NO_POSITIONS
from lpos.analysis.shuffle import first_layer_attention, shuffle_earlier
from lpos.model import GPT, GPTConfig
from lpos.positions.t5 import relative_bucket

T5Attention = pytest.importorskip("transformers.models.t5.modeling_t5").T5Attention
DISTANCES = torch.arange(0, 4097)
SETTINGS = [(32, 128), (16, 64)]


@pytest.mark.parametrize("num_buckets, max_distance", SETTINGS)
def test_buckets_equal_transformers_t5(num_buckets, max_distance):
    # transformers' relative_position is key minus query: a key d tokens back is -d
    expected = T5Attention._relative_position_bucket(-DISTANCES, bidirectional=False, num_buckets=num_buckets,
                                                     max_distance=max_distance)
    got = relative_bucket(DISTANCES, num_buckets=num_buckets, max_distance=max_distance)
    mismatched = (got != expected).nonzero().flatten().tolist()
    first = mismatched[:10]
    assert not mismatched, f"distances {first}: {got[first].tolist()} != transformers' {expected[first].tolist()}"
    assert got.dtype == torch.long
    assert got[: num_buckets // 2].tolist() == list(range(num_buckets // 2))  # exact below half the buckets
    assert set(got[max_distance:].tolist()) == {num_buckets - 1}  # everything from max_distance on shares the last
    assert (got.diff() >= 0).all()


def test_keys_after_the_query_fall_in_bucket_zero():
    assert relative_bucket(torch.tensor([-1, -5, -4096])).tolist() == [0, 0, 0]


def make_model(*, num_buckets: int, max_distance: int, random_table: bool, layers: int = 3) -> GPT:
    torch.manual_seed(0)
    model = GPT(GPTConfig(position="t5", n_layer=layers, n_head=4, n_embd=32, vocab_size=96,
                          num_buckets=num_buckets, max_distance=max_distance)).eval()
    if random_table:  # far from its N(0, 0.02) start, so a wrong lookup cannot hide in the noise
        with torch.no_grad():
            model.transformer.relative_bias.weight.normal_(0.0, 2.0)
    return model


@pytest.mark.parametrize("random_table", [False, True], ids=["untrained", "random-table"])
@pytest.mark.parametrize("num_buckets, max_distance", SETTINGS)
def test_scores_are_plain_scores_plus_the_table_by_bucket(num_buckets, max_distance, random_table):
    model = make_model(num_buckets=num_buckets, max_distance=max_distance, random_table=random_table)
    table = model.transformer.relative_bias.weight.detach()  # (buckets, nh)
    T = 200  # past max_distance: the far buckets are read too
    ids = torch.randint(0, 96, (2, T), generator=torch.Generator().manual_seed(1))
    distance = torch.arange(T)[:, None] - torch.arange(T)[None, :]  # (T, S) query minus key
    buckets = T5Attention._relative_position_bucket(-distance, bidirectional=False, num_buckets=num_buckets,
                                                    max_distance=max_distance)
    expected = table[buckets].permute(2, 0, 1)  # (nh, T, S)
    causal = distance >= 0
    with torch.no_grad():
        streams = model.trace(ids, keep_residual=True).residual
        for layer, block in enumerate(model.transformer.h):
            attn = block.attn
            q, k, _ = attn.project(block.ln_1(streams[layer]), positions=torch.arange(T))
            scores, plain = attn.scores(q, k), attn.scores(q, k, scheme=NO_POSITIONS)
            assert_close(plain[..., causal], ((q @ k.transpose(-2, -1)) / (q.shape[-1] ** 0.5))[..., causal],
                         rtol=1e-5, atol=1e-5)
            added = (scores - plain)[..., causal]  # (B, nh, causal entries)
            for head in range(model.config.n_head):
                assert_close(added[:, head], expected[head][causal].expand(2, -1), rtol=1e-5, atol=1e-5,
                             msg=lambda m, layer=layer, head=head: f"layer {layer} head {head}: {m}")
            assert torch.isneginf(scores[..., ~causal]).all()


def test_a_later_chunk_of_queries_reads_its_own_distances():
    model = make_model(num_buckets=32, max_distance=128, random_table=True, layers=1)
    attn = model.transformer.h[0].attn
    table = model.transformer.relative_bias.weight.detach()
    with torch.no_grad():
        bias = attn.scheme.bias(attn, 150, 3, 153)  # queries 150..152 against keys 0..152
    distance = torch.arange(150, 153)[:, None] - torch.arange(153)[None, :]
    buckets = T5Attention._relative_position_bucket(-distance, bidirectional=False)
    assert_close(bias, table[buckets].permute(2, 0, 1), rtol=0, atol=0)


def test_one_table_shared_by_every_layer():
    model = make_model(num_buckets=16, max_distance=64, random_table=False)
    keys = [name for name in model.state_dict() if "relative_bias" in name]
    assert keys == ["transformer.relative_bias.weight"]
    assert model.state_dict()["transformer.relative_bias.weight"].shape == (16, 4)
    for block in model.transformer.h:
        assert block.attn.model_parts["relative_bias"] is model.transformer.relative_bias
        assert not [name for name, _ in block.named_parameters() if "relative_bias" in name]
    relative = [p for name, p in model.named_parameters() if "relative_bias" in name]
    assert len(relative) == 1  # counted once, trained once


def test_training_steps_move_the_shared_table():
    model = make_model(num_buckets=32, max_distance=128, random_table=False, layers=2).train()
    before = model.transformer.relative_bias.weight.detach().clone()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)  # decay would move unread rows
    ids = torch.randint(0, 96, (4, 65), generator=torch.Generator().manual_seed(2))
    for _ in range(3):
        _, loss = model(ids[:, :-1], ids[:, 1:])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    moved = (model.transformer.relative_bias.weight.detach() - before).abs()
    # buckets 0..(the bucket of distance 63) are read by 64-token windows; the rest never are
    read = int(relative_bucket(torch.tensor(63)))
    assert (moved[: read + 1] > 1e-4).all()
    assert (moved[read + 1:] == 0).all()


def test_shuffling_earlier_tokens_reaches_the_first_layer():
    model = make_model(num_buckets=32, max_distance=128, random_table=True, layers=1)
    ids = torch.randint(0, 96, (12,), generator=torch.Generator().manual_seed(9)).tolist()
    with torch.no_grad():
        before, _ = first_layer_attention(model, ids)
        after, _ = first_layer_attention(model, shuffle_earlier(ids, seed=1))
    assert abs(after - before).max() > 1e-3
