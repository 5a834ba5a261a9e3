"""Figure builders of the two experiment pages, checked on their data (no browser)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from lpos.analysis.lengths import LossCurve, loss_along_text
from lpos.analysis.shuffle import ORDER_BLIND_TOLERANCE, moved_from, shuffle_experiment, shuffle_table
from lpos.figures.lengths import length_curves_figure, token_loss_figure
from lpos.figures.shuffle import LOG_FLOOR, attention_bars, change_figure
from lpos.positions import SCHEMES
from lpos.tokenizer import encode

# untrained, their layer-1 change is under the dashed line: no positions, cope's zero count tables, fire's near-zero bias
UNDER_THE_LINE_UNTRAINED = ("none", "cope", "fire")


@pytest.fixture(scope="module")
def results():
    from conftest import seeded_model

    ids = encode("The <b>dog</b> bit the man.")
    models = [seeded_model(s, n_layer=1, n_head=2, n_embd=32, block_size=64) for s in SCHEMES]
    return [shuffle_experiment(m, ids, seed=4) for m in models]


def test_change_figure_draws_each_scheme_on_a_log_axis_with_the_float_error_line(results):
    table = shuffle_table(results)
    fig = change_figure(table)
    bar = fig.data[0]
    assert list(bar.x) == list(SCHEMES)
    np.testing.assert_allclose(bar.y, np.maximum(table.iloc[:, 1].to_numpy(float), LOG_FLOOR))
    assert fig.layout.yaxis.type == "log"
    assert fig.layout.shapes[0].y0 == ORDER_BLIND_TOLERANCE
    assert [y < ORDER_BLIND_TOLERANCE for y in bar.y] == [s in UNDER_THE_LINE_UNTRAINED for s in SCHEMES]
    assert fig.layout.title.text and fig.layout.yaxis.title.text


def test_attention_bars_show_both_orders_with_colours_that_follow_tokens(results):
    result = results[SCHEMES.index("none")]
    fig = attention_bars(result, head=1)
    before, after = fig.data
    np.testing.assert_allclose(before.y, result.weights_before[1])
    np.testing.assert_allclose(after.y, result.weights_after[1])
    origin = moved_from(result.original, result.shuffled)
    assert list(after.marker.color) == [before.marker.color[i] for i in origin]
    labels = [*before.x, *before.text, *after.x, *after.text]
    assert not any("<" in label for label in labels)  # token text is escaped, never markup
    assert "1 ␣&lt;" in before.x
    assert result.scheme in fig.layout.title.text


def _card(losses):
    return {length: ({"loss": loss} if loss is not None else {"loss": None, "note": "n/a: the table has 128 rows"})
            for length, loss in zip((64, 128, 256, 512, 1024), losses)}


def test_length_curves_stop_at_the_wall_and_mark_the_training_length():
    tables = {"learned": _card([4.2, 4.1, None, None, None]), "alibi": _card([4.15, 4.05, 4.0, 4.0, 4.01])}
    fig = length_curves_figure(tables, train_length=128, unigram=6.1)
    learned, alibi, unigram = fig.data
    assert list(learned.x) == [64, 128] and list(alibi.x) == [64, 128, 256, 512, 1024]
    assert list(alibi.y) == [4.15, 4.05, 4.0, 4.0, 4.01]
    # the wall and the baseline are legend entries, not labels on the plot where lines cross them
    assert learned.name == "learned: stops at 128, the table has 128 rows" and list(learned.marker.symbol)[-1] == "x"
    assert alibi.name == "alibi" and list(unigram.y) == [6.1, 6.1] and "unigram baseline 6.10" in unigram.name
    (label,) = fig.layout.annotations
    assert label.x == pytest.approx(math.log10(128)) and label.yanchor == "bottom" and label.y == 1  # above the plot
    (line,) = [s for s in fig.layout.shapes if s.x0 == 128 and s.x1 == 128]
    assert line.layer == "below"  # learned's × at 128 is drawn over the dashed line, not hidden by it
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.title.text
    low, high = fig.layout.yaxis.range  # the curves fill the plot; the baseline far above says so in its entry
    assert low < 4.0 and 4.2 < high < 4.5 and unigram.name.endswith("(above the plotted range)")
    near = length_curves_figure(tables, train_length=128, unigram=4.3)
    assert near.layout.yaxis.range[1] > 4.3 and not near.data[-1].name.endswith("(above the plotted range)")


def test_token_loss_figure_marks_a_learned_wall(tiny_model):
    ids = encode("The cat sat on the mat. " * 20)
    curve = loss_along_text(tiny_model("learned", block_size=64), ids, window=4)
    fig = token_loss_figure(curve, tokens=["t"] * len(curve.losses), train_length=64, label="<i>mine</i>")
    each, rolling = fig.data
    np.testing.assert_allclose(each.y, curve.losses)
    np.testing.assert_allclose(rolling.y, curve.rolling)
    assert [s.x0 for s in fig.layout.shapes] == [64]
    assert any("no row for position 64" in a.text for a in fig.layout.annotations)
    assert "&lt;i&gt;mine" in fig.layout.title.text


def test_token_loss_figure_marks_the_training_length_for_a_long_curve():
    losses = np.linspace(3, 6, 300)
    curve = LossCurve(losses=losses, rolling=losses, window=1, text_tokens=301, wall=None)
    fig = token_loss_figure(curve, tokens=["x"] * 300, train_length=128, label="rope")
    assert [s.x0 for s in fig.layout.shapes] == [128]
    assert any("training length 128" in a.text for a in fig.layout.annotations)


def test_shuffled_bars_keep_each_byte_piece_label():
    from lpos.analysis.shuffle import ShuffleResult  # noqa: PLC0415
    from lpos.figures.shuffle import attention_bars  # noqa: PLC0415

    original = encode("猫 ヌ and the dog.")
    shuffled = list(reversed(original[:-1])) + original[-1:]
    n = len(original)
    weights = np.full((1, n), 1.0 / n)
    result = ShuffleResult("none", original, shuffled, 0.0, 0.0, weights, weights, None, None, 0.0, 0.0)
    before, after = (list(trace.text) for trace in attention_bars(result, head=0).data)
    assert sorted(before) == sorted(after) and "‹8C of 猫›" in after and "‹8C of ヌ›" in after  # labels travel


def test_the_float_error_line_is_explained_in_the_legend_not_on_the_bars():
    import pandas as pd  # noqa: PLC0415

    from lpos.analysis.shuffle import ORDER_BLIND_TOLERANCE  # noqa: PLC0415
    from lpos.figures.shuffle import change_figure  # noqa: PLC0415

    table = pd.DataFrame({"scheme": ["learned", "none"], "layer-1 attention output, max |change|": [0.3, 1e-8]})
    fig = change_figure(table)
    assert not fig.layout.annotations  # a label on the plot lands on a bar at some width
    (key,) = [t for t in fig.data if t.showlegend is not False]
    assert key.line.dash == "dash" and key.name.startswith(f"{ORDER_BLIND_TOLERANCE:g}: below it, tiny")
    assert fig.layout.legend.y < 0  # under the plot


def test_the_attention_bars_name_the_axis_once_under_the_lower_panel(results):
    fig = attention_bars(results[SCHEMES.index("none")], head=0)
    assert fig.layout.xaxis.title.text is None and fig.layout.xaxis2.title.text == "position and token"


