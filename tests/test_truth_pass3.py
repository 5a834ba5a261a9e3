"""Issue 37, the third truth pass: each sentence tested on the case where its old wording was wrong."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from lpos import checkpoints
from lpos.analysis import lengths
from lpos.model import GPT, GPTConfig
from lpos.tokenizer import encode


def tiny(position: str = "rope", **extra) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(n_layer=1, n_head=2, n_embd=16, block_size=64, position=position, **extra)).eval()


# --- False 1: Length extrapolation's baseline ----------------------------------------------------

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


# --- False 2, Misleading 5, Weak (width 1,024): the Sinusoids captions ---------------------------

def test_table_caption_at_base_2_says_the_right_columns_go_round():
    from lpos.analysis.sinusoids import table_sentence  # noqa: PLC0415

    said = table_sentence(128, 128, base=2.0)
    assert "thousands" not in said and "barely" not in said
    assert "every 12.4, so from position 0 to 127 it goes round 10.2 times" in said
    assert "barely changes" in table_sentence(128, 128, base=10000.0)
    assert "mean of 16 rows by 4 columns" in table_sentence(4096, 1024) and "mean of" not in table_sentence(128, 128)
    assert "mean of 4 columns" in table_sentence(128, 1024)
    assert table_sentence(1, 8).startswith("One position, so one row.")


def test_rope_sentence_says_the_ladder_holds_at_the_base_set_and_names_the_model_base():
    from lpos.analysis.sinusoids import rope_sentence  # noqa: PLC0415

    said = rope_sentence(128, 32, base=2.0, model_base=10000.0)
    assert "at the base set here, those are the wavelengths of every 4th of these 64 pairs" in said
    assert "this model's own RoPE base is 10,000, not the 2 set here" in said
    assert "own RoPE base" not in rope_sentence(128, 32, base=10000.0, model_base=10000.0)
    assert "own RoPE base" not in rope_sentence(128, 32, base=2.0)


def test_sinusoids_page_at_base_2_says_what_the_table_does():
    from conftest import app_test  # noqa: PLC0415

    at = app_test(page="pages/sinusoids.py", scheme="rope", model="untrained")
    at.number_input(key="sin_base").set_value(2.0).run()
    assert not at.exception
    captions = " ".join(c.value for c in at.caption)
    assert "thousands of positions" not in captions and "goes round 10.2 times" in captions
    assert "own RoPE base is 10,000, not the 2 set here" in captions


# --- False 3 and 4: the Lesson's step 8 and its caption --------------------------------------------

def _loaded(key: str):
    from lpos.ui.models import UNTRAINED, LoadedModel, label, load_offered, untrained  # noqa: PLC0415

    if key == UNTRAINED:
        return LoadedModel(UNTRAINED, "untrained", untrained("learned"), {})
    model, meta = load_offered(key)
    return LoadedModel(key, label(key), model, meta)


@pytest.mark.skipif("learned-32" not in checkpoints.available(), reason="learned-32 is not installed")
def test_step_8_says_which_rows_never_trained_and_how_alike_the_rows_are():
    from lpos.ui import lesson  # noqa: PLC0415

    model = _loaded("learned-32")
    _, said = lesson.learned_band(model, model, [])
    assert "rows 32–127 never received a gradient" in said and "mix 32 trained rows with 96 untrained ones" in said
    near = float(re.search(r"mean cosine (-?[0-9.]+)", said).group(1))
    far = float(re.search(r"rows 64 apart ([+-][0-9.]+)", said).group(1))
    assert f"mean cosine {near:.2f} ({lesson._alike(near)})" in said and f"{far:+.2f} ({lesson._alike(far)})" in said
    assert lesson._alike(0.22) == "a little alike" and lesson._alike(0.02) == "about unrelated"
    assert "pointing away" not in lesson.STEPS[7].notice  # the fixed claim the numbers did not bear out


def test_step_8_on_the_untrained_model_says_both_maps_are_random():
    from lpos.ui import lesson  # noqa: PLC0415
    from lpos.ui.models import UNTRAINED  # noqa: PLC0415

    model = _loaded(UNTRAINED)
    assert not model.trained
    _, said = lesson.learned_band(model, model, [])
    assert said.startswith("This model is untrained") and "both maps are random rows" in said
    assert "trained table" not in lesson.STEPS[7].notice


def test_lesson_caption_and_notes_say_when_a_step_draws_the_presets():
    from lpos.ui import lesson  # noqa: PLC0415
    from lpos.ui.models import UNTRAINED  # noqa: PLC0415

    caption = lesson.lesson_caption()
    assert lesson.SHUFFLE_STEPS == (2, 10)
    assert "Steps 2 and 10 set it against a shuffle of itself" in caption and "“The man bit the dog.”" in caption
    model = _loaded(UNTRAINED)
    assert "sidebar sentence is empty" in lesson.stand_in_note(1, [], model)
    assert "fewer than three tokens, so this step sets" in lesson.stand_in_note(2, encode("Hi there"), model)
    assert "nothing to reorder" in lesson.stand_in_note(10, encode(" dog dog dog."), model)
    assert lesson.stand_in_note(2, encode("The cat sat on the mat."), model) == ""
    assert lesson.stand_in_note(3, encode("Hi there"), model) == "" and lesson.stand_in_note(4, [], model) == ""


# --- Misleading 8: PCA at 4 positions -------------------------------------------------------------

def test_pca_sentence_at_four_rows_says_the_share_is_forced():
    from lpos.analysis import similarity  # noqa: PLC0415
    from lpos.ui.similarity import pca_sentence  # noqa: PLC0415

    rows = np.random.default_rng(0).normal(size=(4, 16)).astype(np.float32)
    said = pca_sentence(rows, similarity.pca(rows, components=3), scheme="learned", trained=True, limit=None)
    assert "span at most 3 directions" in said and "by construction" in said and "explain 100%" not in said
    many = np.random.default_rng(0).normal(size=(20, 16)).astype(np.float32)
    assert "explain" in pca_sentence(many, similarity.pca(many, components=3), scheme="learned", trained=True, limit=None)


# --- Misleading 1 and 7: Stretching ----------------------------------------------------------------

def test_profile_reading_gives_the_even_spread_and_whether_the_logit_rises():
    import pandas as pd  # noqa: PLC0415

    from lpos.analysis.stretch import profile_reading  # noqa: PLC0415

    positions = np.arange(256)
    frame = pd.DataFrame({"layer": 0, "position": positions, "max_logit": np.where(positions < 128, 4.80, 4.82),
                          "entropy": np.log(positions + 1.0) - 0.9})
    said = profile_reading({"none": frame}, layer=0, train_length=128)
    even_in, even_past = np.log(positions[:128] + 1.0).mean(), np.log(positions[128:] + 1.0).mean()
    assert f"against {even_in:.2f} → {even_past:.2f} for an even spread" in said
    assert "(it hardly moves)" in said and said.count("0.90 nats more focused than even") == 2


def test_shift_sentence_says_a_table_cannot_hold_a_long_text_even_at_offset_0():
    from lpos.analysis.stretch import shift_sentence  # noqa: PLC0415

    said = shift_sentence([("learned", None), ("rope", 1e-6)], tokens=140, offset=1, table_rows={"learned": 128, "rope": None})
    assert "learned cannot hold your sentence even at offset 0: learned's table has 128 rows" in said
    assert "shifted this far" not in said
    short = shift_sentence([("learned", None)], tokens=100, offset=64, table_rows={"learned": 128})
    assert "learned cannot be shifted this far" in short
