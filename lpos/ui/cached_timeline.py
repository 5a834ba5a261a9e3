"""Cached reads of a model's training timeline, keyed by the model key (the timeline never
depends on the sidebar sentence, so a new sentence rebuilds none of it)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from lpos.analysis import timeline
from lpos.ui.state import Selection


@st.cache_data(max_entries=8, show_spinner="Reading the training snapshots…")
def _timeline(key: str, _selection: Selection) -> tuple[timeline.Timeline | None, np.ndarray | None, pd.DataFrame | None]:
    found = timeline.timeline_of(_selection.model.meta)
    if found is None:
        return None, None, None
    return found, timeline.cosine_maps(found), timeline.band_over_time(found)


def model_timeline(selection: Selection):
    """(timeline, cosine maps (S, T, T), band over time) of the selected model, or Nones."""
    return _timeline(selection.model.key, selection)
