"""The figures of Length extrapolation: the loss along the text, its sliding-window baseline drawn and named, and
the loss at each position with the rows one model never trained marked."""
from __future__ import annotations

import numpy as np

from lpos.analysis.lengths import LossCurve
from lpos.figures.coverage import position_loss_figure
from lpos.figures.lengths import token_loss_figure


def test_the_sliding_baseline_is_drawn_and_named_before_a_table_wall():
    # learned-32's case: trained on 32-token windows, its table ends at 128 rows, and a
    # 140-token text is scored to the wall; the baseline is drawn whenever the caption compares with it
    losses = np.linspace(3.0, 5.0, 128)
    curve = LossCurve(losses=losses, rolling=losses, window=1, text_tokens=140, wall=128)
    baseline = np.full(139, 4.0)
    fig = token_loss_figure(curve, tokens=["t"] * 128, train_length=32, label="learned-32", baseline=baseline)
    sliding = [trace for trace in fig.data if "sliding 32-token window" in trace.name]
    assert len(sliding) == 1 and "only the 31 before it" in sliding[0].name
    assert list(sliding[0].x) == list(range(32, 128))  # from the training length to the last scored token
    np.testing.assert_allclose(sliding[0].y, 4.0)
    assert sorted(s.x0 for s in fig.layout.shapes) == [32, 128]  # the training length and the wall


def test_no_baseline_is_drawn_when_the_curve_stops_at_the_training_length():
    losses = np.linspace(3.0, 5.0, 128)  # learned: 128 rows, trained on 128, a long text stops at the wall
    curve = LossCurve(losses=losses, rolling=losses, window=1, text_tokens=140, wall=128)
    fig = token_loss_figure(curve, tokens=["t"] * 128, train_length=128, label="learned", baseline=np.full(139, 4.0))
    assert [trace.name for trace in fig.data] == ["loss of each token", "mean of the last 1"]


def test_the_loss_by_position_draws_a_line_per_model_and_marks_the_untrained_rows():
    losses = {"learned-32": np.linspace(6.0, 4.0, 128), "learned": np.linspace(6.0, 3.5, 128)}
    fig = position_loss_figure(losses, limit=32, window=128)
    lines = [trace for trace in fig.data if trace.name in losses]
    assert [trace.name for trace in lines] == ["learned-32", "learned"]
    np.testing.assert_allclose(lines[1].y, losses["learned"])
    assert any("rows 32+ never trained" in note.text for note in fig.layout.annotations)
    assert "128-token windows" in fig.layout.title.text
