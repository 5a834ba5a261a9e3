"""Cached reads of a model's training timeline and the Training timeline page's figures, keyed by
the model key: the timeline never depends on the sidebar sentence, so a new sentence rebuilds
none of it. `st.cache_resource` holds the objects themselves (no pickled copy per run); the page
only reads them, as lpos/ui/cached_figures.py's figures are read."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from lpos.analysis import timeline
from lpos.figures.timeline import attention_figure, band_figure, loss_curve_figure, position_map_figure, repeated_figure
from lpos.ui.state import Selection

STEP_FIGURES = 64  # 16 snapshots of a few models


@dataclass(frozen=True)
class ModelTimeline:
    timeline: timeline.Timeline
    maps: np.ndarray  # (S, T, T) cosine map at every snapshot
    band: pd.DataFrame  # band over time (lpos.analysis.timeline.band_over_time)
    reading: list[str]  # timeline_reading's sentences
    repeated: pd.DataFrame  # the repeated word's cosine per step


@st.cache_resource(max_entries=8, show_spinner="Reading the training snapshots…")
def _timeline(key: str, _selection: Selection) -> ModelTimeline | None:
    found = timeline.timeline_of(_selection.model.meta)
    if found is None:
        return None
    return ModelTimeline(found, timeline.cosine_maps(found), timeline.band_over_time(found),
                         timeline.timeline_reading(found), timeline.repeated_similarity(found))


def model_timeline(selection: Selection) -> ModelTimeline | None:
    """The selected model's timeline and what the page derives from it, or None without one."""
    return _timeline(selection.model.key, selection)


@dataclass(frozen=True)
class StepFigures:
    loss: go.Figure
    position_map: go.Figure
    band: go.Figure
    repeated: go.Figure
    attention: go.Figure


@st.cache_resource(max_entries=STEP_FIGURES, show_spinner=False)
def _step_figures(key: str, index: int, _selection: Selection) -> StepFigures:
    found = model_timeline(_selection)
    line, band, steps = found.timeline, found.band, found.timeline.steps
    shown = {f"step {steps[0]}": band[band.step == steps[0]], f"step {steps[index]}": band[band.step == steps[index]]}
    return StepFigures(loss_curve_figure(line, index), position_map_figure(found.maps, line, index),
                       band_figure(shown, title="The band, measured: mean cosine by distance"),
                       repeated_figure(found.repeated, word=line.repeated_word, index=index), attention_figure(line, index))


def step_figures(selection: Selection, index: int) -> StepFigures:
    """The figures of snapshot `index` of the selected model's timeline (which must exist)."""
    return _step_figures(selection.model.key, index, selection)
