"""The Similarity page's token half: the sidebar sentence's token x token map (token rows, or token +
position rows) and the nearest tokens of a word by cosine of token rows. The position half (maps,
band, PCA path, RoPE's kernel) is lpos.ui.similarity.

Nearest tokens are cached per (model, token, k); a model is named by its key (lpos.ui.caching).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from lpos.analysis import similarity
from lpos.analysis.embeddings import EmbeddingView, token_counts
from lpos.figures.similarity import similarity_heatmaps
from lpos.tokenizer import visible
from lpos.ui.caching import cache_data
from lpos.ui.export import chart
from lpos.ui.models import LoadedModel
from lpos.ui.selection import Selection


@cache_data(max_entries=64, show_spinner=False)
def nearest_tokens(model: LoadedModel, token_id: int, *, k: int) -> pd.DataFrame:
    return similarity.nearest_tokens(model.model, token_id, k=k, counts=token_counts(model.meta), tokenizer=model.tokenizer)


@st.cache_resource(max_entries=32, ttl=600, show_spinner=False)
def token_map(rows: np.ndarray, *, title: str, tokens: list[str]) -> go.Figure:
    """The sentence's token x token cosine map of `rows`."""
    return similarity_heatmaps([similarity.similarity_map(rows, title=title)], axis_title="token", tokens=tokens)


@st.fragment
def token_map_section(selection: Selection, view: EmbeddingView, tokens: list[str]) -> None:
    """The sentence's token x token map and its own choice of rows."""
    st.subheader("Token × token, for your sentence")
    options = ["token rows"] + (["token + position rows"] if view.position_rows is not None else [])
    if len(options) > 1:
        which = st.radio("Rows", options, horizontal=True, key="sim_rows")
    else:  # one choice is no choice: say it instead of offering it
        which = options[0]
        st.markdown(f"Rows: **{which}** ({selection.scheme} adds no position rows).")
    rows = view.token_rows if which == "token rows" else view.summed_rows
    chart(token_map(rows, title=which, tokens=tokens), name="similarity-token-map", model=selection.model,
          key="sim_tokens")  # a new sentence redraws it in place (lpos.ui.plotly_react)
    st.caption("A repeated token has cosine 1 with itself in token rows; adding position rows makes the copies differ.\n"
               + ("This scheme adds no position rows, so only token rows exist here." if view.position_rows is None else
                  "Switch between token rows and summed rows to see the position rows at work."))


def chosen_token(loaded: LoadedModel, ids: list[int], tokens: list[str], typed: str) -> int:
    """The first token of the typed text, or, with none, the token picked from the sentence."""
    tokenizer = loaded.tokenizer
    typed_ids, dropped = tokenizer.encode_known(typed) if typed.strip() else ([], 0)
    if dropped:
        st.caption(tokenizer.left_out_sentence(typed, of="that text",
                                               end="." if typed_ids else "; picking from your sentence instead."))
    if typed_ids:
        if len(typed_ids) > 1:
            st.caption(f"That text is {len(typed_ids)} tokens; showing the first, “{visible(tokenizer.token_strings(typed_ids[:1])[0])}”.")
        return typed_ids[0]
    # keyed by the sentence: a new sentence gets a new box, so its label cannot keep the old sentence's token
    position = st.selectbox("Token from your sentence", range(len(ids)),
                            key=f"sim_token_position_{hash(tuple(ids)) & 0xFFFFFFFF:08x}",
                            format_func=lambda p: f"{p}: {tokens[p]}")
    return ids[position]


@st.fragment
def neighbours_section(loaded: LoadedModel, ids: list[int], tokens: list[str]) -> None:
    """Nearest tokens: the word, how many, and the table they drive."""
    st.subheader("Nearest neighbours")
    left, right = st.columns([2, 1])
    typed = left.text_input("Type a word (its first token is used), or leave empty to pick from your sentence",
                            key="sim_word", max_chars=100)
    k = right.slider("How many", min_value=1, max_value=50, value=10, key="sim_k")
    token_id = chosen_token(loaded, ids, tokens, typed)
    counts = token_counts(loaded.meta)
    st.dataframe(nearest_tokens(loaded, token_id, k=k), hide_index=True, key="sim_neighbours")
    if not loaded.trained:
        st.warning("Untrained model: every token row is still random, so these neighbours are random too.", icon=":material/casino:")
    elif counts is None:
        st.caption("This model has no training counts: how often each token was trained on is not known for this model.")
    elif counts.get(token_id, 0) == 0:
        st.warning(f"“{visible(loaded.tokenizer.token_strings([token_id])[0])}” was never seen in training: its row is "
                   "still random, so its neighbours mean nothing.", icon=":material/casino:")
    st.caption(similarity.search_sentence(loaded.tokenizer, counted=counts is not None))
