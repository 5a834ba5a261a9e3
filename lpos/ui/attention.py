"""The attention page (every scheme that acts inside attention): the layer and head boxes and the
sections they drive (this model's own scheme, its attention weights, what RoPE and ALiBi would do),
RoPE's query and key, and the figures that depend on a model's size only (RoPE's angles). The bias
sections live in lpos.ui.biases, CoPE's counts in lpos.ui.counts.

Per-sentence results are cached per (model, token ids, options); a model is named by its key
(lpos.ui.caching).
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st
import torch

from lpos.analysis import attention
from lpos.analysis.attention import key_head_sentence, rope_query_sentence, rope_speed_sentence, rotating_pair
from lpos.analysis.biases import has_fixed_bias
from lpos.analysis.heads import head_sentence
from lpos.figures.attention import (matrix_panels, offset_scores_figure, rope_angle_figure, rope_arrow_figure,
                                   rotation_map_figure)
from lpos.figures.export import Recipe, Ref, step
from lpos.model import GPT
from lpos.ui.biases import alibi_section, bias_curves_section, own_bias_section
from lpos.ui.caching import cache_data
from lpos.ui.counts import counts_section
from lpos.ui.export import chart
from lpos.ui.models import LoadedModel


def head_label(model: GPT, head: int) -> str:
    """A query head's name in a head box: with grouped-query attention, the key/value head it shares."""
    attn = model.transformer.h[0].attn
    if attn.n_kv_head == attn.n_head:
        return f"head {head + 1}"
    return f"head {head + 1} (key head {attn.key_head(head) + 1})"


def grouping_sentence(model: GPT) -> str:
    """How a grouped-query model's query heads share key/value heads; "" when every head has its own."""
    config = model.config
    if not config.n_kv_head or config.n_kv_head == config.n_head:
        return ""
    group = config.n_head // config.n_kv_head
    return (f"This model has {config.n_kv_head} key/value heads for its {config.n_head} query heads (grouped-query "
            f"attention): query heads {', '.join(f'{k * group + 1}–{k * group + group}' for k in range(config.n_kv_head))} "
            f"share key heads {', '.join(str(k + 1) for k in range(config.n_kv_head))} in turn.")


attention_maps = cache_data(max_entries=32, show_spinner=False)(attention.attention_maps)  # (nh, T, T) per (model, ids, layer)


@cache_data(max_entries=64, show_spinner=False)
def _query_and_key(model: GPT, ids: list[int], *, layer: int, head: int, position: int) -> tuple[np.ndarray, np.ndarray]:
    q, k = attention.queries_and_keys(model, list(ids), layer=layer, rotate=False)  # (nh, T, hs)
    return q[head, position].numpy(), k[head, position].numpy()


def query_and_key(model: GPT, ids: list[int], *, layer: int, head: int, position: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The unrotated query and key (hs,) of one token in one head (cached as arrays)."""
    q, k = _query_and_key(model, ids, layer=layer, head=head, position=position)
    return torch.from_numpy(q), torch.from_numpy(k)


def offset_scores_view(query: torch.Tensor, key: torch.Tensor, *, offsets: list[int], length: int,
                       scheme: str = "rope", share: float | None = None) -> tuple[go.Figure, float]:
    """The query at m against the key at m − offset after rotation, for every m: the figure and the
    largest change of a score along one of its lines (float rounding: only m − n counts)."""
    frame = attention.offset_scores(query, key, offsets=offsets, length=length, scheme=scheme, share=share)
    spread = frame.groupby("offset")["score"].agg(lambda s: s.max() - s.min()).max()
    return offset_scores_figure(frame), float(spread)


def rope_angles_chart(head_dim: int, *, base: float = 10000.0, scheme: str = "rope", share: float | None = None) -> Recipe:
    """The angle each pair of a head turns per position, as a recipe (lpos.figures.export)."""
    return Recipe((step("angles", attention.rope_angle_frame, head_dim, base=base, scheme=scheme, share=share),
                   step("fig", rope_angle_figure, Ref("angles"))))


def rotation_map_section(loaded: LoadedModel) -> None:
    """Which pairs of a head turn in which layer, for a model that rotates, and the sentence that says it."""
    chart(rotation_map_figure(attention.rotation_map(loaded.model), label=loaded.label), name="attention-rotation-map",
          model=loaded, key="ra_rotation_map")
    st.caption(attention.rotation_sentence(loaded.model))


@st.fragment
def rope_section(loaded: LoadedModel, ids: list[int], tokens: list[str], *, own: bool, layer: int, head: int) -> None:
    """RoPE on one token's query, with its own token, pair and length controls; `own`: the model rotates it."""
    model, config = loaded.model, loaded.config
    head_dim, base = config.head_size, model.transformer.h[layer].attn.rope_base  # this layer's (Gemma 3: local or global)
    if head_dim % 2:
        st.info(f"RoPE needs an even head size; this model's heads have {head_dim} columns.", icon=":material/info:")
        return
    a, b, c = st.columns(3)
    position = a.selectbox("Token", range(len(ids)), format_func=lambda p: f"{p}: {tokens[p]}", key=f"ra_token_{len(ids)}")
    pair = b.slider("Column pair of the head", 0, head_dim // 2 - 1, 0, key=f"ra_pair_{head_dim}")
    steps = c.slider("Positions to draw", 2, 32, 8, key="ra_steps")
    scheme = model.config.position if own else "rope"  # what turns: this model's rotation, or plain RoPE's
    share = config.rope_share if own else None  # a configuration's own share of rotated columns (Pythia's rotary_pct)
    if own and not model.scheme.rotates_layer(layer):
        st.info(f"Layer {layer + 1} of this model rotates nothing: its queries and keys carry no position, so the "
                "arrow below would stand still. Pick another layer to see its rotation.", icon=":material/info:")
        return
    query, key = query_and_key(model, ids, layer=layer, head=head, position=position)
    chart(rope_arrow_figure(rotating_pair(query, pair=pair, positions=steps, base=base, scheme=scheme, share=share),
                            pair=pair, token=tokens[position]), name="attention-rope-arrow", model=loaded, key="ra_arrow")
    st.caption(rope_query_sentence(rotates=own, layer=layer, head=head, pair=pair, head_dim=head_dim,
                                   base=base, steps=steps, scheme=scheme, share=share))
    if grouped := key_head_sentence(model, layer=layer, head=head):  # grouped-query attention (Llama)
        st.caption(grouped)
    chart(rope_angles_chart(head_dim, base=base, scheme=scheme, share=share), name="attention-rope-angles", model=loaded,
          key="ra_angles")
    st.caption(rope_speed_sentence(head_dim, n_embd=config.n_embd, base=base, scheme=scheme, share=share))
    length = max(len(ids), 64)
    offsets = [offset for offset in (0, 1, 4, 16) if offset < length]
    flat, _ = offset_scores_view(query, key, offsets=offsets, length=length, scheme=scheme, share=share)
    chart(flat, name="attention-offset-scores", model=loaded, key="ra_flat")
    st.caption("The token's query at position m against its own key at n = m − offset, after rotation.\n"
               "Every line is flat: moving both by the same amount changes nothing, only m − n counts.")


@st.fragment
def attention_views(loaded: LoadedModel, ids: list[int], tokens: list[str]) -> None:
    """The layer and head boxes and every figure they drive: changing one reruns only this."""
    model, config = loaded.model, loaded.config
    left, right = st.columns(2)
    layer = left.selectbox("Layer", range(config.n_layer), key=f"ra_layer_{config.n_layer}",
                           format_func=lambda i: str(i + 1))  # 0-based index, shown 1-based as on every page
    head = right.selectbox("Head", range(config.n_head), key=f"ra_head_{config.n_head}",
                           format_func=lambda h: head_label(model, h))  # every head of the chosen layer
    if not model.scheme.in_attention:
        st.info(f"This model's scheme, {model.scheme.label}, does not act inside attention: it {model.scheme.acts}. "
                "Below: this model's attention, then what RoPE and ALiBi would do instead.", icon=":material/info:")

    own_scheme(loaded, ids, tokens, layer=layer, head=head)
    attention_weights(loaded, ids, tokens, layer=layer, head=head)
    what_if(loaded, ids, tokens, layer=layer, head=head)


def own_scheme(loaded: LoadedModel, ids: list[int], tokens: list[str], *, layer: int, head: int) -> None:
    """What this model's own scheme does inside attention, at the chosen layer and head."""
    scheme = loaded.model.scheme
    if scheme.shows("rotation"):
        st.header(f"{scheme.label} in this model")
        rotation_map_section(loaded)
        rope_section(loaded, ids, tokens, own=True, layer=layer, head=head)
    if scheme.shows("bias"):
        st.header(f"{scheme.label} in this model")
        bias_curves_section(loaded, layer=layer, head=head)
        if has_fixed_bias(loaded.model):
            alibi_section(loaded, ids, tokens, own=True, layer=layer, head=head)
        else:
            own_bias_section(loaded, ids, tokens, layer=layer, head=head)
    if scheme.shows("contextual"):
        st.header(f"{scheme.label} in this model: what each head counts")
        counts_section(loaded, ids, tokens, layer=layer)


def attention_weights(loaded: LoadedModel, ids: list[int], tokens: list[str], *, layer: int, head: int) -> None:
    """This model's attention weights at the chosen layer and head."""
    st.header("This model's attention weights")
    weights = attention_maps(loaded.model, ids, layer=layer)
    chart(matrix_panels([(f"layer {layer + 1}, head {head + 1}", weights[head])], tokens=tokens, value_name="weight",
                        zmin=0.0, zmax=1.0, title=f"Attention weights, {loaded.label}"), name="attention-weights",
          model=loaded, key="ra_attention")
    st.caption("Each row is one query token's attention over the keys up to itself; each row sums to 1.\n"
               + ("Untrained: random, small scores spread the weights evenly over the visible keys"
                  + (", tilted towards recent keys by the bias." if has_fixed_bias(loaded.model) else ".")
                  if not loaded.trained and len(ids) > 1 else head_sentence(weights, layer=layer + 1, head=head)))


def what_if(loaded: LoadedModel, ids: list[int], tokens: list[str], *, layer: int, head: int) -> None:
    """RoPE's and ALiBi's effect on this model, folded: what it would do, not what this model does."""
    # closed, an expander computes nothing: opening it reruns this fragment, which then draws it
    if not loaded.model.scheme.shows("rotation"):
        rope_box = st.expander("What RoPE would do (not what this model does)", key="ra_rope_open", on_change="rerun")
        if rope_box.open:
            with rope_box:
                rope_section(loaded, ids, tokens, own=False, layer=layer, head=head)
    if not has_fixed_bias(loaded.model):
        alibi_box = st.expander("What ALiBi would do (not what this model does)", key="ra_alibi_open", on_change="rerun")
        if alibi_box.open:
            with alibi_box:
                alibi_section(loaded, ids, tokens, own=False, layer=layer, head=head)
