"""The Sinusoids views: the table, its frequency bands, its wavelengths and the distance curves.

None depends on the sidebar sentence or a model. Each figure is a Recipe (lpos.figures.export):
the page draws it (lpos.ui.export.drawn keeps the built figure for the process) and shows it as
Python; a new sentence reruns the page and rebuilds none of them.
"""
from __future__ import annotations

import streamlit as st

from lpos.analysis import sinusoids
from lpos.figures.export import Recipe, Ref, step
from lpos.figures.sinusoids import band_figure, offset_dot_figure, table_heatmap, wavelength_figure

FIGURES = 64  # per function: a figure of the largest map holds about 1 MB
LIFETIME = 3600  # seconds; figures nobody asked for in an hour go


@st.cache_data(max_entries=32, show_spinner=False)
def table_view(length: int, width: int, base: float) -> sinusoids.TableView:
    return sinusoids.table_view(length, width, base=base)


def sinusoid_table(length: int, width: int, base: float, *, title: str,
                   highlight_rows: int | None = None) -> tuple[Recipe, int]:
    """The table's heatmap and how many rows one shown row averages."""
    return Recipe((step("view", sinusoids.table_view, length, width, base=base),
                   step("fig", table_heatmap, Ref("view"), title=title, highlight_rows=highlight_rows))), \
        table_view(length, width, base).row_block


def sinusoid_bands(length: int, width: int, pairs: tuple[int, ...], base: float) -> Recipe:
    return Recipe((step("bands", sinusoids.frequency_bands, length, width, pairs=list(pairs), base=base),
                   step("fig", band_figure, Ref("bands"))))


@st.cache_data(max_entries=FIGURES, ttl=LIFETIME, show_spinner=False)
def slowest_wavelength(width: int, base: float) -> float:
    return float(sinusoids.wavelength_frame(width, base=base)["wavelength"].iloc[-1])


def sinusoid_wavelengths(width: int, base: float) -> tuple[Recipe, float]:
    """The wavelength ladder and the slowest wavelength."""
    return Recipe((step("waves", sinusoids.wavelength_frame, width, base=base),
                   step("fig", wavelength_figure, Ref("waves"), base=base))), slowest_wavelength(width, base)


def offset_dots_recipe(width: int, starts: tuple[int, ...], max_offset: int, base: float) -> Recipe:
    """row t · row t+k for each start t: one curve, whatever t."""
    return Recipe((step("dots", sinusoids.offset_dot_products, width, starts=list(starts), max_offset=max_offset,
                        base=base),
                   step("fig", offset_dot_figure, Ref("dots"))))
