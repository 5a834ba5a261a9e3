"""Positions in attention: every scheme that acts inside attention, each through the views it shows
(a rotation of queries and keys, a bias against distance, counts from the content). A scheme that
acts elsewhere is said in one line, and the two with no weights (RoPE, ALiBi) can be tried on any model."""
import streamlit as st

from lpos import ui
from lpos.analysis.attention import rope_step_sentence, rotating_pair
from lpos.analysis.biases import MAX_DISTANCE, QUERY_POSITIONS, look_back
from lpos.analysis.counts import count_sentence, listed, units_so_far
from lpos.analysis.heads import head_sentence
from lpos.figures.attention import BIAS_COLOURS, matrix_panels, rope_arrow_figure
from lpos.figures.common import DIVERGING
from lpos.figures.counts import running_count_figure
from lpos.positions import REGISTRY
from lpos.tokenizer import visible
from lpos.ui import attention
from lpos.ui.export import chart

selection = ui.selection()
model, config = selection.model.model, selection.model.model.config
scheme = model.scheme
fixed_bias = scheme.shows("bias") and not scheme.parameter_count(config)  # no weights: the same lines on any model
inside = [s for s in REGISTRY.values() if s.in_attention]
st.title("Positions in attention")
st.caption(" ".join(f"{s.label} {s.acts}." for s in inside)
           + (" None of them adds anything to the token rows." if not any(s.adds_rows for s in inside) else ""))
ids = ui.usable_ids(selection)
raw_tokens = selection.model.tokenizer.token_strings(ids)  # the model's own tokens
tokens = [visible(t) for t in raw_tokens]
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
    chart(rope_arrow_figure(rotating_pair(query, pair=pair, positions=steps, base=config.rope_base), pair=pair,
                            token=tokens[position]), name="attention-rope-arrow", model=selection.model, key="ra_arrow")
    st.caption(("This token's query in " if own else "This model's query (it does not rotate it) in ")
               + f"layer {layer + 1}, head {head}, before rotation, placed at positions 0, 1, 2, …\n"
               + rope_step_sentence(pair, head_dim, base=config.rope_base, steps=steps))
    if config.n_kv_head and config.n_kv_head < config.n_head:  # grouped-query attention (Llama)
        st.caption(f"This model has {config.n_kv_head} key heads for its {config.n_head} query heads: each key head "
                   f"serves {config.n_head // config.n_kv_head} query heads in a row, so query head {head} is "
                   f"compared with key head {model.transformer.h[layer].attn.key_head(head)}.")
    chart(attention.rope_angles(head_dim, base=config.rope_base), name="attention-rope-angles", model=selection.model, key="ra_angles")
    st.caption(f"Each of the head's {head_dim // 2} pairs turns at its own speed: pair 0 one radian per position, "
               f"the last almost not at all.\nA geometric ladder like the sinusoidal table's, but over the head's "
               f"{head_dim} columns ({head_dim // 2} pairs, each {config.rope_base ** (-2 / head_dim):.2f}× the speed of the one "
               f"before), not the model's {config.n_embd}: RoPE rotates each head's q and k separately.")
    length = max(len(ids), 64)
    offsets = [offset for offset in (0, 1, 4, 16) if offset < length]
    flat, _ = attention.offset_scores_view(query, key, offsets=offsets, length=length)
    chart(flat, name="attention-offset-scores", model=selection.model, key="ra_flat")
    st.caption("The token's query at position m against its own key at n = m − offset, after rotation.\n"
               "Every line is flat: moving both by the same amount changes nothing, only m − n counts.")


def tilt_panels(without, with_, *, layer: int, head: int, key: str) -> None:
    """Softmax of the same scores without the bias and with it, side by side (stacked on a phone)."""
    plain, tilted = st.columns(2)
    name = f"layer {layer + 1}, head {head}"
    chart(matrix_panels([(name, without[head])], tokens=tokens, value_name="weight", zmin=0.0, zmax=1.0,
                        title="Without the bias"), name=f"attention-{key}-without-bias", where=plain, model=selection.model, key=f"{key}_plain")
    chart(matrix_panels([(name, with_[head])], tokens=tokens, value_name="weight", zmin=0.0, zmax=1.0,
                        title="How the bias tilts attention: with it"), name=f"attention-{key}-with-bias", where=tilted, model=selection.model, key=key)


def alibi_section(own: bool, layer: int, head: int) -> None:
    effect = attention.alibi_effect(model, ids, layer=layer)
    chart(attention.alibi_slopes_chart(config.n_head), name="attention-alibi-slopes", model=selection.model, key="ra_slopes")
    st.caption(f"For {config.n_head} heads the slopes are {', '.join(f'{s:.3g}' for s in effect.slopes)}.\n"
               "Steep heads mark far keys down most, so they lean hardest towards recent tokens; gentle heads hardly "
               "mind distance.")
    lowest = float(effect.bias[head].min()) if len(ids) > 1 else 0.0
    lowest = lowest if lowest < 0 else -1.0  # one token: a single cell at distance 0, bias 0; a colour bar of −1 … 0
    chart(matrix_panels([(f"bias, head {head}", effect.bias[head])], tokens=tokens, value_name="bias",
                        title=f"ALiBi bias: −{effect.slopes[head]:.3g} × distance",
                        zmin=lowest, zmax=0.0, colorscale=BIAS_COLOURS), name="attention-alibi-bias", model=selection.model, key="ra_bias")
    st.caption(("Zero on the diagonal, more negative the further back the key is; above the diagonal the causal mask "
                "hides keys.\n" if len(ids) > 1 else "One token, so one cell: the token's bias on itself, at distance 0, "
                "is 0. A longer sentence shows the penalty growing.\n")
               + "The penalty grows linearly with distance, with no table: it works at any length.")
    if own:
        tilt_panels(effect.without_bias, effect.with_bias, layer=layer, head=head, key="ra_tilt")
        st.caption("First: softmax of the same query·key scores without the bias. Then with it, as the model does.\n"
                   + ("The bias shifts weight towards recent tokens, more strongly in heads with larger slopes."
                      if len(ids) > 1 else "With one token there is only itself to attend to, so the bias changes "
                      "nothing here: type a longer sentence in the sidebar."))


def bias_curves_section(layer: int, head: int) -> None:
    """The model's own bias against distance, per head, beside ALiBi's lines."""
    curves = attention.bias_curves(model, layer=layer)
    chart(attention.bias_curves_recipe(layer=layer, label=scheme.label, colour=scheme.colour), name="attention-bias-curves", model=selection.model, key="ra_bias_curves")
    if curves.same_in_every_layer:
        where = ("It has no weights, and the bias is the same in every layer." if not curves.parameters else
                 f"Its {curves.parameters:,} learned numbers serve every layer: the bias is the same in each layer.")
    else:
        where = (f"Each layer has a bias of its own ({curves.parameters:,} learned numbers in all): this is "
                 f"layer {layer + 1}'s; choose another layer above.")
    if curves.depends_on_query:
        shares = [f"{listed([str(q) for q in g])} share one line" if len(g) > 1 else f"{g[0]} has its own"
                  for g in curves.same_line]
        when = (f"Queries at {listed(shares)}: the bias depends on where the query sits, not only on the "
                f"distance. Each line reaches back to its farthest query's position or distance {MAX_DISTANCE}.")
    else:
        when = f"It depends on the distance alone: queries at {listed([str(q) for q in QUERY_POSITIONS])} get the same line."
    changes, last = curves.changes(head), curves.last_change(head)
    steps = (f"Head {head}'s bias is the same at every distance 0–{MAX_DISTANCE}." if not changes else
             f"Head {head}'s bias changes value {changes} time{'s' if changes > 1 else ''} over distances 0–{MAX_DISTANCE}"
             + (f", the last time at distance {last}: it stays the same from there on." if last < MAX_DISTANCE else
                ", up to the last distance drawn."))
    dashed = ("" if curves.is_alibi else "\nDashed: ALiBi's fixed line for the same head, for comparison; the y axis "
              "fits this model's own bias, so an ALiBi line steeper than that leaves the panel.")
    start = " Untrained: the learned bias is still its random start." if curves.parameters and not selection.model.trained else ""
    st.caption(f"{where} {when} {steps}{start}{dashed}")


def own_bias_section(layer: int, head: int) -> None:
    """A learned bias over the sentence, and how it tilts the attention weights."""
    effect = attention.bias_effect(model, ids, layer=layer)
    reach = float(abs(effect.bias[head]).max()) if len(ids) > 1 else 0.0
    reach = reach if reach >= 1e-3 else 1.0  # one cell, or a bias still near zero: no colour bar in millionths
    chart(matrix_panels([(f"bias, head {head}", effect.bias[head])], tokens=tokens, value_name="bias",
                        title=f"{scheme.label}: its bias over this sentence, layer {layer + 1}", zmin=-reach,
                        zmax=reach, colorscale=DIVERGING), name="attention-own-bias", model=selection.model, key="ra_own_bias")
    st.caption("Row = query, column = key; red raises a score, blue lowers it; above the diagonal the causal mask hides keys.")
    tilt_panels(effect.without_bias, effect.with_bias, layer=layer, head=head, key="ra_own_tilt")
    distances = look_back(effect)
    measured = ("" if distances is None else f"\nWith it head {head}'s queries look back {distances[0][head]:.2f} tokens "
                f"on average; without it, {distances[1][head]:.2f}.")
    st.caption("First: softmax of the same query·key scores without the bias. Then with it, as the model does." + measured)


def counts_section(layer: int) -> None:
    """What each head counts: every token's position from the last token, the running count, and a measurement."""
    found = attention.contextual_counts(model, ids, layer=layer)
    chart(attention.counts_recipe(ids, layer=layer, tokens=tokens), name="attention-counts", model=selection.model, key="ra_counts")
    st.caption(f"Row = head, column = an earlier token; the colour is that token's position as the last token counts "
               f"it: the sum of the head's gates (each between 0 and 1) from that token to the last. Counts stop at "
               f"{found.npos_max - 1}, the last row of the layer's count table.")
    chart(running_count_figure(found, tokens=tokens, references=units_so_far(raw_tokens)), name="attention-running-counts", model=selection.model, key="ra_count_lines")
    st.caption("Each head's count from the first token up to each token, as that token's query counts it. Grey: how "
               "many tokens, word starts and sentence ends there are so far; a head that counts words runs along the "
               "words line, one that counts full stops along the sentences line.")
    summary = attention.count_table(selection.model, ids, layer=layer)
    st.dataframe(summary.table.style.format({"per token": "{:.2f}", "tokens": "{:.3f}", "words": "{:.3f}",
                                             "sentences": "{:.3f}"}, na_rep="—"), hide_index=True, key="ra_count_table")
    untrained = " Untrained: the gates have not learned what to count yet." if not selection.model.trained else ""
    st.caption(f"Correlation (r) of each head's count from the last token back with the number of tokens, words and "
               f"sentence ends back; per token: the whole text's count divided by its tokens. Layer {layer + 1}, "
               f"measured now.\nOn the built-in story ({summary.windows} windows of {summary.window} tokens, each "
               f"read alone): {count_sentence(summary, text='story')} On your text: "
               f"{count_sentence(summary, text='sentence')}{untrained}")


@st.fragment
def attention_views() -> None:
    """The layer and head boxes and every figure they drive: changing one reruns only this."""
    left, right = st.columns(2)
    layer = left.selectbox("Layer", range(config.n_layer), key=f"ra_layer_{config.n_layer}",
                           format_func=lambda i: str(i + 1))  # 0-based index, shown 1-based as on every page
    head = right.selectbox("Head", range(config.n_head), key=f"ra_head_{config.n_head}",
                           format_func=lambda h: attention.head_label(model, h))  # every head of the chosen layer
    if not scheme.in_attention:
        st.info(f"This model's scheme, {scheme.label}, does not act inside attention: it {scheme.acts}. Below: this "
                "model's attention, then what RoPE and ALiBi would do instead.", icon=":material/info:")

    if scheme.shows("rotation"):
        st.header(f"{scheme.label} in this model")
        rope_section(True, layer, head)
    if scheme.shows("bias"):
        st.header(f"{scheme.label} in this model")
        bias_curves_section(layer, head)
        if fixed_bias:
            alibi_section(True, layer, head)
        else:
            own_bias_section(layer, head)
    if scheme.shows("contextual"):
        st.header(f"{scheme.label} in this model: what each head counts")
        counts_section(layer)

    st.header("This model's attention weights")
    weights = attention.attention_maps(model, ids, layer=layer)
    chart(matrix_panels([(f"layer {layer + 1}, head {head}", weights[head])], tokens=tokens, value_name="weight",
                        zmin=0.0, zmax=1.0, title=f"Attention weights, {selection.model.label}"), name="attention-weights", model=selection.model, key="ra_attention")
    st.caption("Each row is one query token's attention over the keys up to itself; each row sums to 1.\n"
               + ("Untrained: random, small scores spread the weights evenly over the visible keys"
                  + (", tilted towards recent keys by the bias." if fixed_bias else ".")
                  if not selection.model.trained else head_sentence(weights, layer=layer + 1, head=head)))

    # closed, an expander computes nothing: opening it reruns this fragment, which then draws it
    if not scheme.shows("rotation"):
        rope_box = st.expander("What RoPE would do (not what this model does)", key="ra_rope_open", on_change="rerun")
        if rope_box.open:
            with rope_box:
                rope_section(False, layer, head)
    if not fixed_bias:
        alibi_box = st.expander("What ALiBi would do (not what this model does)", key="ra_alibi_open", on_change="rerun")
        if alibi_box.open:
            with alibi_box:
                alibi_section(False, layer, head)


attention_views()
