"""lpos.figures.embeddings: the chips and the three heatmaps, checked on their data."""
import numpy as np
import pytest

from lpos.analysis.embeddings import EmbeddingView, embedding_view
from lpos.figures.common import position_labels, safe, tick_step
from lpos.figures.embeddings import (CHIP_LIMIT, CHIP_TEXT_CHARS, NEVER_SEEN, chip_text, embedding_heatmaps,
                                     short_count, token_chips)
from lpos.tokenizer import encode


def handmade_view(tokens, *, counts=None, width=4, positions=True) -> EmbeddingView:
    T = len(tokens)
    token_rows = np.arange(T * width, dtype=np.float32).reshape(T, width) / 10 - 0.5
    position_rows = np.full((T, width), 0.25, dtype=np.float32) if positions else None
    return EmbeddingView(ids=list(range(100, 100 + T)), tokens=tokens, token_rows=token_rows,
                         position_rows=position_rows,
                         summed_rows=token_rows + position_rows if positions else token_rows,
                         counts=counts if counts is not None else [None] * T)


def heatmaps_of(fig):
    return [trace for trace in fig.data if trace.type == "heatmap"]


def test_three_panels_share_one_colour_scale():
    view = handmade_view(["A", "␣cat", "␣sat"])
    fig = embedding_heatmaps(view, scheme="learned")
    traces = heatmaps_of(fig)
    assert [t.name for t in traces] == ["token rows", "position rows", "summed rows"]
    limit = float(np.abs(view.summed_rows).max())  # the largest |value| over all three panels
    assert {(t.zmin, t.zmax) for t in traces} == {(-limit, limit)}
    np.testing.assert_array_equal(traces[0].z, view.token_rows)
    np.testing.assert_array_equal(traces[1].z, view.position_rows)
    np.testing.assert_array_equal(traces[2].z, view.summed_rows)
    assert [t.showscale for t in traces] == [False, False, True]
    assert list(traces[0].y) == ["0 A", "1 ␣cat", "2 ␣sat"]
    assert all("value %{z:.4f}" in t.hovertemplate for t in traces)


def test_axis_labels_and_title():
    fig = embedding_heatmaps(handmade_view(["A", "B"]), scheme="sinusoidal")
    assert [fig.layout[f"xaxis{i}"].title.text for i in ("", "2", "3")] == ["embedding dimension"] * 3
    assert fig.layout.yaxis.title.text == "position and token"
    assert "sinusoidal, 2 tokens, 4 dimensions" in fig.layout.title.text


@pytest.mark.parametrize("scheme, reason", [("rope", "RoPE adds nothing"), ("alibi", "ALiBi adds nothing"),
                                            ("none", "No position rows")])
def test_empty_position_panel_says_why(scheme, reason):
    fig = embedding_heatmaps(handmade_view(["A", "B"], positions=False), scheme=scheme)
    assert [t.name for t in heatmaps_of(fig)] == ["token rows", "summed rows"]
    notes = [a.text for a in fig.layout.annotations if reason in a.text]
    assert len(notes) == 1
    note = next(a for a in fig.layout.annotations if reason in a.text)
    assert note.x == pytest.approx(sum(fig.layout.xaxis2.domain) / 2)  # centred on the middle panel


def test_token_text_is_escaped_everywhere():
    view = handmade_view(["<script>", "<b>x</b>"], counts=[3, 0])
    heatmaps, chips = embedding_heatmaps(view, scheme="learned"), token_chips(view)
    labels = list(heatmaps_of(heatmaps)[0].y)
    assert labels == ["0 &lt;script&gt;", "1 &lt;b&gt;x&lt;/b&gt;"]
    assert list(heatmaps.layout.yaxis.ticktext) == labels
    drawn = [*chips.data[0].text, *chips.data[0].hovertext]
    assert all("<script" not in s and "<b>x" not in s for s in drawn)
    assert "“&lt;script&gt;”" in chips.data[0].hovertext[0]
    assert safe("a < b & c") == "a &lt; b &amp; c"


def test_short_sentences_get_tall_rows_and_every_label(tiny_model):
    view = embedding_view(tiny_model("learned"), encode("The dog bit the man"))
    fig = embedding_heatmaps(view, scheme="learned")
    assert list(fig.layout.yaxis.tickvals) == position_labels(view.tokens)
    assert 300 <= fig.layout.height <= 340  # 140 px of rows at least, plus title and axes


def test_long_sentences_stay_on_screen_with_thinned_labels(tiny_model):
    view = embedding_view(tiny_model("sinusoidal"), list(range(1000, 1120)))
    fig = embedding_heatmaps(view, scheme="sinusoidal")
    assert fig.layout.height <= 900
    ticks = list(fig.layout.yaxis.tickvals)
    step = tick_step(120, pixels=720)
    assert step == 3 and ticks == position_labels(view.tokens)[::3]
    assert len(ticks) * 14 <= 720  # labels at least 14 px apart
    assert "a label every 3 rows" in fig.layout.yaxis.title.text


def test_short_count():
    assert [short_count(n) for n in (7, 2_907, 38_826, 1_234_567)] == ["7×", "2,907×", "38.8k×", "1.2M×"]


def test_chips_show_text_id_and_count():
    view = handmade_view(["␣the", "␣zyx"], counts=[38_826, 0])
    fig = token_chips(view)
    assert list(fig.data[0].text) == ["<b>␣the</b><br>id 100<br>38.8k×", "<b>␣zyx</b><br>id 101<br>never seen"]
    assert "occurs 38,826 times in the training text" in fig.data[0].hovertext[0]
    assert NEVER_SEEN in fig.data[0].hovertext[1]
    assert [s.fillcolor for s in fig.layout.shapes] == ["#dbe9f6", "#f8d7da"]
    assert "red = never seen" in fig.layout.title.text


def test_untrained_chips_have_no_count_line():
    fig = token_chips(handmade_view(["A", "B"]))
    assert list(fig.data[0].text) == ["<b>A</b><br>id 100", "<b>B</b><br>id 101"]
    assert "no training counts" in fig.layout.title.text
    assert "no training counts" in fig.data[0].hovertext[0]


def test_long_tokens_are_cut_on_the_chip_and_whole_in_the_hover():
    token = "␣" + "x" * 30
    fig = token_chips(handmade_view([token], counts=[1]))
    first_line = fig.data[0].text[0].split("<br>")[0]
    assert first_line == f"<b>{chip_text(token)}</b>" and len(chip_text(token)) == CHIP_TEXT_CHARS
    assert chip_text(token).endswith("…")
    assert token in fig.data[0].hovertext[0] and "31 characters" in fig.data[0].hovertext[0]
    assert chip_text("␣short") == "␣short"


def test_chip_grid_and_limit():
    view = handmade_view([f"t{i}" for i in range(CHIP_LIMIT + 50)])
    fig = token_chips(view)
    assert len(fig.data[0].x) == len(fig.layout.shapes) == CHIP_LIMIT
    assert f"(the first {CHIP_LIMIT} of {CHIP_LIMIT + 50})" in fig.layout.title.text
    assert (fig.data[0].x[11], fig.data[0].y[11]) == (1, -1)  # ten chips a row
    small = token_chips(handmade_view(["a"] * 5))
    assert small.layout.height < fig.layout.height
