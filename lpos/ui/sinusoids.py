"""The Sinusoids views: the table, its frequency bands, its wavelengths and the distance curves.

None depends on the sidebar sentence or a model, so each figure is built once per input and kept
for the process (`st.cache_resource` holds the figure itself; st.plotly_chart only reads it): a
new sentence reruns the page and rebuilds none of them.
"""
from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from lpos.analysis import sinusoids
from lpos.figures.sinusoids import band_figure, offset_dot_figure, table_heatmap, wavelength_figure

FIGURES = 64  # per function: a figure of the largest map holds about 1 MB
LIFETIME = 3600  # seconds; figures nobody asked for in an hour go


@st.cache_data(max_entries=32, show_spinner=False)
def table_view(length: int, width: int, base: float) -> sinusoids.TableView:
    return sinusoids.table_view(length, width, base=base)


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
    """row t · row t+k for each start t: one curve, whatever t."""
    return offset_dot_figure(sinusoids.offset_dot_products(width, starts=list(starts), max_offset=max_offset, base=base))
