"""Inside the model: where position lives, layer by layer, and what each head does with it."""
import streamlit as st

from lpos import ui
from lpos.analysis.heads import DOMINANT_SHARE, LOCAL_FRACTION, heads_reading
from lpos.analysis.lengths import output_count, uniform_guess_sentence
from lpos.analysis.probes import PENALTIES
from lpos.analysis.scheme_views import crossing_chance
from lpos.analysis.streaming import NOISE_ERRORS, SINK_TOKENS, WINDOWS, sink_reading, sink_summary
from lpos.figures.inside import distance_profile_figure, sink_gain_figure, streaming_figure
from lpos.ui import coverage, inside
from lpos.ui.attention import grouping_sentence, head_label
from lpos.ui.selection import scheme_models
from lpos.ui.export import chart

HAVIV = ("Haviv et al. (2022), “Transformer Language Models without Positional Encodings Still Learn Positional "
         "Information”, [arXiv:2203.16634](https://arxiv.org/abs/2203.16634)")
XIAO = ("Xiao et al. (2023), “Efficient Streaming Language Models with Attention Sinks”, "
        "[arXiv:2309.17453](https://arxiv.org/abs/2309.17453)")

selection = ui.selection()
st.title("Inside the model")
st.caption("The other pages show position going in: rows added, queries rotated, scores biased or counted. This one "
           "looks at where it ends up: in which layer a linear read-out finds it, what each attention head does with it, and "
           "whether the models lean on the first token as an attention sink. All of it runs on held-out text, not "
           "the sidebar sentence: a probe needs thousands of tokens.")

offered, dropped = inside.texts_for(selection.model)  # encoded with the model's own tokenizer
if len(offered) > 1:
    source = st.radio("Text", list(offered), key="inside_text", horizontal=True,
                      help="Stories no model was trained on: the app's own story, and the held-out stories of the "
                           "training corpus (the text the model cards' losses are measured on) when it is on this machine.")
else:  # one choice is no choice: say it instead of offering it
    source = next(iter(offered))
    st.markdown(f"Text: **{source}** (no model was trained on it; the training corpus's held-out stories are not "
                "on this machine).")
chosen = offered[source]
if dropped[source]:
    st.caption(f"{dropped[source]:,} character{'s' if dropped[source] != 1 else ''} of this text "
               f"{'are' if dropped[source] != 1 else 'is'} not in {selection.model.tokenizer.name} and "
               f"{'were' if dropped[source] != 1 else 'was'} left out.")
models = scheme_models(selection)
sidebar_model = next(m for m in models if m.scheme == selection.scheme)

where, portraits_tab, sink_tab = st.tabs(["Where position lives", "Head portraits", "The sink, tested"],
                                         key="inside_tab", on_change="rerun")


@st.fragment
def where_position_lives() -> None:
    try:
        view = inside.probe_view(selection, chosen)
    except ValueError as error:
        st.warning(f"The probes cannot run on this model: {error}.", icon=":material/warning:")
        return
    for column, key, panel in zip(st.columns(len(view.figures), gap="small"), ("inside_probes", "inside_probes_2"),
                                  view.figures):
        chart(panel, name=key, where=column, model=sidebar_model, key=key)  # side by side; a phone stacks them
    st.caption(f"Measured: for each residual stream, a ridge regression fitted on {view.fitted:,} tokens "
               f"and scored on {view.scored:,} tokens of other windows of {view.window} tokens (windows: "
               f"{inside.windows_used(chosen, windows=(view.fitted + view.scored) // view.window, length=view.window)}), "
               "predicting each "
               f"token's position in its {view.window}-token window (top) and how many tokens back the "
               "last sentence end (. ! ? or a newline) was (bottom). R² 1 is a perfect read-out, 0 no better than the "
               "mean, below 0 worse than the mean on new windows (a probe fitted to chance patterns). The penalty is "
               f"picked per probe on held-out windows, from {PENALTIES[0]:.0e} to {PENALTIES[-1]:.0e} times the mean "
               "eigenvalue of XᵀX (hover a point to see it and the mean error in tokens).")
    if not view.trained:
        st.info("No shipped checkpoint is installed yet, so only untrained models are drawn.", icon=":material/hourglass_empty:")
    st.markdown("**What the lines show**")
    for line in view.reading:
        st.markdown(f"- {line}")
    st.caption(f"Reference: {HAVIV}. A linear probe finds only what is written linearly; a low R² does not "
               "prove the position is absent.")


@st.fragment
def head_portraits() -> None:
    config = sidebar_model.model.config
    whole = inside.draws_whole(sidebar_model.model)
    left, right = st.columns(2)
    layer = left.selectbox("Layer", range(1, config.n_layer + 1), key=f"inside_layer_{config.n_layer}",
                           help=("The layer of the head whose attention by distance is drawn below (the grid shows "
                                 "every layer)." if whole else f"The layer whose heads the grid and the profile below "
                                 f"show: a {config.n_layer}-layer model is portrayed one layer at a time.")
                           + " Layers are numbered from 1, as on every page.")
    head = right.selectbox("Head", range(config.n_head), key=f"inside_head_{config.n_head}",
                           format_func=lambda h: head_label(sidebar_model.model, h),
                           help="Its average attention by distance, beside the same layer and head of every scheme.")
    try:
        shown = inside.portraits(models, chosen)
    except ValueError as error:
        st.warning(f"The heads cannot be measured on this model: {error}.", icon=":material/warning:")
        return
    chart(inside.head_grid(models, chosen, sidebar=selection.scheme, layer=None if whole else layer),
          name="inside-heads", model=sidebar_model, key="inside_heads")
    mine = shown[selection.scheme]
    st.caption(("" if whole else f"Layer {layer} of {config.n_layer} (pick another above), every model's "
                f"{config.n_head} heads. ")
               + f"Measured on {mine.queries:,} query tokens per head ({mine.queries // (mine.window - 1)} windows of "
               f"{mine.window} tokens: "
               f"{inside.windows_used(chosen, windows=mine.queries // (mine.window - 1), length=mine.window)}; query 0 "
               "can only look at itself and is left out). A head is named "
               f"after a token when it puts at least {DOMINANT_SHARE:.0%} of its attention there; otherwise “local” "
               f"(mean distance under {LOCAL_FRACTION * mine.window:g} tokens) or “broad”. A cell shows the share "
               "that named its head, or “d” and its mean distance; hover it for all four numbers.")
    if grouping := grouping_sentence(sidebar_model.model):
        st.caption(grouping)
    if (limit := coverage.trained_rows(sidebar_model)) is not None and limit < mine.window:
        st.caption(f"{sidebar_model.label} trained on windows of at most {limit} tokens: in these {mine.window}-token "
                   f"windows the table rows it adds at positions {limit}–{mine.window - 1} never trained, so its "
                   "heads are measured partly on inputs it never saw in training.")
    shown_layer = None if whole else layer  # a deep model's readings: the layer shown
    for line in heads_reading(inside.in_layer(mine, shown_layer), scheme=f"{selection.scheme} · {sidebar_model.label}"
                              + ("" if whole else f", layer {layer} of {config.n_layer}")):
        st.markdown(f"- {line}")
    sinks = {s: inside.in_layer(p, shown_layer).table["first token share"].max() for s, p in shown.items()}
    st.markdown(f"Largest first-token share per scheme{' over all its heads' if whole else f' in layer {layer}'}: "
                + ", ".join(f"{s} {v:.2f}" for s, v in sinks.items()) + ".")

    profiles = {s: p.profiles[layer - 1, head] for s, p in shown.items()
                if layer <= p.profiles.shape[0] and head < p.profiles.shape[1]}
    chart(distance_profile_figure(profiles, layer=layer, head=head, window=mine.window), name="inside-distance-profile", model=sidebar_model, key="inside_profile")
    st.caption("Mean weight a query puts on the key that many tokens back, over every query that has one; the dotted "
               "line is what an even spread over the prefix gives. Head numbers are arbitrary across models, except "
               "in ALiBi, where head h always has the same slope (head 0 the steepest): its bias alone multiplies the "
               "weight d tokens back by e^(−slope × d).")
    table = mine.table if whole else mine.table[mine.table["layer"] == layer]
    with st.expander("The numbers, every head of the sidebar model" if whole else
                     f"The numbers, every head of layer {layer} of the sidebar model", icon=":material/table:"):
        st.dataframe(table.round(3), hide_index=True, key="inside_head_table",  # three digits, as rounded: never 0.0380
                     column_config={c: st.column_config.NumberColumn(format="%.3f") for c in table.columns
                                    if table[c].dtype.kind == "f"})


@st.fragment
def sink_tested() -> None:
    window = st.select_slider("Window W (tokens)", WINDOWS, value=64, key="inside_window",
                              help=f"How many recent tokens each prediction sees; {WINDOWS[-1]} + {SINK_TOKENS} kept "
                                   "tokens fill the learned table's 128 rows.")
    with st.spinner(f"Streaming the text through windows of {window} tokens…"):
        mine = inside.sink_test(sidebar_model, chosen, window=window)
    if isinstance(mine, str):
        st.warning(f"{sidebar_model.label} cannot stream at this window: {mine}", icon=":material/straighten:")
    else:
        left, right = st.columns([3, 2])
        chart(streaming_figure(mine, label=f"{selection.scheme} · {sidebar_model.label}"), name="inside-streaming", where=left, model=sidebar_model, key="inside_stream")
        left.caption(f"Measured on {inside.first_tokens(chosen, len(mine.alone) + 1)}: each token is predicted from "
                     f"(a) the {window} tokens before it alone, or (b) the first {SINK_TOKENS} tokens of the text "
                     "followed by those tokens, each run as a fresh sequence so positions start at 0 (as a rolling "
                     "cache re-indexes them). Left of the dashed line both see the whole prefix and agree.")
        right.markdown("**The mean past the first window**")
        for line in sink_reading({selection.scheme: sink_summary(mine)}, window=window)[:1]:
            right.markdown(f"- {line}")
        if not selection.model.trained:
            right.caption(f"An untrained model's loss sits near {uniform_guess_sentence(selection.model.model)}, an even "
                          f"guess over its {output_count(selection.model.model):,} tokens, whatever it reads: a difference here "
                          "comes from random weights, not from anything learned. Pick a shipped model in the sidebar.")
    every = st.expander("Every scheme: which one does the sink help?", key="inside_every_scheme", on_change="rerun",
                        icon=":material/compare_arrows:")
    with every:
        if every.open:
            every_scheme(window)
    compared = len(models)
    st.caption(f"Reference: {XIAO}. A gain counts only outside its noise band, {NOISE_ERRORS} standard errors of the "
               f"mean per-token difference: {compared} schemes are compared at once, and if none had an effect, at "
               f"least one would cross a band of two standard errors by chance {crossing_chance(2, compared):.0%} of "
               f"the time, one of {NOISE_ERRORS} {crossing_chance(NOISE_ERRORS, compared):.0%}.")


def every_scheme(window: int) -> None:
    results = inside.sink_tests(models, chosen, window=window)
    summaries = {s: sink_summary(r) for s, r in results.items() if not isinstance(r, str)}
    left, right = st.columns([2, 3])
    chart(sink_gain_figure(summaries, sink=SINK_TOKENS), name="inside-sink-gain-every-scheme", where=left, key="inside_sink_gain")
    tokens = {len(r.alone) + 1 for r in results.values() if not isinstance(r, str)}
    left.caption(f"Each model streams {'; or '.join(inside.first_tokens(chosen, t) for t in sorted(tokens))}, as "
                 "above; a bar is the mean loss saved per prediction past the first window, with its noise band.")
    for line in sink_reading(summaries, window=window):
        right.markdown(f"- {line}")
    for scheme, note in ((s, r) for s, r in results.items() if isinstance(r, str)):
        right.caption(f"{scheme}: {note}")


with where:
    if where.open:
        where_position_lives()
with portraits_tab:
    if portraits_tab.open:
        head_portraits()
with sink_tab:
    if sink_tab.open:
        sink_tested()
