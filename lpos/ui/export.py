"""Every chart of the app, drawn one way: Plotly's camera button downloads an SVG named after what
the chart shows (page, figure, scheme, model), and a folded "Data and code" control beside it gives
the chart's numbers as CSV and, where the page drew it from a recipe (lpos.figures.export), the
Python that redraws it. Where LPOS_PLOTLY_REACT is on, every chart is updated in place (lpos.ui.plotly_react):
the next run's figure under the same key is drawn into the same Plotly div, whether a new sentence or a
page's own control changed it.
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace

import plotly.graph_objects as go
import streamlit as st

from lpos import checkpoints
from lpos.checkpoints.reference import SHIPPED
from lpos.figures.export import Recipe, Ref, Step, figure_csv, file_name, public_name, step
from lpos.model import untrained_model
from lpos.ui.caching import cache_resource
from lpos.ui.models import LoadedModel, load_offered, untrained
from lpos.ui.plotly_react import in_place as drawn_in_place
from lpos.ui.plotly_react import plotly_react_chart

CONTROL = "Data and code"
FIGURES, LIFETIME = 64, 3600  # figures drawn from recipes kept, and for how many seconds nobody asked for one


def model_words(model: LoadedModel) -> tuple[str, str]:
    """The scheme and the model's name as a file name says them (an upload: its file's name, no digest)."""
    ref = model.ref
    return model.scheme, (ref.name or ref.kind).rsplit(".", 1)[0]


def snippet_model(model: LoadedModel) -> str | None:
    """What a snippet loads: a shipped model's name, "untrained", or None (a file of the learner's own)."""
    ref = model.ref
    if ref.is_untrained:
        return "untrained"
    return ref.name if ref.kind == SHIPPED else None


def model_steps(model: LoadedModel, name: str, *,
                opened: LoadedModel | None = None) -> tuple[list[Step], Ref, Ref | None] | None:
    """How a recipe reads `model`: the steps that load it and the Refs to it and its meta (None for an untrained
    model's). `opened` is the model the snippet's opening loads (model, meta); any other model is loaded as
    <name>_model: a shipped one by its name, an untrained one of GPT-2's shape by its scheme. None for a file of the
    learner's own or an untrained model of its shape, which no snippet can load by name."""
    if opened is not None and (model.key, model.scheme) == (opened.key, opened.scheme):
        return [], Ref("model"), Ref("meta")
    if model.ref.is_untrained and model.tokenizer.is_gpt2:
        return [step(f"{name}_model", untrained_model, model.scheme)], Ref(f"{name}_model"), None
    if model.ref.is_shipped:
        return ([step(f"{name}_model, {name}_meta", checkpoints.load, model.ref.name)], Ref(f"{name}_model"),
                Ref(f"{name}_meta"))
    return None


def held(recipe: Recipe, given: set[str]) -> dict:
    """What the recipe's steps that still have to run (beside `given`) and load a shipped model (by its name) or
    build an untrained one (by its scheme) would make, as the server already holds it: a snippet reads the file,
    the page does not read it again."""
    found = {}
    for s in recipe.needed(given):
        if s.function == public_name(checkpoints.load) and s.args and s.args[0] in checkpoints.available():
            found.update(zip(s.target.split(", "), load_offered(s.args[0])))
        elif s.function == public_name(untrained_model):
            found[s.target] = untrained(s.args[0])
    return found


def run_recipe(recipe: Recipe, model: LoadedModel | None = None, **given) -> go.Figure:
    """The figure a recipe draws, with the model's weights, meta and tokenizer to hand where a step that runs reads
    them (a shipped model is not loaded for a figure drawn from its stored results), the models the server holds
    (`held`), and `given` standing in for the steps of those names (results a page already holds: a precomputed view)."""
    offered = {} if model is None else {"model": lambda: model.model, "meta": lambda: model.meta,
                                        "tokenizer": lambda: model.tokenizer}
    read = recipe.reads(set(given) | set(offered))
    given = {**{name: get() for name, get in offered.items() if name in read}, **given}
    return recipe.run(**held(recipe, set(given) | set(offered)), **given)


@cache_resource(max_entries=FIGURES, ttl=LIFETIME, show_spinner=False)
def _drawn(recipe: Recipe, model: LoadedModel | None) -> go.Figure | list[go.Figure]:
    return run_recipe(recipe, model)


def drawn(recipe: Recipe, model: LoadedModel | None = None) -> go.Figure:
    """run_recipe, kept as built (st.plotly_chart only reads it). Recipes that differ only in the figure they pick
    share one run: a page's panels are built once, not once per panel."""
    if recipe.pick is None:
        return _drawn(recipe, model)
    return _drawn(replace(recipe, pick=None), model)[recipe.pick]


def chart(fig: go.Figure | Recipe, *, name: str, where=None, model: LoadedModel | None = None,
          recipe: Recipe | None = None, **kwargs) -> None:
    """st.plotly_chart with the SVG download named lpos-<name>[-<scheme>-<model>], then the chart's
    "Data and code" control. `fig` is a figure, or the Recipe the page draws it from (then the
    control shows the recipe as Python too); `recipe` is the Recipe a figure was drawn from
    elsewhere (run_recipe with precomputed results, or restyled), shown the same way. `name` is
    "page-figure", distinct on its page; `model` the model the chart shows and the recipe reads
    (none for a chart of no model); `kwargs` go to st.plotly_chart. Where LPOS_PLOTLY_REACT is on, the chart is
    drawn by lpos.ui.plotly_react under `key` (the only one of `kwargs` it reads; else the download's name),
    updated in place when the figure changes."""
    where = where or st
    if isinstance(fig, Recipe):
        recipe, fig = fig, drawn(fig, model if fig.names() else None)
    words = model_words(model) if model is not None else ()
    download = file_name(name, *words)
    config = {"toImageButtonOptions": {"format": "svg", "filename": download}}
    key = str(kwargs.get("key") or download)
    if drawn_in_place():
        with nullcontext() if where is st else where:  # the component writes where Streamlit writes next
            plotly_react_chart(fig, config=config, key=key)
    else:
        where.plotly_chart(fig, config=config, **kwargs)
    if not fig.data:  # a panel that only says why it is empty: no numbers to give, no figure to redraw
        return
    with where.popover(CONTROL, icon=":material/download:"):
        st.download_button("The numbers (CSV)", lambda: figure_csv(fig), file_name=f"{download}.csv", mime="text/csv",
                           key=f"{key}_csv", icon=":material/table:",
                           help="One row per point (a heatmap: per cell): series, x, y and the value.")
        if recipe is not None:
            st.caption("Python that redraws this figure with lpos (`pip install .` in this repository):")
            st.code(recipe.snippet(model=snippet_model(model) if model is not None else None,
                                   scheme=words[0] if words else None), language="python")
        else:
            st.caption("The camera button above the chart downloads it as SVG, for slides and papers.")
