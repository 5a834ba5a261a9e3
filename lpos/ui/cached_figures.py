"""Built figures that do not depend on the sidebar sentence, kept once per input for the process.

A new sentence reruns every page; building a Plotly figure costs the server CPU even when its data
come from a cache, so the figures themselves are kept here: the sinusoid table, bands, wavelengths
and distance curves, RoPE's angles and kernel, ALiBi's slopes, each model's position maps and PCA,
the model cards' loss curves. `st.cache_resource` holds the figure object itself (no copy per
session, no pickling); st.plotly_chart only reads it. Models ride along unhashed, named by their
key and scheme (an upload's key carries its digest), as in lpos/ui/cached.py.
"""
from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from lpos.analysis import attention, similarity, sinusoids, timeline
from lpos.figures import timeline as timeline_figures
from lpos.figures.attention import alibi_slopes_figure, rope_angle_figure
from lpos.figures.embeddings import embedding_heatmaps, token_chips_html
from lpos.figures.lengths import length_curves_figure, token_loss_figure
from lpos.figures.similarity import kernel_line_figure, pca_figure, similarity_heatmaps
from lpos.figures.sinusoids import band_figure, offset_dot_figure, table_heatmap, wavelength_figure
from lpos.model import GPT
from lpos.positions import alibi_slopes
from lpos.tokenizer import token_strings, visible
from lpos.ui import cached_experiments, lesson
from lpos.ui.cached import embedding_view
from lpos.ui.cached_positions import table_view
from lpos.ui.state import Selection

FIGURES = 64  # per function: a figure of the largest map holds about 1 MB
LIFETIME = 3600  # seconds; figures nobody asked for in an hour go


@st.cache_resource(max_entries=FIGURES, ttl=LIFETIME, show_spinner=False)
def sinusoid_table(length: int, width: int, base: float, *, title: str,
                   highlight_rows: int | None = None) -> tuple[go.Figure, int]:
    """The table's heatmap and how many rows one shown row averages."""
    view = table_view(length, width, base)
    return table_heatmap(view, title=title, highlight_rows=highlight_rows), view.row_block


@st.cache_resource(max_entries=FIGURES, ttl=LIFETIME, show_spinner=False)
def sinusoid_bands(length: int, width: int, pairs: tuple[int, ...], base: float) -> go.Figure:
    return band_figure(sinusoids.frequency_bands(length, width, pairs=list(pairs), base=base))


@st.cache_resource(max_entries=FIGURES, ttl=LIFETIME, show_spinner=False)
def sinusoid_wavelengths(width: int, base: float) -> tuple[go.Figure, float]:
    """The wavelength ladder and the slowest wavelength."""
    waves = sinusoids.wavelength_frame(width, base=base)
    return wavelength_figure(waves, base=base), float(waves["wavelength"].iloc[-1])


@st.cache_resource(max_entries=FIGURES, ttl=LIFETIME, show_spinner=False)
def sinusoid_offset_dots(width: int, starts: tuple[int, ...], max_offset: int, base: float) -> go.Figure:
    return offset_dot_figure(sinusoids.offset_dot_products(width, starts=list(starts), max_offset=max_offset, base=base))


@st.cache_resource(max_entries=FIGURES, ttl=LIFETIME, show_spinner=False)
def rope_angles(head_dim: int) -> go.Figure:
    return rope_angle_figure(attention.rope_angle_frame(head_dim))


@st.cache_resource(max_entries=FIGURES, ttl=LIFETIME, show_spinner=False)
def alibi_slopes_chart(n_head: int) -> go.Figure:
    return alibi_slopes_figure(alibi_slopes(n_head).numpy())


@st.cache_resource(max_entries=FIGURES, ttl=LIFETIME, show_spinner=False)
def rope_kernel(length: int, head_dim: int) -> tuple[go.Figure, go.Figure]:
    """RoPE's position x position kernel and the same kernel by offset."""
    kernel = similarity.similarity_map(similarity.rope_kernel(length, head_dim), title="rope kernel")
    return (similarity_heatmaps([kernel], axis_title="position"),
            kernel_line_figure(similarity.rope_kernel_by_offset(length - 1, head_dim), head_dim=head_dim))


@st.cache_resource(max_entries=FIGURES, ttl=LIFETIME, show_spinner=False)
def position_maps(key: str, scheme: str, length: int, *, label: str, with_untrained: bool, _model: GPT,
                  _meta: dict | None = None) -> go.Figure:
    """Cosine similarity of a model's first `length` position rows, and of the table it started from:
    its own step-0 snapshot when it kept one, else a random N(0, 0.02) draw (seed 0), titled as such."""
    rows = similarity.position_rows(_model, length)
    maps = [similarity.similarity_map(rows, title=f"{label}: {_model.config.position} rows")]
    if with_untrained:
        start = timeline.starting_rows(_meta or {}, len(rows))
        if start is not None:
            maps.append(similarity.similarity_map(start, title="the same table at step 0"))
        else:
            random_rows = similarity.initial_position_rows(len(rows), _model.config.n_embd)
            maps.append(similarity.similarity_map(random_rows, title="a random N(0, 0.02) table"))
    return similarity_heatmaps(maps, axis_title="position")


@st.cache_resource(max_entries=FIGURES, ttl=LIFETIME, show_spinner=False)
def position_band(key: str, scheme: str, length: int, *, _model: GPT, _meta: dict | None = None) -> tuple[go.Figure, dict]:
    """The band, measured: mean cosine by distance of the model's rows (and its step-0 rows), and
    the table's structure figures (lpos.analysis.timeline.table_structure)."""
    rows = similarity.position_rows(_model, length)
    bands = {f"{_model.config.position} rows": similarity.cosine_by_distance(rows)}
    start = timeline.starting_rows(_meta or {}, len(rows)) if _model.config.position == "learned" else None
    if start is not None:
        bands["the same table at step 0"] = similarity.cosine_by_distance(start)
    return (timeline_figures.band_figure(bands, title=f"The band, measured: mean cosine by distance ({len(rows)} rows)"),
            timeline.table_structure(rows))


@st.cache_resource(max_entries=FIGURES, ttl=LIFETIME, show_spinner=False)
def position_pca(key: str, scheme: str, length: int, *, _model: GPT) -> tuple[go.Figure, go.Figure, float]:
    """The 2-D and 3-D PCA path of a model's first `length` position rows, and the variance explained."""
    table = similarity.position_rows(_model, length)
    projection = similarity.pca(table, components=3)
    name = f"{len(table)} {_model.config.position} position rows"
    return (pca_figure(projection, dimensions=2, title=f"{name}, 2-D"),
            pca_figure(projection, dimensions=3, title=f"{name}, 3-D"), float(projection.explained.sum()))


@st.cache_resource(max_entries=FIGURES, ttl=LIFETIME, show_spinner=False)
def _length_curves(cards: tuple[str, ...], train_length: int, unigram: float | None, _tables: dict) -> go.Figure:
    return length_curves_figure(_tables, train_length=train_length, unigram=unigram)


def length_curves(tables: dict[str, dict[int, dict]], *, train_length: int, unigram: float | None = None) -> go.Figure:
    """The model cards' loss against evaluation length; keyed by the cards' contents."""
    cards = tuple(repr(sorted(table.items())) for _, table in sorted(tables.items()))
    return _length_curves(tuple(tables) + cards, train_length, unigram, tables)


@st.cache_resource(max_entries=FIGURES, ttl=LIFETIME, show_spinner=False)
def _token_losses(key: str, scheme: str, ids: tuple[int, ...], train_length: int, _selection: Selection) -> go.Figure:
    curve = cached_experiments.loss_curve(_selection, list(ids))
    predicted = [visible(t) for t in token_strings(list(ids[1 : len(curve.losses) + 1]))]
    return token_loss_figure(curve, tokens=predicted, train_length=train_length, label=_selection.model.label)


def token_losses(selection: Selection, ids: list[int], *, train_length: int) -> go.Figure:
    """The loss of every token of a long text (the Length extrapolation page's live view)."""
    return _token_losses(selection.model.key, selection.scheme, tuple(ids), train_length, selection)


# Per-sentence figures: worth keeping because a class opens the same link, few because they are larger.
SENTENCE_FIGURES = 32


@st.cache_resource(max_entries=SENTENCE_FIGURES, ttl=600, show_spinner=False)
def _embedding_figures(key: str, scheme: str, ids: tuple[int, ...], _selection: Selection) -> tuple[str, go.Figure]:
    view = embedding_view(_selection, list(ids))
    return token_chips_html(view), embedding_heatmaps(view, scheme=scheme)


def embedding_figures(selection: Selection, ids: list[int]) -> tuple[str, go.Figure]:
    """The Embeddings page's token chips (escaped HTML for st.html) and its three tables."""
    return _embedding_figures(selection.model.key, selection.scheme, tuple(ids), selection)


@st.cache_resource(max_entries=SENTENCE_FIGURES * 4, ttl=600, show_spinner=False)
def _lesson_figure(step: int, key: str, scheme: str, ids: tuple[int, ...], _selection: Selection):
    return lesson.figure(step, _selection)


def lesson_figure(step: int, selection: Selection) -> tuple[go.Figure | str, str | None]:
    """A lesson step's live figure (step 1's is the chips' HTML) and its measured sentence
    (lpos.ui.lesson.figure), kept per step, model and sentence: a class on one step with one link
    builds it once."""
    ids = tuple(selection.ids[: lesson.LESSON_TOKENS + 1])  # one more token says whether the text was cut
    return _lesson_figure(step, selection.model.key, selection.scheme, ids, selection)
