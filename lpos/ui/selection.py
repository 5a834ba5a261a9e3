"""What a page reads: the sidebar's selection (sentence, scheme, model) and one model per scheme.

app.py's sidebar (lpos.ui.state) computes the Selection once per run; pages call `selection()`.
Pages that compare every scheme call `scheme_models(selection)`.
"""
from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from lpos import checkpoints, precomputed
from lpos.checkpoints import ModelRef
from lpos.positions import SCHEMES
from lpos.ui.models import UNTRAINED, LoadedModel, label, untrained_like

DEFAULT_TEXT = precomputed.FIRST_SENTENCE  # Stretching's shift of it is precomputed
MAX_CHARS = 20_000  # longer text is cut, with a notice (about 5,000 tokens of English)
MAX_TOKENS = 1024  # the longest sequence the app draws: the longest evaluation length


@dataclass(frozen=True)
class Selection:
    text: str
    scheme: str
    model: LoadedModel
    ids: list[int]  # every token of the text, before any length limit
    dropped: int = 0  # characters of the text the model's vocabulary lacks, left out of ids


def selection() -> Selection:
    """The selection app.py computed for this run (pages call this)."""
    if "selection" not in st.session_state:
        # Streamlit's first run in a fresh server, opened straight on a page's URL, still treats
        # pages/ as an old-style pages folder and runs the page without app.py. Switch that
        # mode off (app.py's st.navigation would have done it) and rerun: the same URL then
        # runs through app.py and lands on the same page with the same query string.
        # No public API replaces this: PagesManager decides from the folder's existence before any
        # script runs, and no config option (client.showSidebarNavigation only hides the menu) or
        # st.navigation call reaches that first run; renaming pages/ would, but the name is the layout's.
        from streamlit.runtime.pages_manager import PagesManager

        PagesManager.uses_pages_directory = False
        st.rerun()
    return st.session_state["selection"]


def scheme_models(selection: Selection) -> list[LoadedModel]:
    """One model per scheme: the selected model for its own scheme; for the others the shipped
    checkpoint when the selection is a trained model (untrained when none is shipped yet), else
    an untrained model of the same size."""
    return [model_for(selection, scheme) for scheme in SCHEMES]


def model_for(selection: Selection, scheme: str) -> LoadedModel:
    """scheme_models' model of one scheme (a shipped one is loaded when a view needs its weights)."""
    chosen = selection.model
    if scheme == chosen.scheme:
        return chosen
    if not chosen.tokenizer.is_gpt2:  # the shipped models speak GPT-2: this shape, untrained, on its vocabulary
        like = untrained_like(chosen.model, chosen.key, scheme)
        return LoadedModel(UNTRAINED, ModelRef.untrained_like(chosen.ref, scheme).label(), like,
                           {"tokenizer": chosen.tokenizer})
    if chosen.trained and scheme in checkpoints.available():
        return LoadedModel.shipped(scheme)
    name = "untrained (no shipped checkpoint yet)" if chosen.trained else label(UNTRAINED)
    return LoadedModel.untrained_of(scheme, name)
