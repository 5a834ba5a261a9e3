"""The training timeline's figures on a small made-up timeline: each draws the snapshot it is asked for."""
import numpy as np
import pandas as pd
import pytest

from lpos.analysis import timeline
from lpos.figures.timeline import (attention_figures, bias_figure, loss_curve_figure, position_map_animation,
                                   position_map_figure, repeated_figure)

STEPS, HEADS, T = [0, 10, 100], 2, 6


@pytest.fixture
def line() -> timeline.Timeline:
    rng = np.random.default_rng(0)
    weights = rng.random((len(STEPS), HEADS, T, T)) * np.tril(np.ones((T, T)))  # causal
    return timeline.Timeline(
        steps=STEPS, val_loss=[10.0, 6.0, 4.5], eval_tokens=512, position_kind="table",
        position_rows=rng.normal(size=(len(STEPS), T, 8)).astype(np.float32), probe_words=["dog"], probe_ids=[3],
        neighbours=np.zeros((len(STEPS), 1, 2), dtype=np.int64), neighbour_cos=np.zeros((len(STEPS), 1, 2)),
        probe_tokens=[f"t{i}" for i in range(T)], attention=weights / weights.sum(-1, keepdims=True),
        repeated_word="the", repeated_cos=np.ones((len(STEPS), 2, 2)), bias_queries=[2, 5],
        bias=rng.normal(size=(len(STEPS), HEADS, 2, T)))


@pytest.mark.parametrize("index", [0, 2])
def test_each_figure_draws_its_snapshot(line, index):
    loss = loss_curve_figure(line, index)
    assert list(loss.data[1].x) == [STEPS[index]] and list(loss.data[1].y) == [line.val_loss[index]]
    maps = timeline.cosine_maps(line)
    np.testing.assert_allclose(position_map_figure(maps, line, index).data[0].z, maps[index], rtol=1e-6, atol=1e-7)
    repeated = repeated_figure(timeline.repeated_similarity(line), word=line.repeated_word, index=index)
    assert list(repeated.data[1].x) == [STEPS[index]]
    heads = attention_figures(line, index)
    assert len(heads) == HEADS and all(f.layout.title.text.startswith(f"Step {STEPS[index]}, head") for f in heads)
    bias = bias_figure(timeline.bias_over_distance(line, index), step=STEPS[index], label="T5 bias")
    assert len(bias.data) == HEADS * len(line.bias_queries) and f"Step {STEPS[index]}:" in bias.layout.title.text


def test_the_animation_has_a_frame_per_snapshot(line):
    played = position_map_animation(timeline.cosine_maps(line), line)
    assert [frame.name for frame in played.frames] == [str(s) for s in STEPS]


def test_the_timeline_map_title_keeps_its_space_without_the_line_break():
    from types import SimpleNamespace  # noqa: PLC0415

    from lpos.figures.timeline import position_map_figure  # noqa: PLC0415

    timeline = SimpleNamespace(steps=[0, 1100], position_kind="table")
    title = position_map_figure(np.zeros((2, 4, 4)), timeline, 1).layout.title.text
    assert title.replace("<br>", "").startswith("Step 1100: ") and ":cosine" not in title.replace("<br>", "")
