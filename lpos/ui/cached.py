"""Per-sentence computations, cached by (model key, scheme, token ids).

The model object itself is not hashed (leading underscore): the key and scheme name it.
"""
from __future__ import annotations

import streamlit as st

from lpos.analysis import embeddings
from lpos.ui.state import Selection


@st.cache_data(max_entries=256, show_spinner=False)
def _embedding_view(key: str, scheme: str, ids: tuple[int, ...], _selection: Selection) -> embeddings.EmbeddingView:
    model = _selection.model
    return embeddings.embedding_view(model.model, list(ids), counts=embeddings.token_counts(model.meta))


def embedding_view(selection: Selection, ids: list[int]) -> embeddings.EmbeddingView:
    return _embedding_view(selection.model.key, selection.scheme, tuple(ids), selection)
