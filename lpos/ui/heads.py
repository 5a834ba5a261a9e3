"""The Inside page's second tab, head portraits: what every attention head of every scheme's model
does with position, cached per (model, text), the grid of them built once per (models, text), and
the tab that draws the grid, one head's attention by distance and the sidebar model's numbers.
"""
from __future__ import annotations

from dataclasses import replace

import plotly.graph_objects as go
import streamlit as st

from lpos import precomputed
from lpos.analysis import heads
from lpos.figures.export import Recipe, Ref, step
from lpos.figures.inside import distance_profile_figure, head_grid_figure, head_layer_figure
from lpos.model import GPT
from lpos.ui.attention import grouping_sentence, head_label
from lpos.ui.coverage import trained_rows
from lpos.ui.export import chart
from lpos.ui.inside import Text, cache_figure_per_text, cache_per_text, windows_used
from lpos.ui.inside_recipes import compared, portrayed, whole_text
from lpos.ui.models import LoadedModel
from lpos.ui.selection import Selection
from lpos.ui.stored import computed

GRID_LAYERS = 6  # a model with more layers has its heads drawn one chosen layer at a time


@cache_per_text
def head_portraits(model: LoadedModel, chosen: Text) -> heads.HeadPortraits:
    return computed(model, precomputed.PORTRAITS, parts=chosen.parts,
                    doing=f"Measuring the attention of {model.config.n_layer} layers × {model.config.n_head} heads")


def portraits(models: list[LoadedModel], chosen: Text) -> dict[str, heads.HeadPortraits]:
    """Each model's head portraits, by scheme."""
    with st.spinner(f"Measuring every head of {len(models)} models…"):
        return {m.scheme: head_portraits(m, chosen) for m in models}


def draws_whole(model: GPT) -> bool:
    """Whether the head grid draws every layer of `model` at once (else one chosen layer)."""
    return model.config.n_layer <= GRID_LAYERS


def compared_heads(models: list[LoadedModel], chosen: Text, shown: dict[str, heads.HeadPortraits], *, sidebar: str,
                   lines: dict[str, str], draw) -> tuple[go.Figure, Recipe | None]:
    """A figure of every model's head portraits (`shown`, by scheme) drawn by `draw`, and the recipe that redraws
    it (lpos.ui.inside_recipes), the `sidebar` scheme's model read as the snippet opens it; `lines` names each
    scheme's line."""
    opened = next(m for m in models if m.scheme == sidebar)
    return compared([(m.scheme, lines[m.scheme], m) for m in models], {lines[s]: p for s, p in shown.items()},
                    chosen=chosen, tokens=whole_text(chosen),
                    measure=portrayed, draw=draw, opened=opened)


@cache_figure_per_text
def head_grid(models: list[LoadedModel], chosen: Text, *, sidebar: str, layer: int | None = None
              ) -> tuple[go.Figure, Recipe | None]:
    """The head grid of every model, the `sidebar` scheme's line marked, built once per text: every
    layer, or only `layer` (1-based) of each model when given; and the recipe that redraws it."""
    shown = portraits(models, chosen)
    grid = head_grid_figure if layer is None else head_layer_figure
    options = {} if layer is None else {"layer": layer}
    return compared_heads(models, chosen, shown, sidebar=sidebar,
                          lines={s: f"{s} (sidebar)" if s == sidebar else s for s in shown},
                          draw=lambda found: [step("fig", grid, found, **options)])


def in_layer(portraits: heads.HeadPortraits, layer: int | None) -> heads.HeadPortraits:
    """`portraits` with its table cut to one layer (1-based), or whole when `layer` is None."""
    return portraits if layer is None else replace(portraits, table=portraits.table[portraits.table["layer"] == layer])


def grid_captions(model: LoadedModel, chosen: Text, portrait: heads.HeadPortraits, *, layer: int | None) -> list[str]:
    """What the head grid shows, for the sidebar model's `portrait` (one `layer`, or every layer when None):
    what it was measured on, how heads are named, how query heads share key heads, and table rows that never
    trained inside the windows."""
    config, window = model.config, portrait.window
    windows = portrait.queries // (window - 1)
    said = [("" if layer is None else f"Layer {layer} of {config.n_layer} (pick another above), every model's "
             f"{config.n_head} heads. ")
            + f"Measured on {portrait.queries:,} query tokens per head ({windows} windows of {window} tokens: "
            f"{windows_used(chosen, windows=windows, length=window)}; query 0 can only look at itself and is left out). "
            f"A head is named after a token when it puts at least {heads.DOMINANT_SHARE:.0%} of its attention there; "
            f"otherwise “local” (mean distance under {heads.LOCAL_FRACTION * window:g} tokens) or “broad”. A cell shows "
            "the share that named its head, or “d” and its mean distance; hover it for all four numbers."]
    if grouping := grouping_sentence(model.model):
        said.append(grouping)
    if (limit := trained_rows(model)) is not None and limit < window:
        said.append(f"{model.label} trained on windows of at most {limit} tokens: in these {window}-token windows the "
                    f"table rows it adds at positions {limit}–{window - 1} never trained, so its heads are measured "
                    "partly on inputs it never saw in training.")
    return said


@st.fragment
def head_portraits_tab(selection: Selection, models: list[LoadedModel], chosen: Text, sidebar_model: LoadedModel) -> None:
    """The second tab: the layer and head controls, every scheme's head grid, what it shows and the sinks."""
    config = sidebar_model.config
    whole = draws_whole(sidebar_model.model)
    left, right = st.columns(2)
    layer = left.selectbox("Layer", range(1, config.n_layer + 1), key=f"inside_layer_{config.n_layer}",
                           help=("The layer of the head whose attention by distance is drawn below (the grid shows "
                                 "every layer)." if whole else f"The layer whose heads the grid and the profile below "
                                 f"show: a {config.n_layer}-layer model is portrayed one layer at a time.")
                           + " Layers and heads are numbered from 1, as on every page.")
    head = right.selectbox("Head", range(config.n_head), key=f"inside_head_{config.n_head}",
                           format_func=lambda h: head_label(sidebar_model.model, h),
                           help="Its average attention by distance, beside the same layer and head of every scheme.")
    try:
        shown = portraits(models, chosen)
    except ValueError as error:
        st.warning(f"The heads cannot be measured on this model: {error}.", icon=":material/warning:")
        return
    grid, recipe = head_grid(models, chosen, sidebar=selection.scheme, layer=None if whole else layer)
    chart(grid, recipe=recipe, name="inside-heads", model=sidebar_model, key="inside_heads")
    mine, shown_layer = shown[selection.scheme], None if whole else layer  # a deep model's readings: the layer shown
    for line in grid_captions(sidebar_model, chosen, mine, layer=shown_layer):
        st.caption(line)
    for line in heads.heads_reading(in_layer(mine, shown_layer), scheme=f"{selection.scheme} · {sidebar_model.label}"
                                    + ("" if whole else f", layer {layer} of {config.n_layer}")):
        st.markdown(f"- {line}")
    shares = {s: in_layer(p, shown_layer).table["first token share"].max() for s, p in shown.items()}
    st.markdown(heads.first_share_sentence(shares, layer=shown_layer))
    head_profile(models, chosen, shown, sidebar_model, layer=layer, head=head, whole=whole)


def head_profile(models: list[LoadedModel], chosen: Text, shown: dict[str, heads.HeadPortraits],
                 sidebar_model: LoadedModel, *, layer: int, head: int, whole: bool) -> None:
    """One head's attention by distance beside the same head of every scheme, and the sidebar model's numbers."""
    mine = shown[sidebar_model.scheme]
    profile, recipe = compared_heads(
        models, chosen, shown, sidebar=sidebar_model.scheme, lines={s: s for s in shown},
        draw=lambda found: [step("profiles", heads.distance_profiles, found, layer=layer - 1, head=head),
                            step("fig", distance_profile_figure, Ref("profiles"), layer=layer,
                                 head=head, window=mine.window)])
    chart(profile, recipe=recipe, name="inside-distance-profile", model=sidebar_model, key="inside_profile")
    st.caption("Mean weight a query puts on the key that many tokens back, over every query that has one; the dotted "
               "line is what an even spread over the prefix gives. Head numbers are arbitrary across models, except "
               "in ALiBi, where head h always has the same slope (head 1 the steepest): its bias alone multiplies the "
               "weight d tokens back by e^(−slope × d).")
    table = mine.table if whole else mine.table[mine.table["layer"] == layer]
    with st.expander("The numbers, every head of the sidebar model" if whole else
                     f"The numbers, every head of layer {layer} of the sidebar model", icon=":material/table:"):
        st.dataframe(table.round(3), hide_index=True, key="inside_head_table",  # three digits, as rounded: never 0.0380
                     column_config={c: st.column_config.NumberColumn(format="%.3f") for c in table.columns
                                    if table[c].dtype.kind == "f"})
