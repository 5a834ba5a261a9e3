"""Figure builders of the sinusoids, similarity and RoPE & ALiBi pages: the data they draw."""
import math

import numpy as np
import pytest
import torch

from lpos.analysis import attention, similarity, sinusoids
from lpos.figures.attention import (alibi_slopes_figure, matrix_panels, offset_scores_figure, rope_angle_figure,
                                    rope_arrow_figure)
from lpos.figures.similarity import kernel_line_figure, pca_figure, similarity_heatmaps, similarity_panels
from lpos.figures.sinusoids import band_figure, offset_dot_figure, table_heatmap, wavelength_figure
from lpos.positions import alibi_slopes, sinusoidal_table


def z_of(trace) -> np.ndarray:
    return np.asarray(trace.z)


def test_table_heatmap_draws_the_table_and_boxes_the_sentence():
    fig = table_heatmap(sinusoids.table_view(40, 16), title="table", highlight_rows=5)
    np.testing.assert_array_equal(z_of(fig.data[0]), sinusoidal_table(40, 16).numpy())
    assert list(fig.data[0].y) == list(range(40)) and fig.layout.yaxis.autorange == "reversed"
    (box,) = fig.layout.shapes
    assert (box.y0, box.y1) == (-0.5, 4.5)
    big = table_heatmap(sinusoids.table_view(4096, 1024), title="table")
    assert z_of(big.data[0]).shape == (256, 256) and "averages 16 positions × 4 columns" in big.layout.title.text


def test_table_heatmap_names_one_boxed_row_in_the_singular():
    notes = lambda rows: [a.text for a in table_heatmap(sinusoids.table_view(8, 4), title="t",  # noqa: E731
                                                         highlight_rows=rows).layout.annotations]
    assert notes(1) == ["your sentence: position 0"] and notes(3) == ["your sentence: positions 0–2"]


def test_band_and_wavelength_figures():
    fig = band_figure(sinusoids.frequency_bands(30, 8, pairs=[0, 2]))
    assert [t.name for t in fig.data] == ["pair 0 sin (column 0)", "pair 0 cos (column 1)",
                                          "pair 2 sin (column 4)", "pair 2 cos (column 5)"]
    np.testing.assert_allclose(fig.data[3].y, np.cos(np.arange(30) * 10000 ** (-4 / 8)), atol=1e-6)
    waves = wavelength_figure(sinusoids.wavelength_frame(128), base=10000.0)
    assert waves.layout.yaxis.type == "log"
    assert waves.data[0].y[0] == pytest.approx(2 * math.pi)
    assert waves.data[0].y[-1] == pytest.approx(2 * math.pi * 10000 ** (126 / 128))


def test_offset_dot_figure_has_one_line_per_start_and_they_coincide():
    fig = offset_dot_figure(sinusoids.offset_dot_products(64, starts=[0, 50, 500], max_offset=100))
    assert [t.name for t in fig.data] == ["t = 0", "t = 50", "t = 500"]
    np.testing.assert_allclose(fig.data[1].y, fig.data[0].y, atol=0.02)
    np.testing.assert_allclose(fig.data[2].y, fig.data[0].y, atol=0.02)


def test_similarity_heatmaps_label_tokens_and_mark_averaged_maps():
    rows = np.random.default_rng(0).normal(size=(5, 8))
    fig = similarity_heatmaps([similarity.similarity_map(rows, title="token rows")], axis_title="token",
                              tokens=["a", "<script>", "b", "c", "d"])
    z = z_of(fig.data[0])
    np.testing.assert_allclose(z, z.T, atol=1e-6)
    np.testing.assert_allclose(np.diag(z), 1.0, atol=1e-6)
    assert list(fig.data[0].x)[1] == "1 &lt;script&gt;"  # token text escaped
    big = similarity.similarity_map(sinusoidal_table(1024, 32), title="sinusoidal")
    fig = similarity_heatmaps([big, big], axis_title="position")
    assert len(fig.data) == 2 and z_of(fig.data[1]).shape == (256, 256)
    assert "4×4 blocks averaged" in fig.layout.annotations[0].text


def test_one_million_cell_map_is_sent_as_a_small_figure():
    fig = similarity_heatmaps([similarity.similarity_map(sinusoidal_table(1024, 128), title="s")], axis_title="position")
    assert len(fig.to_json()) < 600_000  # about 256 KB of float32 data plus the layout


def test_kernel_and_pca_figures():
    fig = kernel_line_figure(similarity.rope_kernel_by_offset(50, 16), head_dim=16)
    assert fig.data[0].y[0] == pytest.approx(1.0)
    projection = similarity.pca(sinusoidal_table(64, 32).numpy())
    flat, solid = pca_figure(projection, dimensions=2, title="p"), pca_figure(projection, dimensions=3, title="p")
    assert flat.data[0].type == "scatter" and solid.data[0].type == "scatter3d"
    assert list(flat.data[0].marker.color) == list(range(64))
    assert "PC1 (" in flat.layout.xaxis.title.text
    with pytest.raises(ValueError, match="3-D needs 3 components"):
        pca_figure(similarity.pca(np.eye(2)), dimensions=3, title="p")


@pytest.mark.parametrize("n_heads", [1, 4, 6, 12])
def test_alibi_slopes_are_the_figure_data(n_heads):
    fig = alibi_slopes_figure(alibi_slopes(n_heads).numpy())
    np.testing.assert_allclose(fig.data[0].y, alibi_slopes(n_heads).numpy())
    assert list(fig.data[0].x) == list(range(1, n_heads + 1))  # heads count from 1 where a learner reads them


def test_matrix_panels_with_and_without_bias(tiny_model):
    model = tiny_model("alibi")
    ids = [3, 4, 5, 6]
    effect = attention.alibi_effect(model, ids, layer=0)
    fig = matrix_panels([("without", effect.without_bias[1]), ("with", effect.with_bias[1])],
                        tokens=["a", "b", "c", "d"], value_name="weight", zmin=0, zmax=1, title="tilt")
    np.testing.assert_allclose(z_of(fig.data[1]), effect.with_bias[1])
    np.testing.assert_allclose(z_of(fig.data[0]), effect.without_bias[1])
    long = matrix_panels([("w", np.eye(1024, dtype=np.float32))], tokens=["x"] * 1024, value_name="weight",
                         zmin=0, zmax=1, title="long")
    assert z_of(long.data[0]).shape == (256, 256) and "4×4 blocks averaged" in long.layout.annotations[0].text


def test_rope_figures():
    vector = torch.tensor([1.0, 0.0, 0.5, 0.5])
    arrows = rope_arrow_figure(attention.rotating_pair(vector, pair=0, positions=4), pair=0, token="<b>x</b>")
    tips = [(t.x[1], t.y[1]) for t in arrows.data[1:-1]]  # one arrow per position, from the origin
    assert len(tips) == 4 and all(t.x[0] == t.y[0] == 0 and t.marker.symbol == "arrow" for t in arrows.data[1:-1])
    assert tips[2] == pytest.approx((math.cos(2), math.sin(2)))  # (1, 0) turned by 2 radians at position 2
    assert not arrows.layout.annotations  # arrowheads are markers: annotations redraw slower
    labels = arrows.data[-1]
    assert list(labels.text) == ["t=0", "t=1", "t=2", "t=3"] and labels.customdata[2][1] == pytest.approx(2.0)
    assert "&lt;b&gt;" in arrows.layout.title.text
    angles = rope_angle_figure(attention.rope_angle_frame(16))
    assert len(angles.data[0].x) == 8 and angles.data[0].y[0] == 1.0
    flat = offset_scores_figure(attention.offset_scores(vector, vector, offsets=[0, 2], length=10))
    assert [t.name for t in flat.data] == ["m − n = 0", "m − n = 2"]
    assert np.ptp(flat.data[1].y) < 1e-9


def test_square_maps_shrink_their_panel_instead_of_padding_the_axes():
    """scaleanchor alone padded the position axes to impossible positions (-200..300 on Similarity,
    -50..180 on the timeline); constrain="domain" keeps each axis on the data."""
    from lpos.figures.timeline import _square
    import plotly.graph_objects as go

    fig = similarity_heatmaps([similarity.similarity_map(sinusoidal_table(20, 8), title="a")] * 2, axis_title="position")
    assert [fig.layout[f"{a}axis{i}"].constrain for i in ("", "2") for a in "xy"] == ["domain"] * 4
    square = go.Figure()
    _square(square, 128)
    assert tuple(square.layout.xaxis.range) == (-0.5, 127.5) and tuple(square.layout.yaxis.range) == (127.5, -0.5)
    assert square.layout.yaxis.constrain == square.layout.xaxis.constrain == "domain"


def test_similarity_panels_are_one_figure_per_map_titled_by_it():
    """On a phone: one figure per map, so columns can stack; the map's title, block note
    included, is the figure's title and no subplot title is left to overprint."""
    small = similarity.similarity_map(sinusoidal_table(20, 8), title="trained")
    big = similarity.similarity_map(sinusoidal_table(1024, 128), title="start")
    figures = similarity_panels([small, big], axis_title="position")
    assert [f.layout.title.text for f in figures] == ["trained", f"start — {big.block}×{big.block} blocks averaged"]
    assert all(len(f.data) == 1 and not f.layout.annotations for f in figures)
