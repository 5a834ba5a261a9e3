"""Length extrapolation's live sentences (lpos.analysis.lengths): each read against the numbers it is written from."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from lpos import checkpoints
from lpos.analysis import lengths
from lpos.model import GPT, GPTConfig
from lpos.tokenizer import encode

# a story of 140 GPT-2 tokens that stops mid-sentence, with no final full stop
STORY_140 = (
    "Mia had a small red boat that she kept by the pond behind her house. Every morning she would carry it down the "
    "path, set it on the water and watch the wind push it toward the reeds. One day a frog jumped onto the boat and "
    "sat there like a captain. Mia laughed and called him Captain Green. The frog did not seem to mind. He rode the "
    "boat all the way across the pond and back again, and when it bumped into the bank he hopped off and looked at "
    "her as if to ask for another ride. So Mia pushed the boat out again, and again, until the sun was high and her "
    "mother called her in for lunch. After lunch she ran back")


def curve(n: int, *, wall: int | None = None) -> lengths.LossCurve:
    losses = np.linspace(3.0, 5.0, n)
    return lengths.LossCurve(losses=losses, rolling=losses, window=32, text_tokens=(wall or n) + 12, wall=wall)


def test_the_caption_names_the_sliding_line_and_the_wall_together(tiny_model):
    said = lengths.curve_caption(curve(128, wall=128), tiny_model("learned", block_size=128), train_length=32)
    assert "compare the dark line with the dotted one" in said and "a sliding 32-token window" in said
    assert "The red line is where this model's table ends (128 rows)" in said


def test_a_text_one_token_past_the_training_length_is_not_called_short():
    # 129 tokens: longer than the 128 trained on, yet no prediction reads more than 128
    said = lengths.curve_reading(curve(128), train_length=128)
    assert "not longer" not in said and "No prediction here reads more than the training length (128 tokens)" in said
    assert "at least 130 tokens" in said


@pytest.mark.skipif("rope" not in checkpoints.available(), reason="the shipped rope model is not installed")
def test_a_pasted_140_token_story_is_compared_with_a_sliding_window_of_the_training_length():
    ids = encode(STORY_140)
    assert len(ids) == 140 and not STORY_140.endswith(".")
    model, meta = checkpoints.load("rope")
    train_length = lengths.training_length(meta, model)
    loss_curve = lengths.loss_along_text(model, ids)
    sliding = lengths.sliding_losses(model, ids, window=train_length)
    said = lengths.curve_reading(loss_curve, train_length=train_length, baseline=sliding)
    assert f"The {139 - train_length} predictions past the training length" in said
    assert f"each read with only the {train_length - 1} tokens before it" in said
    change = float(re.search(r"changes their loss by \*\*([+-]?[0-9.]+)\*\*", said).group(1))
    expected = np.nanmean(loss_curve.losses[train_length:]) - np.nanmean(sliding[train_length:])
    assert change == pytest.approx(expected, abs=0.006)
    # fresh 128-token windows instead give -0.13 on this text: its tail read with
    # almost no context; read with the 127 tokens before it, the tail costs about nothing more
    assert abs(change) < 0.05


def tiny(position: str = "rope", **extra) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(n_layer=1, n_head=2, n_embd=16, block_size=64, position=position, **extra)).eval()


@pytest.mark.parametrize("position", ["rope", "alibi", "learned"])
def test_sliding_baseline_reads_each_token_with_the_window_before_it(position):
    model = tiny(position)
    ids = list(range(100, 160))
    window = 16
    sliding = lengths.sliding_losses(model, ids, window=window, batch_size=7)
    full = lengths.token_losses(model, torch.tensor(ids)).numpy()
    assert sliding.shape == full.shape
    assert np.allclose(sliding[:window], full[:window], atol=1e-5)
    for j in (window, 31, len(ids) - 2):  # prediction j reads tokens j - 15 .. j at positions 0 .. 15
        alone = lengths.token_losses(model, torch.tensor(ids[j - window + 1 : j + 2]))[-1].item()
        assert sliding[j] == pytest.approx(alone, abs=1e-5)


def test_curve_reading_says_what_the_sliding_baseline_is_and_never_minus_zero():
    losses = np.r_[np.full(128, 3.9), np.full(60, 4.3)].astype(np.float32)
    curve = lengths.LossCurve(losses=losses, rolling=losses, window=32, text_tokens=189, wall=None)
    said = lengths.curve_reading(curve, train_length=128, baseline=losses + np.float32(0.001))
    assert "each read with only the 127 tokens before it (a sliding 128-token window" in said
    assert "fresh" not in said and "-0.00" not in said and "changes their loss by **0.00**" in said


@pytest.mark.skipif("rope" not in checkpoints.available(), reason="the shipped rope model is not installed")
def test_story_past_the_training_length_rope_against_the_sliding_window():
    from lpos.corpus import story  # noqa: PLC0415

    ids = encode(story())[:400]
    model = checkpoints.load("rope")[0]
    curve = lengths.loss_along_text(model, ids)
    sliding = lengths.sliding_losses(model, ids, window=128)
    said = lengths.curve_reading(curve, train_length=128, baseline=sliding)
    change = float(re.search(r"changes their loss by \*\*([+-]?[0-9.]+)\*\*", said).group(1))
    expected = np.nanmean(curve.losses[128:]) - np.nanmean(sliding[128:])
    assert change == pytest.approx(expected, abs=0.006)


def test_a_loss_worse_than_even_guessing_says_the_tokenizer_is_probably_wrong():
    model = tiny("rope", vocab_size=512)
    bad = lengths.LossCurve(losses=np.full(40, 11.5, np.float32), rolling=np.full(40, 11.5, np.float32), window=32,
                            text_tokens=41, wall=None)
    said = lengths.wrong_tokenizer_sentence(bad, model, source="llama2.c model.bin, version 1")
    assert "11.50, is worse than guessing evenly over its 512 tokens (ln(512) ≈ 6.2)" in said
    assert "tok512.model" in said and "tokenizer.model" in said
    good = lengths.LossCurve(losses=np.full(40, 3.0, np.float32), rolling=np.full(40, 3.0, np.float32), window=32,
                             text_tokens=41, wall=None)
    assert lengths.wrong_tokenizer_sentence(good, model) == ""


def test_curve_reading_compares_the_same_tokens_not_two_parts_of_the_text():
    # a text whose later part is harder: the full-context loss climbs, but so do fresh windows
    losses = np.r_[np.full(128, 3.9), np.full(200, 4.3)].astype(np.float32)
    curve = lengths.LossCurve(losses=losses, rolling=losses, window=32, text_tokens=329, wall=None)
    baseline = np.r_[np.full(128, 3.9), np.full(200, 4.35)].astype(np.float32)
    said = lengths.curve_reading(curve, train_length=128, baseline=baseline)
    assert "**4.30**" in said and "**4.35**" in said and "changes their loss by **-0.05**" in said
    assert "+0.40" not in said  # not later tokens against earlier ones
    assert "not a measure of extrapolation" in lengths.curve_reading(curve, train_length=128)


def test_wall_sentence_counts_the_tokens_kept():
    curve = lengths.LossCurve(losses=np.ones(128, np.float32), rolling=np.ones(128, np.float32), window=32,
                              text_tokens=1024, wall=128)
    assert "the last 895 of the 1,024 tokens read here cannot be scored" in lengths.curve_reading(curve, train_length=128)


def test_worst_curve_sentence_says_how_far_the_steepest_curve_is_from_the_unigram_baseline():
    """Sinusoidal's card (+1.01 at 8×) is still 1.86 nats
    better than the unigram baseline. The sentence states that, and says so too when a curve does reach it."""
    def card(*losses):
        return {length: {"loss": loss} if loss is not None else {"loss": None, "note": "n/a: the table has 128 rows"}
                for length, loss in zip((64, 128, 256, 512, 1024), losses)}

    tables = {"sinusoidal": card(3.1878, 3.1428, 3.4894, 3.893, 4.1496), "alibi": card(3.07, 3.0005, 2.97, 2.96, 2.9588),
              "learned": card(3.14, 3.09, None, None, None)}
    said = lengths.worst_curve_sentence(tables, train_length=128, unigram=6.0132)
    assert "**sinusoidal**, is **+1.01** nats at 1024 tokens (8× the training length of 128)" in said
    assert "still **1.86** nats better than the unigram baseline (6.01" in said and "not fallen apart" in said
    assert "**learned** cannot run that far at all" in said
    tables["sinusoidal"][1024]["loss"] = 6.5
    assert "no better than the unigram baseline" in lengths.worst_curve_sentence(tables, train_length=128, unigram=6.0)
    flat = {"alibi": tables["alibi"]}
    assert lengths.worst_curve_sentence(flat, train_length=128, unigram=6.0).startswith("No curve climbs")


def test_the_sliding_window_names_the_table_rows_a_randomized_table_reads(tiny_model):
    randomized = tiny_model("learned", block_size=256, random_positions=True)
    first, last = lengths.window_rows(randomized, 32)
    read = randomized.scheme.input_positions(randomized.config, 32, 0)
    assert (first, last) == (int(read[0]), int(read[-1])) and last > 31
    assert lengths.window_rows(tiny_model("learned"), 32) is None and lengths.window_rows(tiny_model("rope"), 32) is None
    losses = np.full(40, 4.0, dtype=np.float32)
    curve = lengths.LossCurve(losses=losses, rolling=losses, window=32, text_tokens=41, wall=None)
    said = lengths.curve_reading(curve, train_length=32, baseline=losses, rows=(first, last))
    assert f"its tokens at table rows {first:,} to {last:,}: this table is read at random positions" in said
    assert "no position past" not in said
    caption = lengths.curve_caption(curve, randomized, train_length=32)
    assert f"table rows {first:,} to {last:,}" in caption and "no position past" not in caption


def test_rotation_variants_are_read_against_the_model_that_rotates_everything():
    from lpos.analysis.lengths import rotation_variants_reading

    tables = {"rope": {128: {"loss": 2.9}, 1024: {"loss": 3.5}}, "p-rope": {128: {"loss": 2.95}, 1024: {"loss": 3.2}},
              "rnope": {128: {"loss": 2.905}, 1024: {"loss": 3.6}}, "alibi": {128: {"loss": 2.8}, 1024: {"loss": 2.8}}}
    said = rotation_variants_reading(tables, train_length=128)
    assert said.startswith("Against **RoPE** (2.900 at 128, 3.500 at 1,024)")
    assert "**p-RoPE**" in said and "trails it by 0.050" in said and "0.300 below it" in said and "Barbero" in said
    assert "**RNoPE**" in said and "matches it (within 0.01)" in said and "0.100 above it" in said
    assert "ALiBi" not in said  # only schemes that rotate are compared with RoPE
    assert rotation_variants_reading({"alibi": tables["alibi"]}, train_length=128) == ""
