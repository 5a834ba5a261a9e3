"""The Inside page's third tab, the sink tested: each model streams the text through a window, with
and without the first tokens kept (cached per model, text and window), the sidebar model's losses
first and, once opened, every scheme's gain.
"""
from __future__ import annotations

import streamlit as st

from lpos import precomputed
from lpos.analysis import streaming
from lpos.figures.export import Recipe, Ref, step
from lpos.figures.inside import sink_gain_figure, streaming_figure
from lpos.ui.coverage import trained_rows
from lpos.ui.export import chart, run_recipe
from lpos.ui.inside import Text, cache_per_text, first_tokens, text_steps
from lpos.ui.inside_recipes import compared, streamed
from lpos.ui.models import LoadedModel
from lpos.ui.selection import Selection
from lpos.ui.stored import computed

XIAO = ("Xiao et al. (2023), “Efficient Streaming Language Models with Attention Sinks”, "
        "[arXiv:2309.17453](https://arxiv.org/abs/2309.17453)")


@cache_per_text
def _sink_test(model: LoadedModel, chosen: Text, window: int) -> streaming.SinkTest:
    return computed(model, precomputed.SINK, parts=chosen.parts, window=window,
                    doing=f"Streaming the text through windows of {window} tokens")


def sink_test(model: LoadedModel, chosen: Text, *, window: int) -> streaming.SinkTest | str:
    """The streaming test of one model, or why it cannot run (a window past a learned table's rows)."""
    try:
        return _sink_test(model, chosen, window)
    except ValueError as error:
        return str(error)


def streaming_recipe(model: LoadedModel, chosen: Text, *, window: int, label: str) -> Recipe:
    """One model's two streams over the text, as a recipe (lpos.figures.export)."""
    steps, parts = text_steps(chosen, streaming.streamed_tokens(model.model, window=window))
    return Recipe((*steps, step("ids", streaming.streamed_ids, Ref("model"), parts, window=window),
                   step("test", streaming.sink_test, Ref("model"), Ref("ids"), window=window),
                   step("fig", streaming_figure, Ref("test"), label=label)))


def sink_tests(models: list[LoadedModel], chosen: Text, *, window: int) -> dict[str, streaming.SinkTest | str]:
    with st.spinner(f"Streaming the text through windows of {window} tokens, {len(models)} models…"):
        return {m.name: sink_test(m, chosen, window=window) for m in models}


@st.fragment
def sink_tested(selection: Selection, models: list[LoadedModel], chosen: Text, sidebar_model: LoadedModel) -> None:
    """The third tab: the window control, the sidebar model's two streams, and every scheme's gain when opened."""
    window = st.select_slider("Window W (tokens)", streaming.WINDOWS, value=64, key="inside_window",
                              help=f"How many recent tokens each prediction sees; {streaming.WINDOWS[-1]} + "
                                   f"{streaming.SINK_TOKENS} kept tokens fill the learned table's 128 rows.")
    with st.spinner(f"Streaming the text through windows of {window} tokens…"):
        mine = sink_test(sidebar_model, chosen, window=window)
    if isinstance(mine, str):
        st.warning(f"{sidebar_model.label} cannot stream at this window: {mine}", icon=":material/straighten:")
    else:
        left, right = st.columns([3, 2])
        recipe = streaming_recipe(sidebar_model, chosen, window=window, label=f"{selection.scheme} · {sidebar_model.label}")
        chart(run_recipe(recipe, sidebar_model, test=mine), recipe=recipe, name="inside-streaming", where=left,
              model=sidebar_model, key="inside_stream")  # the streams precomputed: only the figure is built here
        left.caption(streaming.streaming_sentence(first_tokens(chosen, len(mine.alone) + 1), window=window))
        if (limit := trained_rows(sidebar_model)) is not None and window + streaming.SINK_TOKENS > limit:
            left.caption(f"{sidebar_model.label} trained on windows of at most {limit} tokens: with the "
                         f"{streaming.SINK_TOKENS} kept tokens its contexts reach position "
                         f"{window + streaming.SINK_TOKENS - 1}, so table rows {limit}–"
                         f"{window + streaming.SINK_TOKENS - 1} never trained.")
        right.markdown("**The mean past the first window**")
        for line in streaming.sink_reading({sidebar_model.name: streaming.sink_summary(mine)}, window=window)[:1]:
            right.markdown(f"- {line}")
        if not selection.model.trained:
            right.caption(streaming.untrained_sentence(selection.model.model))
    every = st.expander("Every scheme: which one does the sink help?", key="inside_every_scheme", on_change="rerun",
                        icon=":material/compare_arrows:")
    with every:
        if every.open:
            every_scheme(models, chosen, sidebar_model, window=window)
    st.caption(f"Reference: {XIAO}. " + streaming.noise_sentence(len(models)))


def every_scheme(models: list[LoadedModel], chosen: Text, sidebar_model: LoadedModel, *, window: int) -> None:
    """Every scheme's mean gain from the kept tokens, with its noise band, and what the bars say."""
    results = sink_tests(models, chosen, window=window)
    summaries = {s: streaming.sink_summary(r) for s, r in results.items() if not isinstance(r, str)}
    left, right = st.columns([2, 3])
    streamed_models = [m for m in models if m.name in summaries]
    figure, recipe = compared([(m.scheme, m.name, m) for m in streamed_models], summaries, chosen=chosen,
                              tokens=max((streaming.streamed_tokens(m.model, window=window) for m in streamed_models),
                                         default=0),
                              measure=streamed(window), opened=sidebar_model,
                              draw=lambda found: [step("fig", sink_gain_figure, found,
                                                       sink=streaming.SINK_TOKENS)])
    chart(figure, recipe=recipe, name="inside-sink-gain-every-scheme", where=left, model=sidebar_model,
          key="inside_sink_gain")
    tokens = {len(r.alone) + 1 for r in results.values() if not isinstance(r, str)}
    left.caption(f"Each model streams {'; or '.join(first_tokens(chosen, t) for t in sorted(tokens))}, as "
                 "above; a bar is the mean loss saved per prediction past the first window, with its noise band.")
    for line in streaming.sink_reading(summaries, window=window):
        right.markdown(f"- {line}")
    for name, note in ((s, r) for s, r in results.items() if isinstance(r, str)):
        right.caption(f"{name}: {note}")
