"""Generation with a KV cache: deterministic for a seed, stops at the budget (or the learned
table), greedy at temperature 0, and token for token what a full recompute writes."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lpos import checkpoints
from lpos.analysis.generate import Race, Sampling, advance, choose, continue_text, start_writing, stream
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


def multinomial_choice(logits: torch.Tensor, sampling: Sampling, generator: torch.Generator) -> int:
    """The reference: softmax of logits / temperature over the whole vocabulary, cut to the top k, then
    torch.multinomial."""
    scaled = logits.double() / sampling.temperature
    if sampling.top_k is not None and sampling.top_k < scaled.numel():
        kth = torch.topk(scaled, sampling.top_k).values[-1]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    return int(torch.multinomial(F.softmax(scaled, dim=-1), 1, generator=generator))


@pytest.mark.parametrize("sampling", [Sampling(0.8, 40, 0), Sampling(1.3, None, 5), Sampling(0.5, 3, 9)])
def test_the_race_draws_what_torch_multinomial_draws_for_a_seed(sampling):
    logits = torch.randn(300, 2000, generator=torch.Generator().manual_seed(1)) * 3
    logits[:, ::3] = float("-inf")  # tokens outside the model's vocabulary
    ours, reference = torch.Generator().manual_seed(sampling.seed), torch.Generator().manual_seed(sampling.seed)
    assert [choose(row, sampling, ours) for row in logits] == [multinomial_choice(row, sampling, reference) for row in logits]


def test_models_writing_in_step_share_their_seed_s_race_and_write_what_each_writes_alone(tiny_model):
    models = {scheme: tiny_model(scheme, block_size=128) for scheme in ("rope", "learned", "alibi")}
    sampling = Sampling(1.0, 50, seed=3)
    writing = start_writing(models, PROMPT, tokens=30, sampling=sampling, lengths={}, settings=())
    advance(writing, seconds=0.0)
    assert all(len(new) == 1 for new in writing.written.values())  # seconds=0: one round, every model in step
    advance(writing, seconds=float("inf"))
    assert writing.state == "done"
    for scheme, model in models.items():
        assert writing.written[scheme] == list(stream(model, PROMPT, max_new_tokens=30, sampling=sampling))


def test_a_race_is_read_in_step():
    race = Race(0, 10)
    assert race.at(0) is race.at(0) and race.at(1).shape == (10,)
    with pytest.raises(ValueError, match="in step"):
        race.at(0)


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


def test_each_writer_s_note_says_how_it_writes_and_how_far(tiny_model):
    from lpos.analysis.generate import writer_note  # noqa: PLC0415

    cached = writer_note(tiny_model("rope"), prompt_length=10, tokens=16, trained_at=64)
    assert cached == "one position's forward per new token, the earlier keys and values kept in a cache"
    randomized = tiny_model("learned", block_size=256, random_positions=256)
    assert not randomized.caches_positions
    note = writer_note(randomized, prompt_length=10, tokens=100, trained_at=64)
    assert note.startswith("reads its whole text again for each new token") and "cache" in note
    assert note.endswith("; writes past its training length (64 tokens)")
    table = writer_note(tiny_model("learned"), prompt_length=10, tokens=100, trained_at=64)
    assert table.endswith("; stops at its 64-row table: 54 new tokens at most")
