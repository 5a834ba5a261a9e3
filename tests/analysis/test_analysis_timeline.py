"""lpos.analysis.timeline's readings on the shipped models' training snapshots and on made-up rows."""
from __future__ import annotations

import numpy as np
import pytest

from lpos import checkpoints
from lpos.analysis import timeline

shipped = pytest.mark.skipif(not {"alibi", "learned", "none"} <= set(checkpoints.available()),
                             reason="the shipped checkpoints are not installed")


@shipped
def test_attention_sentence_at_step_0_is_read_from_the_snapshot():
    alibi = timeline.timeline_of(checkpoints.load("alibi")[1])
    said = timeline.attention_sentence(alibi, 0)  # ALiBi's bias is there before any update
    assert said.startswith("At step 0 the heads do not spread their weight evenly")
    assert "3.5, " in said and "puts at most 0.215 on one key" in said  # head 0 looks back 3.5 of 12.5
    learned = timeline.timeline_of(checkpoints.load("learned")[1])
    assert timeline.attention_sentence(learned, 0).startswith("At step 0 every head spreads its weight nearly evenly")
    assert "do not spread" in timeline.attention_sentence(learned, len(learned) - 1)


@shipped
def test_timeline_reading_for_a_model_without_a_table_says_no_band_formed():
    """The map of rope/alibi/none is of what the first block adds: its cosine at distance 1 stays near 0.1
    (0.08 to 0.17 at the last step), so the reading must not suggest a learned table's band."""
    for name, verdict in (("alibi", "only a faint tilt"), ("none", "only a faint tilt")):
        found = timeline.timeline_of(checkpoints.load(name)[1])
        band = timeline.band_over_time(found)
        near = band[band.distance == 1].set_index("step").cosine
        said = timeline.timeline_reading(found)[-1]
        assert f"to {near.iloc[-1]:.2f} at step {found.steps[-1]}" in said and verdict in said, said
        assert near.iloc[-1] < 0.2 and f"between {near.min():.2f} and {near.max():.2f}" in said
    learned = timeline.timeline_of(checkpoints.load("learned")[1])
    assert "no learned table" not in " ".join(timeline.timeline_reading(learned))


def test_first_block_reading_names_a_band_from_step_0():
    """A fixed sinusoid table gives a band before any update: the reading says it was there at step 0."""
    from types import SimpleNamespace  # noqa: PLC0415

    positions = np.arange(32)[:, None] * np.exp(-np.arange(8) / 2)[None, :]
    rows = np.concatenate([np.sin(positions), np.cos(positions)], axis=1)  # (32, 16) smooth in position
    noise = np.random.default_rng(0).standard_normal((32, 16))
    fixed = SimpleNamespace(steps=[0, 10], position_rows=np.stack([rows, rows]))
    assert "already at step 0, before any update" in timeline.first_block_reading(fixed)
    random = SimpleNamespace(steps=[0, 10], position_rows=np.stack([noise, noise]))
    assert "No band" in timeline.first_block_reading(random)


def test_first_block_reading_never_prints_minus_zero():
    """The shipped fire model's neighbouring cosine at step 0 is a hair below zero: the reading says 0.00, never "-0.00"."""
    found = timeline.timeline_of(checkpoints.load("fire")[1])
    said = timeline.first_block_reading(found)
    assert "goes from 0.00 at step 0" in said and "-0.00" not in said


def test_the_loss_sentence_names_the_lowest_point_when_the_run_ends_above_it():
    from types import SimpleNamespace

    from lpos.analysis.timeline import loss_sentence

    run = SimpleNamespace(val_loss=[10.9, 4.38, 4.46], steps=[0, 600, 1100], eval_tokens=8192)
    assert loss_sentence(run) == ("Validation loss falls from 10.90 at step 0 to its lowest, 4.38, at step 600, and "
                                  "ends at 4.46 at step 1100 (on 8,192 held-out tokens).")
    run.val_loss = [10.9, 4.46, 4.381]
    assert loss_sentence(run) == "Validation loss falls from 10.90 at step 0 to 4.38 at step 1100 (on 8,192 held-out tokens)."


@pytest.mark.skipif("t5" not in checkpoints.available(), reason="checkpoints/t5.pt is not shipped")
def test_the_bias_reading_at_the_first_step_gives_its_range_once():
    t5 = timeline.timeline_of(checkpoints.load("t5")[1])  # a learned bias, read at three queries
    first = timeline.bias_reading(t5, 0)
    said = first[first.index("): ") + 3:first.index(". ")]
    assert said.endswith(f"at step {t5.steps[0]}") and said.count(" at step ") == 1, first
    last = timeline.bias_reading(t5, len(t5) - 1)
    assert f"at step {t5.steps[0]}, " in last and f"at step {t5.steps[-1]}." in last
