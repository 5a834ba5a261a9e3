"""Cached computations for the sinusoids, similarity and RoPE & ALiBi pages.

Per-sentence results are keyed by (model key, scheme, token ids, options); the model itself is
not hashed (leading underscore), its key names it. Pure-maths results are keyed by their inputs.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st
import torch

from lpos.analysis import attention, similarity, sinusoids
from lpos.analysis.embeddings import token_counts
from lpos.ui.state import Selection


@st.cache_data(max_entries=32, show_spinner=False)
def table_view(length: int, width: int, base: float) -> sinusoids.TableView:
    return sinusoids.table_view(length, width, base=base)


@st.cache_data(max_entries=32, show_spinner=False)
def _attention_maps(key: str, scheme: str, ids: tuple[int, ...], layer: int, _selection: Selection) -> np.ndarray:
    return attention.attention_maps(_selection.model.model, list(ids), layer=layer)


def attention_maps(selection: Selection, ids: list[int], *, layer: int) -> np.ndarray:
    return _attention_maps(selection.model.key, selection.scheme, tuple(ids), layer, selection)


@st.cache_data(max_entries=32, show_spinner=False)
def _alibi_effect(key: str, scheme: str, ids: tuple[int, ...], layer: int, _selection: Selection) -> attention.AlibiEffect:
    return attention.alibi_effect(_selection.model.model, list(ids), layer=layer)


def alibi_effect(selection: Selection, ids: list[int], *, layer: int) -> attention.AlibiEffect:
    return _alibi_effect(selection.model.key, selection.scheme, tuple(ids), layer, selection)


@st.cache_data(max_entries=64, show_spinner=False)
def _query_and_key(key: str, scheme: str, ids: tuple[int, ...], layer: int, head: int, position: int,
                   _selection: Selection) -> tuple[np.ndarray, np.ndarray]:
    q, k = attention.queries_and_keys(_selection.model.model, list(ids), layer=layer, rotate=False)
    return q[head, position].numpy(), k[head, position].numpy()


def query_and_key(selection: Selection, ids: list[int], *, layer: int, head: int, position: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The unrotated query and key (hs,) of one token in one head."""
    q, k = _query_and_key(selection.model.key, selection.scheme, tuple(ids), layer, head, position, selection)
    return torch.from_numpy(q), torch.from_numpy(k)


@st.cache_data(max_entries=64, show_spinner=False)
def _nearest_tokens(key: str, scheme: str, token_id: int, k: int, _selection: Selection) -> pd.DataFrame:
    model = _selection.model
    return similarity.nearest_tokens(model.model, token_id, k=k, counts=token_counts(model.meta))


def nearest_tokens(selection: Selection, token_id: int, *, k: int) -> pd.DataFrame:
    return _nearest_tokens(selection.model.key, selection.scheme, token_id, k, selection)


@st.cache_data(max_entries=32, show_spinner=False)
def similarity_map(rows: np.ndarray, *, title: str) -> similarity.SimilarityMap:
    return similarity.similarity_map(rows, title=title)


@st.cache_data(max_entries=32, show_spinner=False)
def pca(rows: np.ndarray) -> similarity.Projection:
    return similarity.pca(rows, components=3)
