"""RoPE & ALiBi: the two schemes that act inside attention instead of adding rows."""
import streamlit as st

from lpos import ui
from lpos.analysis.attention import rotating_pair
from lpos.analysis.heads import head_sentence
from lpos.figures.attention import BIAS_COLOURS, matrix_panels, rope_arrow_figure
from lpos.tokenizer import visible
from lpos.ui import attention

INSTEAD = {
    "learned": "The learned scheme adds a trained row per position to each token row before the first block; "
               "attention itself is position-free and reads position from those rows.",
    "sinusoidal": "The sinusoidal scheme adds a fixed sin/cos row per position to each token row before the first "
                  "block (see the Sinusoids page); attention itself is position-free.",
    "none": "This model gets no position information: attention sees only the causal mask, which hides later tokens.",
}

selection = ui.selection()
model, config = selection.model.model, selection.model.model.config
st.title("RoPE & ALiBi: positions inside attention")
st.caption("RoPE rotates queries and keys by their position, so q·k depends on m − n. ALiBi subtracts "
           "slope × distance from each head's scores. Neither adds anything to the token rows.")
ids = ui.usable_ids(selection)
tokens = [visible(t) for t in selection.model.tokenizer.token_strings(ids)]  # the model's own tokens
head_dim = config.n_embd // config.n_head


@st.fragment
def rope_section(own: bool, layer: int, head: int) -> None:
    """RoPE on one token's query, with its own token, pair and length controls."""
    if head_dim % 2:
        st.info(f"RoPE needs an even head size; this model's heads have {head_dim} columns.", icon=":material/info:")
        return
    a, b, c = st.columns(3)
    position = a.selectbox("Token", range(len(ids)), format_func=lambda p: f"{p}: {tokens[p]}", key=f"ra_token_{len(ids)}")
    pair = b.slider("Column pair of the head", 0, head_dim // 2 - 1, 0, key=f"ra_pair_{head_dim}")
    steps = c.slider("Positions to draw", 2, 32, 8, key="ra_steps")
    query, key = attention.query_and_key(model, ids, layer=layer, head=head, position=position)
    st.plotly_chart(rope_arrow_figure(rotating_pair(query, pair=pair, positions=steps, base=config.rope_base), pair=pair,
                                      token=tokens[position]), key="ra_arrow")
    st.caption(("This token's query in " if own else "This model's query (it does not rotate it) in ")
               + f"layer {layer + 1}, head {head}, before rotation, placed at positions 0, 1, 2, …\n"
               "The arrow keeps its length and turns by the same angle per step: position is an angle, not an added row.")
    if config.n_kv_head and config.n_kv_head < config.n_head:  # grouped-query attention (Llama)
        st.caption(f"This model has {config.n_kv_head} key heads for its {config.n_head} query heads: each key head "
                   f"serves {config.n_head // config.n_kv_head} query heads in a row, so query head {head} is "
                   f"compared with key head {model.transformer.h[layer].attn.key_head(head)}.")
    st.plotly_chart(attention.rope_angles(head_dim, base=config.rope_base), key="ra_angles")
    st.caption(f"Each of the head's {head_dim // 2} pairs turns at its own speed: pair 0 one radian per position, "
               f"the last almost not at all.\nA geometric ladder like the sinusoidal table's, but over the head's "
               f"{head_dim} columns ({head_dim // 2} pairs, each {config.rope_base ** (-2 / head_dim):.2f}× the speed of the one "
               f"before), not the model's {config.n_embd}: RoPE rotates each head's q and k separately.")
    length = max(len(ids), 64)
    offsets = [offset for offset in (0, 1, 4, 16) if offset < length]
    flat, _ = attention.offset_scores_view(query, key, offsets=offsets, length=length)
    st.plotly_chart(flat, key="ra_flat")
    st.caption("The token's query at position m against its own key at n = m − offset, after rotation.\n"
               "Every line is flat: moving both by the same amount changes nothing, only m − n counts.")


def alibi_section(own: bool, layer: int, head: int) -> None:
    effect = attention.alibi_effect(model, ids, layer=layer)
    st.plotly_chart(attention.alibi_slopes_chart(config.n_head), key="ra_slopes")
    st.caption(f"For {config.n_head} heads the slopes are {', '.join(f'{s:.3g}' for s in effect.slopes)}.\n"
               "Steep heads look only at the last few tokens; gentle heads can reach far back.")
    lowest = float(effect.bias[head].min()) or -1.0
    st.plotly_chart(matrix_panels([(f"bias, head {head}", effect.bias[head])], tokens=tokens, value_name="bias",
                                  title=f"ALiBi bias: −{effect.slopes[head]:.3g} × distance",
                                  zmin=lowest, zmax=0.0, colorscale=BIAS_COLOURS), key="ra_bias")
    st.caption("Zero on the diagonal, more negative the further back the key is; above the diagonal the causal mask hides keys.\n"
               "The penalty grows linearly with distance, with no table: it works at any length.")
    if own:
        plain, tilted = st.columns(2)  # side by side on a wide screen, stacked on a phone
        plain.plotly_chart(matrix_panels([(f"layer {layer + 1}, head {head}", effect.without_bias[head])], tokens=tokens,
                                         value_name="weight", zmin=0.0, zmax=1.0, title="Without the bias"),
                           key="ra_tilt_plain")
        tilted.plotly_chart(matrix_panels([(f"layer {layer + 1}, head {head}", effect.with_bias[head])], tokens=tokens,
                                          value_name="weight", zmin=0.0, zmax=1.0,
                                          title="How the bias tilts attention: with it"),
                            key="ra_tilt")
        st.caption("First: softmax of the same query·key scores without the bias. Then with it, as the model does.\n"
                   "The bias shifts weight towards recent tokens, more strongly in heads with larger slopes.")


@st.fragment
def attention_views() -> None:
    """The layer and head boxes and every figure they drive: changing one reruns only this."""
    left, right = st.columns(2)
    layer = left.selectbox("Layer", range(config.n_layer), key=f"ra_layer_{config.n_layer}",
                           format_func=lambda i: str(i + 1))  # 0-based index, shown 1-based as on every page
    head = right.selectbox("Head", range(config.n_head), key=f"ra_head_{config.n_head}",
                           format_func=lambda h: attention.head_label(model, h))  # every head of the chosen layer
    if selection.scheme in INSTEAD:
        st.info(INSTEAD[selection.scheme] + " Below: this model's attention, then what RoPE and ALiBi would do instead.",
                icon=":material/info:")

    if selection.scheme == "rope":
        st.header("RoPE in this model")
        rope_section(True, layer, head)
    elif selection.scheme == "alibi":
        st.header("ALiBi in this model")
        alibi_section(True, layer, head)

    st.header("This model's attention weights")
    weights = attention.attention_maps(model, ids, layer=layer)
    st.plotly_chart(matrix_panels([(f"layer {layer + 1}, head {head}", weights[head])], tokens=tokens, value_name="weight",
                                  zmin=0.0, zmax=1.0, title=f"Attention weights, {selection.model.label}"), key="ra_attention")
    st.caption("Each row is one query token's attention over the keys up to itself; each row sums to 1.\n"
               + ("Untrained: random, small scores spread the weights evenly over the visible keys"
                  + (", tilted towards recent keys by the bias." if selection.scheme == "alibi" else ".")
                  if not selection.model.trained else head_sentence(weights, layer=layer + 1, head=head)))

    # closed, an expander computes nothing: opening it reruns this fragment, which then draws it
    if selection.scheme != "rope":
        rope_box = st.expander("What RoPE would do (not what this model does)", key="ra_rope_open", on_change="rerun")
        if rope_box.open:
            with rope_box:
                rope_section(False, layer, head)
    if selection.scheme != "alibi":
        alibi_box = st.expander("What ALiBi would do (not what this model does)", key="ra_alibi_open", on_change="rerun")
        if alibi_box.open:
            with alibi_box:
                alibi_section(False, layer, head)


attention_views()
