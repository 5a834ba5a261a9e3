"""The attention page's bias sections (ALiBi, T5, FIRE): ALiBi's slopes and bias, a bias scheme's curves
against distance, a learned bias over the sentence, and how either tilts the attention weights.

Per-sentence results are cached per (model, token ids, layer); a model is named by its key
(lpos.ui.caching). The slopes depend on the number of heads only: built once per size and kept.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from lpos.analysis import attention, biases
from lpos.analysis.attention import alibi_slopes_sentence
from lpos.analysis.biases import bias_curves_sentence, look_back_sentence
from lpos.figures.attention import BIAS_COLOURS, alibi_slopes_figure, matrix_panels
from lpos.figures.biases import bias_curves_figure
from lpos.figures.common import DIVERGING
from lpos.figures.export import Recipe, Ref, step
from lpos.positions import alibi_slopes
from lpos.ui.caching import cache_data
from lpos.ui.export import chart
from lpos.ui.models import LoadedModel
from lpos.ui.sinusoids import FIGURES, LIFETIME

per_layer = cache_data(max_entries=32, show_spinner=False)  # per (model, [token ids,] layer)
alibi_effect = per_layer(attention.alibi_effect)
bias_curves = per_layer(biases.bias_curves)  # the sentence does not enter
bias_effect = per_layer(biases.bias_effect)
TILT = "First: softmax of the same query·key scores without the bias. Then with it, as the model does."


def bias_curves_recipe(*, layer: int, label: str, colour: str) -> Recipe:
    """A bias scheme's bias per head against distance, as a recipe (lpos.figures.export) on the model."""
    return Recipe((step("curves", biases.bias_curves, Ref("model"), layer=layer),
                   step("fig", bias_curves_figure, Ref("curves"), label=label, colour=colour)))


@st.cache_resource(max_entries=FIGURES, ttl=LIFETIME, show_spinner=False)
def alibi_slopes_chart(n_head: int) -> go.Figure:
    return alibi_slopes_figure(alibi_slopes(n_head).numpy())


def tilt_panels(loaded: LoadedModel, tokens: list[str], without: np.ndarray, with_: np.ndarray, *, layer: int,
                head: int, key: str) -> None:
    """Softmax of the same scores without the bias and with it (nh, T, T), side by side (stacked on a phone)."""
    plain, tilted = st.columns(2)
    name = f"layer {layer + 1}, head {head + 1}"
    chart(matrix_panels([(name, without[head])], tokens=tokens, value_name="weight", zmin=0.0, zmax=1.0,
                        title="Without the bias"), name=f"attention-{key}-without-bias", where=plain, model=loaded, key=f"{key}_plain")
    chart(matrix_panels([(name, with_[head])], tokens=tokens, value_name="weight", zmin=0.0, zmax=1.0,
                        title="How the bias tilts attention: with it"), name=f"attention-{key}-with-bias", where=tilted, model=loaded, key=key)


def alibi_section(loaded: LoadedModel, ids: list[int], tokens: list[str], *, own: bool, layer: int, head: int) -> None:
    """ALiBi's slopes and its bias over the sentence; for an ALiBi model (`own`), how the bias tilts its weights."""
    n_head = loaded.config.n_head
    effect = alibi_effect(loaded.model, ids, layer=layer)
    chart(alibi_slopes_chart(n_head), name="attention-alibi-slopes", model=loaded, key="ra_slopes")
    st.caption(alibi_slopes_sentence(effect.slopes))
    lowest = float(effect.bias[head].min()) if len(ids) > 1 else 0.0
    lowest = lowest if lowest < 0 else -1.0  # one token: a single cell at distance 0, bias 0; a colour bar of −1 … 0
    chart(matrix_panels([(f"bias, head {head + 1}", effect.bias[head])], tokens=tokens, value_name="bias",
                        title=f"ALiBi bias: −{effect.slopes[head]:.3g} × distance",
                        zmin=lowest, zmax=0.0, colorscale=BIAS_COLOURS), name="attention-alibi-bias", model=loaded, key="ra_bias")
    st.caption(("Zero on the diagonal, more negative the further back the key is; above the diagonal the causal mask "
                "hides keys.\n" if len(ids) > 1 else "One token, so one cell: the token's bias on itself, at distance 0, "
                "is 0. A longer sentence shows the penalty growing.\n")
               + "The penalty grows linearly with distance, with no table: it works at any length.")
    if own:
        tilt_panels(loaded, tokens, effect.without_bias, effect.with_bias, layer=layer, head=head, key="ra_tilt")
        st.caption(TILT + "\n"
                   + ("The bias shifts weight towards recent tokens, more strongly in heads with larger slopes."
                      if len(ids) > 1 else "With one token there is only itself to attend to, so the bias changes "
                      "nothing here: type a longer sentence in the sidebar."))


def bias_curves_section(loaded: LoadedModel, *, layer: int, head: int) -> None:
    """The model's own bias against distance, per head, beside ALiBi's lines."""
    scheme = loaded.model.scheme
    curves = bias_curves(loaded.model, layer=layer)
    chart(bias_curves_recipe(layer=layer, label=scheme.label, colour=scheme.colour), name="attention-bias-curves",
          model=loaded, key="ra_bias_curves")
    st.caption(bias_curves_sentence(curves, head=head, trained=loaded.trained))


def own_bias_section(loaded: LoadedModel, ids: list[int], tokens: list[str], *, layer: int, head: int) -> None:
    """A learned bias over the sentence, and how it tilts the attention weights."""
    effect = bias_effect(loaded.model, ids, layer=layer)
    reach = float(abs(effect.bias[head]).max()) if len(ids) > 1 else 0.0
    reach = reach if reach >= 1e-3 else 1.0  # one cell, or a bias still near zero: no colour bar in millionths
    chart(matrix_panels([(f"bias, head {head + 1}", effect.bias[head])], tokens=tokens, value_name="bias",
                        title=f"{loaded.model.scheme.label}: its bias over this sentence, layer {layer + 1}", zmin=-reach,
                        zmax=reach, colorscale=DIVERGING), name="attention-own-bias", model=loaded, key="ra_own_bias")
    st.caption("Row = query, column = key; red raises a score, blue lowers it; above the diagonal the causal mask hides keys.")
    tilt_panels(loaded, tokens, effect.without_bias, effect.with_bias, layer=layer, head=head, key="ra_own_tilt")
    st.caption(TILT + look_back_sentence(effect, head=head))
