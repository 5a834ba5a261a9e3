"""Generation with a KV cache: deterministic for a seed, stops at the budget (or the learned
table), greedy at temperature 0, and token for token what a full recompute writes."""
from __future__ import annotations

import pytest
import torch

from lpos import checkpoints
from lpos.analysis.generate import Sampling, choose, continue_text, stream
from lpos.positions import SCHEMES
from lpos.tokenizer import decode, encode

PROMPT = encode("Once upon a time")


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_seed_writes_the_same_text_and_the_budget_is_kept(tiny_model, scheme):
    model = tiny_model(scheme, block_size=128)
    first = continue_text(model, PROMPT, max_new_tokens=25, sampling=Sampling(1.0, 50, seed=3))
    again = continue_text(model, PROMPT, max_new_tokens=25, sampling=Sampling(1.0, 50, seed=3))
    other = continue_text(model, PROMPT, max_new_tokens=25, sampling=Sampling(1.0, 50, seed=4))
    assert first.new == again.new and len(first.new) == 25 and not first.stopped_at_wall
    assert other.new != first.new
    assert first.prompt == PROMPT and first.text == decode(PROMPT + first.new)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("sampling", [Sampling(0.0, None, 0), Sampling(0.9, 20, 7)])
def test_the_cache_writes_what_a_full_recompute_writes(tiny_model, scheme, sampling):
    model = tiny_model(scheme, block_size=128)
    cached = continue_text(model, PROMPT, max_new_tokens=40, sampling=sampling)
    recomputed = continue_text(model, PROMPT, max_new_tokens=40, sampling=sampling, use_cache=False)
    assert cached.new == recomputed.new


def test_greedy_takes_the_most_likely_token_every_time(tiny_model):
    model = tiny_model("rope")
    new = continue_text(model, PROMPT, max_new_tokens=6, sampling=Sampling(0.0, None)).new
    ids = list(PROMPT)
    for token in new:
        logits, _ = model(torch.tensor([ids]))
        assert token == int(logits[0, -1].argmax())
        ids.append(token)


def test_top_k_samples_only_among_the_k_largest():
    logits = torch.tensor([0.0, 5.0, 4.0, -1.0, 3.0])
    generator = torch.Generator().manual_seed(0)
    drawn = {choose(logits, Sampling(2.0, 2), generator) for _ in range(200)}
    assert drawn == {1, 2}
    assert choose(logits, Sampling(0.0, None), generator) == 1


def test_the_learned_model_stops_at_its_table(tiny_model):
    model = tiny_model("learned")  # 64 rows
    result = continue_text(model, PROMPT, max_new_tokens=200, sampling=Sampling(0.0, None))
    assert len(PROMPT) + len(result.new) == 64 and result.stopped_at_wall
    exact = continue_text(model, PROMPT, max_new_tokens=64 - len(PROMPT), sampling=Sampling(0.0, None))
    assert exact.new == result.new and not exact.stopped_at_wall
    with pytest.raises(ValueError, match="64 rows; this sequence has 70 tokens"):
        continue_text(model, list(range(70)), max_new_tokens=5)


def test_other_schemes_write_past_the_training_length(tiny_model):
    model = tiny_model("alibi")  # block_size 64 means nothing to alibi
    assert len(continue_text(model, PROMPT, max_new_tokens=100, sampling=Sampling(0.0, None)).new) == 100


def test_stream_yields_one_token_at_a_time(tiny_model):
    tokens = stream(tiny_model("none"), PROMPT, max_new_tokens=3)
    assert isinstance(next(tokens), int)
    assert len(list(tokens)) == 2


@pytest.mark.parametrize("bad, message", [(dict(temperature=-1.0), "temperature"), (dict(top_k=0), "top_k")])
def test_bad_sampling_is_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        Sampling(**bad)


def test_an_empty_prompt_is_refused(tiny_model):
    with pytest.raises(ValueError, match="the prompt is empty"):
        continue_text(tiny_model("rope"), [], max_new_tokens=3)


@pytest.mark.skipif("rope" not in checkpoints.available(), reason="checkpoints/rope.pt is not shipped")
def test_the_shipped_rope_model_writes_past_128_tokens_the_same_with_and_without_the_cache():
    model, _ = checkpoints.load("rope")
    cached = continue_text(model, PROMPT, max_new_tokens=160, sampling=Sampling(0.0, None))
    recomputed = continue_text(model, PROMPT, max_new_tokens=160, sampling=Sampling(0.0, None), use_cache=False)
    assert cached.new == recomputed.new and len(cached.new) == 160
