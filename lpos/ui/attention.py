"""The views of the attention page (every scheme that acts inside attention): attention weights,
RoPE's query and key, ALiBi's bias, a bias scheme's curves against distance and its effect, CoPE's
counts and what they follow, and the figures that depend on a model's size only (RoPE's angles,
ALiBi's slopes).

Per-sentence results are cached per (model, token ids, options); a model is named by its key
(lpos.ui.caching). The size-only figures are built once per size and kept for the process.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st
import torch

from lpos.analysis import attention, biases, counts
from lpos.corpus import story
from lpos.figures.attention import alibi_slopes_figure, offset_scores_figure
from lpos.figures.export import Recipe, Ref, step
from lpos.model import GPT
from lpos.positions import alibi_slopes
from lpos.ui.caching import cache_data
from lpos.ui.models import LoadedModel
from lpos.ui.sinusoids import FIGURES, LIFETIME


def head_label(model: GPT, head: int) -> str:
    """A query head's name in a head box: with grouped-query attention, the key/value head it shares."""
    attn = model.transformer.h[0].attn
    if attn.n_kv_head == attn.n_head:
        return f"head {head}"
    return f"head {head} (key head {attn.key_head(head)})"


def grouping_sentence(model: GPT) -> str:
    """How a grouped-query model's query heads share key/value heads; "" when every head has its own."""
    config = model.config
    if not config.n_kv_head or config.n_kv_head == config.n_head:
        return ""
    group = config.n_head // config.n_kv_head
    return (f"This model has {config.n_kv_head} key/value heads for its {config.n_head} query heads (grouped-query "
            f"attention): query heads {', '.join(f'{k * group}–{k * group + group - 1}' for k in range(config.n_kv_head))} "
            f"share key heads {', '.join(str(k) for k in range(config.n_kv_head))} in turn.")


@cache_data(max_entries=32, show_spinner=False)
def attention_maps(model: GPT, ids: list[int], *, layer: int) -> np.ndarray:
    """One layer's attention weights (nh, T, T)."""
    return attention.attention_maps(model, list(ids), layer=layer)


@cache_data(max_entries=32, show_spinner=False)
def alibi_effect(model: GPT, ids: list[int], *, layer: int) -> attention.AlibiEffect:
    return attention.alibi_effect(model, list(ids), layer=layer)


@cache_data(max_entries=32, show_spinner=False)
def bias_curves(model: GPT, *, layer: int) -> biases.BiasCurves:
    """A bias scheme's bias per head against distance (the sentence does not enter)."""
    return biases.bias_curves(model, layer=layer)


@cache_data(max_entries=32, show_spinner=False)
def bias_effect(model: GPT, ids: list[int], *, layer: int) -> biases.BiasEffect:
    return biases.bias_effect(model, list(ids), layer=layer)


@cache_data(max_entries=32, show_spinner=False)
def contextual_counts(model: GPT, ids: list[int], *, layer: int) -> counts.ContextualCounts:
    return counts.contextual_counts(model, list(ids), layer=layer)


@cache_data(max_entries=32, show_spinner=False)
def count_table(loaded: LoadedModel, ids: list[int], *, layer: int) -> counts.CountSummary:
    """What each head's count follows, on the sentence and on the built-in story, in the model's own tokens."""
    tokenizer = loaded.tokenizer
    story_ids, _ = tokenizer.encode_known(story())
    return counts.count_table(loaded.model, layer=layer, sentence=(list(ids), tokenizer.token_strings(list(ids))),
                              story=(story_ids, tokenizer.token_strings(story_ids)))


@cache_data(max_entries=64, show_spinner=False)
def _query_and_key(model: GPT, ids: list[int], *, layer: int, head: int, position: int) -> tuple[np.ndarray, np.ndarray]:
    q, k = attention.queries_and_keys(model, list(ids), layer=layer, rotate=False)  # (nh, T, hs)
    return q[head, position].numpy(), k[head, position].numpy()


def query_and_key(model: GPT, ids: list[int], *, layer: int, head: int, position: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The unrotated query and key (hs,) of one token in one head (cached as arrays)."""
    q, k = _query_and_key(model, ids, layer=layer, head=head, position=position)
    return torch.from_numpy(q), torch.from_numpy(k)


def offset_scores_view(query: torch.Tensor, key: torch.Tensor, *, offsets: list[int], length: int) -> tuple[go.Figure, float]:
    """The query at m against the key at m − offset after rotation, for every m: the figure and the
    largest change of a score along one of its lines (float rounding: only m − n counts)."""
    frame = attention.offset_scores(query, key, offsets=offsets, length=length)
    spread = frame.groupby("offset")["score"].agg(lambda s: s.max() - s.min()).max()
    return offset_scores_figure(frame), float(spread)


def rope_angles(head_dim: int, *, base: float = 10000.0) -> Recipe:
    """The angle each pair of a head turns per position, as a recipe (lpos.figures.export)."""
    return Recipe((step("angles", "lpos.analysis.attention.rope_angle_frame", head_dim, base=base),
                   step("fig", "lpos.figures.attention.rope_angle_figure", Ref("angles"))))


def bias_curves_recipe(*, layer: int, label: str, colour: str) -> Recipe:
    """A bias scheme's bias per head against distance, as a recipe (lpos.figures.export) on the model."""
    return Recipe((step("curves", "lpos.analysis.biases.bias_curves", Ref("model"), layer=layer),
                   step("fig", "lpos.figures.biases.bias_curves_figure", Ref("curves"), label=label, colour=colour)))


def counts_recipe(ids: list[int], *, layer: int, tokens: list[str]) -> Recipe:
    """Each head's count of every earlier token from the last one, as a recipe (lpos.figures.export)."""
    return Recipe((step("found", "lpos.analysis.counts.contextual_counts", Ref("model"), list(ids), layer=layer),
                   step("fig", "lpos.figures.counts.count_heatmap", Ref("found"), tokens=list(tokens))))


@st.cache_resource(max_entries=FIGURES, ttl=LIFETIME, show_spinner=False)
def alibi_slopes_chart(n_head: int) -> go.Figure:
    return alibi_slopes_figure(alibi_slopes(n_head).numpy())
