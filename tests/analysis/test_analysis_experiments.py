"""The shuffle experiment and the length evaluation, checked with numbers."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lpos.analysis.lengths import (curve_reading, length_losses, length_reading, loss_along_text, loss_table,
                                   token_losses, training_length)
from lpos.analysis.shuffle import (ORDER_BLIND_TOLERANCE, can_shuffle, moved_from, order_blind_sentence, predictions_table,
                                   shuffle_earlier, shuffle_experiment, shuffle_table, top1_table)
from lpos.corpus import story
from lpos.positions import SCHEMES
from lpos.tokenizer import encode

# Untrained, the first layer of these cannot tell orders apart: none has no positions, cope's count tables
# start at 0 (it adds nothing until trained). Fire's bias function starts near 0, not at 0 (its MLP at
# N(0, 0.02)): its change stays under ORDER_BLIND_TOLERANCE, yet float64 shows it is no rounding.
BLIND_UNTRAINED = ("none", "cope")
BARELY_MOVED_UNTRAINED = ("fire",)
SENTENCES = ["The dog bit the man.", "Once upon a time there was a little girl who loved the sea",
             "a b c d e f g h"]
SEEDS = [0, 1, 7]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_only_schemes_without_position_information_yet_are_order_blind_at_layer_one(tiny_model, scheme):
    # head size 32: an untrained rope model's scores are tiny, and narrower heads move even less
    model = tiny_model(scheme, n_layer=1, n_head=2, n_embd=64)
    for sentence in SENTENCES:
        for seed in SEEDS:
            result = shuffle_experiment(model, encode(sentence), seed=seed)
            assert result.shuffled != result.original
            if scheme in ("none", "cope"):  # nothing depends on order: float rounding only
                assert result.attention_change < 1e-7, (sentence, seed)
            if scheme in BLIND_UNTRAINED:
                assert result.exact_change < 1e-15 and result.order_blind, (sentence, seed)
            elif scheme in BARELY_MOVED_UNTRAINED:
                assert result.attention_change < ORDER_BLIND_TOLERANCE and result.exact_change > 1e-9, (sentence, seed)
                assert not result.order_blind
                assert "small, yet more than float rounding" in order_blind_sentence(result)
            else:
                assert result.attention_change > ORDER_BLIND_TOLERANCE, (sentence, seed)
                assert not result.order_blind
            if scheme == "fire":  # near zero, not zero: the order reaches it
                assert result.attention_change > 1e-8, (sentence, seed)


@pytest.mark.parametrize("sentence", SENTENCES)
def test_shuffle_is_deterministic_keeps_the_last_token_and_permutes(sentence):
    ids = encode(sentence)
    shuffled = shuffle_earlier(ids, seed=3)
    assert shuffled == shuffle_earlier(ids, seed=3)
    assert shuffled != ids
    assert shuffled[-1] == ids[-1]
    assert sorted(shuffled) == sorted(ids)
    assert len({tuple(shuffle_earlier(ids, seed=s)) for s in range(10)}) > 1


def test_nothing_to_shuffle_when_earlier_tokens_are_all_equal():
    ids = encode(" the the the.")
    assert not can_shuffle(ids)
    assert shuffle_earlier(ids, seed=0) == ids
    assert not can_shuffle(encode("Hi."))
    assert can_shuffle(encode("The dog."))


def test_moved_from_maps_each_shuffled_position_to_its_origin():
    original, shuffled = [5, 6, 7, 5, 9], [7, 5, 5, 6, 9]
    origin = moved_from(original, shuffled)
    assert origin == [2, 0, 3, 1, 4]
    assert [original[i] for i in origin] == shuffled
    with pytest.raises(ValueError):
        moved_from(original, [5, 6, 7, 8, 9])


def test_without_positions_each_weight_travels_with_its_token(tiny_model):
    ids = encode("The man bit the dog.")
    none = shuffle_experiment(tiny_model("none"), ids, seed=2)
    origin = moved_from(none.original, none.shuffled)
    torch.testing.assert_close(none.weights_after, none.weights_before[:, origin], atol=1e-6, rtol=1e-5)
    learned = shuffle_experiment(tiny_model("learned"), ids, seed=2)
    assert np.abs(learned.weights_after - learned.weights_before[:, origin]).max() > 1e-4
    np.testing.assert_allclose(none.weights_before.sum(axis=1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_full_model_sees_order_from_layer_two_even_without_positions(tiny_model, scheme):
    result = shuffle_experiment(tiny_model(scheme, n_layer=2), encode("The dog bit the man."), seed=0)
    assert result.logits_change > 1e-5  # float error is ~1e-8


def test_a_one_layer_model_without_positions_is_blind_end_to_end(tiny_model):
    result = shuffle_experiment(tiny_model("none", n_layer=1), encode("The dog bit the man."), seed=0)
    assert result.logits_change < 1e-6
    assert predictions_table([result])["same top-1"].tolist() == [True]
    assert result.distribution_change < 1e-6


def test_distribution_change_is_the_total_variation(tiny_model):
    model = tiny_model("none", n_layer=2)
    ids = encode("The dog bit the man.")
    result = shuffle_experiment(model, ids, seed=0)
    with torch.no_grad():
        before = torch.softmax(model(torch.tensor([ids]))[0][0, -1].double(), -1)
        after = torch.softmax(model(torch.tensor([result.shuffled]))[0][0, -1].double(), -1)
    assert result.distribution_change == pytest.approx(float((before - after).abs().sum() / 2), rel=1e-4, abs=1e-7)
    assert 0 < result.distribution_change <= 1


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_batched_last_row_equals_each_order_run_alone_and_leaves_the_model_as_it_was(tiny_model, scheme):
    # one batch of both orders, the head on the last row only: the same logits as two whole forward passes
    model = tiny_model(scheme, n_layer=2)
    ids = encode("Once upon a time there was a little girl who loved the sea")
    before_state = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    result = shuffle_experiment(model, ids, seed=5)
    with torch.no_grad():
        alone = [model(torch.tensor([order]))[0][0, -1] for order in (ids, result.shuffled)]
    assert result.logits_change == pytest.approx(float((alone[1] - alone[0]).abs().max()), rel=1e-4, abs=1e-6)
    for top, logits in ((result.top_before, alone[0]), (result.top_after, alone[1])):
        probabilities = torch.softmax(logits, -1)
        assert top["probability"].tolist() == pytest.approx(probabilities.topk(5).values.tolist(), rel=1e-5)
    # the float64 copy of block 1 is a copy: the model keeps its float32 weights and shared parts
    assert all(torch.equal(before_state[name], tensor) and tensor.dtype == before_state[name].dtype
               for name, tensor in model.state_dict().items())


def test_an_explicit_shuffle_must_keep_the_last_token(tiny_model):
    model = tiny_model("none")
    dog, man = encode("The dog bit the man."), encode("The man bit the dog.")
    assert shuffle_experiment(model, dog, shuffled=man).attention_change < ORDER_BLIND_TOLERANCE
    with pytest.raises(ValueError):
        shuffle_experiment(model, encode("The dog bit the man"), shuffled=encode("The man bit the dog"))
    with pytest.raises(ValueError):
        shuffle_experiment(model, encode("Hi"))


def test_tables_have_one_row_per_scheme(tiny_model):
    ids = encode("The dog bit the man.")
    results = [shuffle_experiment(tiny_model(s), ids, seed=1) for s in SCHEMES]
    table = shuffle_table(results, labels=[f"model {s}" for s in SCHEMES])
    assert table["scheme"].tolist() == list(SCHEMES)
    assert table["model"].tolist() == [f"model {s}" for s in SCHEMES]
    assert table["order-blind at layer 1"].tolist() == [s in BLIND_UNTRAINED for s in SCHEMES]
    predictions = predictions_table(results)
    assert len(predictions) == len(SCHEMES)
    assert all(len(cell.split(" · ")) == 5 for cell in predictions["top-5 next tokens, original order"])
    short = top1_table(results)  # the page's table: each model's first choice, the top 5 folded away
    for column, top5 in (("next token, original order", "top-5 next tokens, original order"),
                         ("next token, shuffled", "top-5 next tokens, shuffled")):
        assert short[column].tolist() == [cell.split(" · ")[0] for cell in predictions[top5]]
    assert short["same top-1"].tolist() == ["yes" if r.same_top1 else "no" for r in results]
    assert short["distribution moved (total variation)"].tolist() == [f"{r.distribution_change:.3f}" for r in results]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_token_losses_match_cross_entropy(tiny_model, scheme):
    model = tiny_model(scheme)
    ids = torch.tensor(encode("The cat sat on the mat and looked at the dog."))
    losses = token_losses(model, ids)
    assert losses.shape == (len(ids) - 1,)
    logits, _ = model(ids[None, :-1])
    torch.testing.assert_close(losses, F.cross_entropy(logits[0], ids[1:], reduction="none"))


def test_token_losses_are_nan_for_targets_outside_the_vocabulary(tiny_model):
    model = tiny_model("rope")
    ids = torch.tensor(encode("The cat sat on the mat."))
    model.output_vocab = torch.tensor(sorted(set(ids.tolist()) - {ids[3].item()}))
    losses = token_losses(model, ids)
    assert torch.isnan(losses[2]) and torch.isnan(losses).sum() == 1


def test_loss_along_text_stops_a_learned_table_at_its_wall(tiny_model):
    ids = encode(story())[:200]
    learned = loss_along_text(tiny_model("learned", block_size=64), ids, window=8)
    assert learned.wall == 64 and len(learned.losses) == 64 and learned.text_tokens == 200
    alibi = loss_along_text(tiny_model("alibi", block_size=64), ids, window=8)
    assert alibi.wall is None and len(alibi.losses) == 199
    assert alibi.rolling[0] == pytest.approx(alibi.losses[0])
    assert alibi.rolling[50] == pytest.approx(np.nanmean(alibi.losses[43:51]), rel=1e-5)
    exact = loss_along_text(tiny_model("learned", block_size=64), ids[:65])
    assert exact.wall is None and len(exact.losses) == 64
    with pytest.raises(ValueError):
        loss_along_text(tiny_model("none"), ids[:1])


def test_curve_reading_reports_measured_means(tiny_model):
    curve = loss_along_text(tiny_model("sinusoidal", block_size=64), encode(story())[:150])
    reading = curve_reading(curve, train_length=64)
    assert f"{np.nanmean(curve.losses[:64]):.2f}" in reading
    assert f"{np.nanmean(curve.losses[64:]):.2f}" in reading
    wall = curve_reading(loss_along_text(tiny_model("learned", block_size=64), encode(story())[:150]), train_length=64)
    assert "64 rows" in wall and "the last 85 of the 150 tokens" in wall


def test_a_text_the_softmax_cannot_predict_is_not_said_to_be_outside_the_vocabulary(tiny_model):
    """The vocabulary is the tokenizer's; what a trained model cannot predict is a token its softmax leaves out."""
    model = tiny_model("rope")
    ids = encode("The cat sat on the mat.")
    model.output_vocab = torch.tensor([50000])  # a softmax over one token none of these targets is
    reading = curve_reading(loss_along_text(model, ids), train_length=64)
    assert "softmax covers only the tokens it saw in training" in reading and "vocabulary" not in reading
    assert length_losses(model, torch.tensor(ids), lengths=(4,))[4] == {
        "loss": None, "note": "n/a: no target among the tokens its softmax covers"}


def test_an_untrained_model_just_above_an_even_guess_is_not_said_to_read_another_tokenizer(tiny_model):
    """Random logits put a model a little above ln(outputs) (half their variance): no doubt about its tokenizer."""
    from lpos.analysis.lengths import WRONG_TOKENIZER_MARGIN, wrong_tokenizer_sentence

    model = tiny_model("rope", n_embd=256, vocab_size=512, block_size=256)
    curve = loss_along_text(model, torch.randint(0, 512, (257,), generator=torch.Generator().manual_seed(0)).tolist())
    above = float(np.nanmean(curve.losses)) - math.log(512)
    assert 0 < above < WRONG_TOKENIZER_MARGIN and wrong_tokenizer_sentence(curve, model) == ""


def test_length_losses_is_not_applicable_past_a_learned_table(tiny_model):
    stream = torch.tensor(encode(story())[:300])
    learned = length_losses(tiny_model("learned", block_size=64), stream, lengths=(32, 64, 128))
    assert learned[32]["loss"] is not None and learned[64]["loss"] is not None
    assert learned[128] == {"loss": None, "note": "n/a: the table has 64 rows"}
    rope = length_losses(tiny_model("rope", block_size=64), stream, lengths=(128, 4096))
    assert rope[128]["loss"] == pytest.approx(math.log(50257), abs=0.3)
    assert rope[4096]["loss"] is None and "shorter" in rope[4096]["note"]


def test_loss_table_sorts_integer_lengths_and_training_length_reads_meta(tiny_model):
    table = loss_table({"loss_by_length": {"256": {"loss": 4.5}, "64": {"loss": 4.0}}})
    assert list(table) == [64, 256]
    assert loss_table({}) == {}
    model = tiny_model("rope", block_size=64)
    assert training_length({}, model) == 64
    assert training_length({"train_args": {"block_size": 128}}, model) == 128


def _card(losses):
    return {length: ({"loss": loss} if loss is not None else {"loss": None, "note": "n/a: the table has 128 rows"})
            for length, loss in zip((64, 128, 256, 512, 1024), losses)}


def test_length_reading_is_written_from_the_numbers():
    tables = {"learned": _card([4.2, 4.1, None, None, None]), "sinusoidal": _card([4.3, 4.2, 5.0, 6.0, 7.25]),
              "alibi": _card([4.15, 4.05, 4.0, 4.0, 4.01])}
    reading = length_reading(tables, train_length=128)
    assert "**4.050** (alibi) to **4.200** (sinusoidal)" in reading
    assert "7.250, +3.050 against 128" in reading and "4.010, -0.040 against 128" in reading
    assert "**learned** has no number past its wall: the table has 128 rows" in reading
    assert "Here **alibi** rises least from 128 to 1024 tokens (-0.040) and **sinusoidal** most (+3.050)" in reading
    assert "It also has the lowest loss at 1024 tokens." in reading
    tables["t5"] = _card([3.5, 3.4, 3.5, 3.7, 3.9])  # rises more than alibi, yet ends lower
    assert ("The lowest loss at 1024 tokens is **t5**'s (3.900, against 4.010): it starts lower, and rising least "
            "is not ending lowest.") in length_reading(tables, train_length=128)
    del tables["t5"]
    assert "echoes Press et al. (2021)" in reading
    tables["alibi"] = _card([4.15, 4.05, 4.5, 9.0, 9.5])
    assert "ranks differently" in length_reading(tables, train_length=128)
    assert "No model card" in length_reading({}, train_length=128)


def test_the_story_is_longer_than_the_longest_evaluation_length():
    assert len(encode(story())) > 1024


def test_shuffled_text_is_also_shown_token_by_token():
    from lpos.analysis.shuffle import token_by_token  # noqa: PLC0415

    original = encode("The dog bit the man.")  # The, ␣dog, ␣bit, ␣the, ␣man, .
    shuffled = [original[i] for i in (2, 3, 4, 0, 1, 5)]  # decoded: " bit the manThe dog."
    assert token_by_token(original, shuffled) == "␣bit │ ␣the │ ␣man │ The │ ␣dog │ ."
    moved = encode("猫 ヌ.")
    assert "‹8C of 猫›" in token_by_token(moved, [moved[1], moved[0], *moved[2:]])


def test_top5_cells_quote_each_token():
    import pandas as pd  # noqa: PLC0415

    from lpos.analysis.shuffle import _ranked  # noqa: PLC0415

    top = pd.DataFrame({"token": ["␣and", ".", ","], "probability": [0.203, 0.13, 0.097]})
    assert _ranked(top) == "“␣and” 20.3% · “.” 13.0% · “,” 9.7%"


@pytest.mark.parametrize("text", ["The dog bit the man", "The dog bit the man."])
def test_order_blind_sentence_names_the_pair_drawn_with_its_shared_last_token(tiny_model, text):
    model = tiny_model("none")
    ids = encode(text)
    result = shuffle_experiment(model, ids, shuffled=shuffle_earlier(ids, seed=0))
    said = order_blind_sentence(result)
    last = "␣man" if text.endswith("man") else "."
    assert f"(both end in “{last}”)" in said and f"“{text}”" in said
    assert result.order_blind and "cannot tell the two orders apart" in said
    moved = float(re.search(r"moved by at most ([0-9.e+-]+)", said).group(1))
    assert moved == pytest.approx(result.attention_change, rel=0.05) and moved < 1e-5
    # a pair that ends in different tokens is told apart by the first layer: the drawn pair keeps the last token
    swapped = shuffle_experiment(model, encode("The dog bit the man"), shuffled=None)
    assert swapped.shuffled[-1] == encode("The dog bit the man")[-1]


def test_order_blind_sentence_says_so_when_the_first_layer_moves(tiny_model):
    model = tiny_model("learned")
    ids = encode("The dog bit the man.")
    result = shuffle_experiment(model, ids)
    assert not result.order_blind and "tells the two orders apart" in order_blind_sentence(result)
