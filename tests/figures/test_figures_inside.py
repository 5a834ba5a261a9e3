"""Figure builders of the Inside the model page, on small hand-made results (no browser)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from lpos.analysis.heads import HeadPortraits, behaviour
from lpos.analysis.probes import stream_names
from lpos.analysis.streaming import SinkTest, sink_summary
from lpos.figures.inside import (distance_profile_figure, head_grid_figure, head_layer_figure, probe_figure,
                                 sink_gain_figure, streaming_figure)


def probe_frame(absolute, relative) -> pd.DataFrame:
    names = stream_names(len(absolute) - 1)
    return pd.DataFrame([{"stream": i, "stream name": names[i], "target": target, "r2": value, "mae": 3.0,
                          "penalty": 0.01, "fitted": 100, "scored": 30, "window": 128}
                         for target, values in (("absolute position", absolute), ("tokens since sentence end", relative))
                         for i, value in enumerate(values)])


def test_probe_figure_draws_a_line_per_model_per_target_and_panel():
    panels = {"trained": {"rope": probe_frame([0.0, 0.2, 0.4], [0.1, 0.3, 0.5]),
                          "rope · mine.pt (your upload)": probe_frame([0.0, 0.1, 0.1], [0.1, 0.1, 0.2])},
              "untrained": {"rope": probe_frame([0.0, 0.0, 0.0], [0.0, 0.0, 0.1])}}
    fig = probe_figure(panels)
    assert len(fig.data) == 6  # 3 models × 2 targets
    first = fig.data[0]
    assert list(first.x) == ["input", "after block 1", "after block 2"] and list(first.y) == [0.0, 0.2, 0.4]
    upload = [t for t in fig.data if t.name.startswith("rope · mine")]
    assert upload[0].line.dash == "dash" and fig.data[0].line.dash is None
    assert sum(t.showlegend for t in fig.data if t.name == "rope") == 1  # one legend entry per name
    assert "mean error" in first.hovertemplate


def portraits(first_share: float) -> HeadPortraits:
    rows = [{"layer": layer, "head": head, "mean distance": 10.0 + head, "previous token share": 0.9 if head == 0 else 0.1,
             "first token share": first_share if head == 1 else 0.02, "self share": 0.05}
            for layer in (1, 2) for head in range(3)]
    table = pd.DataFrame(rows)
    table["behaviour"] = table.apply(behaviour, axis=1, window=128)
    return HeadPortraits(table=table, profiles=np.full((2, 3, 129), 0.01), queries=127, window=128)


def test_head_grid_names_each_cell_by_its_behaviour():
    fig = head_grid_figure({"rope": portraits(0.7), "alibi": portraits(0.1)})
    heatmaps = [t for t in fig.data if t.type == "heatmap"]
    assert len(heatmaps) == 2
    assert heatmaps[0].text[0][0] == "0.90" and heatmaps[0].text[0][1] == "0.70"
    assert heatmaps[1].text[0][1] == "d 11"
    assert list(heatmaps[0].z[0]) == [1, 0, 4]  # previous token, sink, broad (BEHAVIOURS order)
    assert {t.name for t in fig.data if t.type == "scatter"} == {"first token (sink)", "previous token", "itself",
                                                                   "local", "broad"}


def test_a_deep_models_grid_shows_one_layer_a_row_per_model():
    fig = head_layer_figure({"rope": portraits(0.7), "alibi": portraits(0.1)}, layer=2)
    grid = next(t for t in fig.data if t.type == "heatmap")
    assert list(grid.y) == ["rope", "alibi"] and list(grid.x) == ["h1", "h2", "h3"]
    assert list(grid.z[0]) == [1, 0, 4] and grid.text[1][1] == "d 11"
    assert "Layer 2" in fig.layout.title.text


def test_distance_profile_has_a_line_per_model_and_the_even_spread():
    profile = np.concatenate([[0.2, 0.5], np.full(127, 0.005)])
    fig = distance_profile_figure({"alibi": profile, "none": profile / 2}, layer=1, head=0, window=128)
    assert [t.name for t in fig.data] == ["alibi", "none", "even spread over the prefix"]
    even = fig.data[-1].y
    assert even[1] == np.mean(1 / np.arange(2, 129))  # distance 1: every query 1..127
    assert even[127] == 1 / 128  # only query 127 reaches 127 back
    assert fig.layout.yaxis.type == "log"


def test_streaming_figures_draw_both_streams_and_the_gain_per_scheme():
    alone = np.linspace(5, 4, 200)
    test = SinkTest(window=64, sink=4, alone=alone, with_sink=alone - 0.1)
    fig = streaming_figure(test, label="rope · rope (trained, shipped)")
    named = [t.name for t in fig.data if t.showlegend is not False]
    assert named == ["window of 64 alone", "first 4 kept + window of 64"]
    bars = sink_gain_figure({"rope": sink_summary(test), "none": sink_summary(SinkTest(64, 4, alone, alone))}, sink=4)
    assert list(bars.data[0].x) == ["rope", "none"]
    np.testing.assert_allclose(bars.data[0].y, [0.1, 0.0], atol=1e-12)
