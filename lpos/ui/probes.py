"""The Inside page's first tab, where position lives: linear probes of every layer of every scheme's
model, each cached per (model, text), the figure and its reading built once per (models, text), and
the tab that draws them.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from lpos import checkpoints, precomputed
from lpos.analysis import coverage, probes
from lpos.figures.inside import probe_figures
from lpos.model import GPT
from lpos.positions import SCHEMES
from lpos.tokenizer import GPT2, Tokenizer
from lpos.figures.export import Recipe, step
from lpos.ui.export import chart
from lpos.ui.inside import Text, cache_figure_per_text, cache_per_text, windows_used
from lpos.ui.inside_recipes import compared, probed, whole_text
from lpos.ui.models import LoadedModel, untrained_like
from lpos.ui.selection import Selection
from lpos.ui.stored import computed

HAVIV = ("Haviv et al. (2022), “Transformer Language Models without Positional Encodings Still Learn Positional "
         "Information”, [arXiv:2203.16634](https://arxiv.org/abs/2203.16634)")


@cache_per_text
def position_probes(model: GPT | LoadedModel, chosen: Text, _tokenizer: Tokenizer = GPT2) -> pd.DataFrame:
    # _tokenizer is not hashed: a model (named by its key) always speaks the same one
    return computed(model, precomputed.PROBES, parts=chosen.parts, tokenizer=_tokenizer,  # shipped, untrained: precomputed
                    doing=f"Fitting position probes on every layer, {chosen.parts[0][0]}")


def scheme_checkpoints() -> list[str]:
    """The shipped model of each scheme that has one (named after its scheme), in registry order."""
    return [scheme for scheme in SCHEMES if scheme in checkpoints.available()]


Panels = dict[str, list[tuple[str, str, LoadedModel]]]  # panel -> (name in a snippet, line name, model)


def panel_models(extra: LoadedModel | None) -> Panels:
    """The models of each panel, as (name in a snippet, line name, model): "trained", the shipped model of each
    scheme (and `extra`, the sidebar's model when it is none of them nor untrained), when there is one; "untrained",
    an untrained model of every scheme."""
    trained = [(scheme, scheme, LoadedModel.shipped(scheme))
               for scheme in scheme_checkpoints()]
    if extra is not None:
        trained.append(("sidebar", f"{extra.scheme} · {extra.label}", extra))
    fresh = [(f"untrained_{scheme}", scheme, LoadedModel.untrained_of(scheme))
             for scheme in SCHEMES]
    return {"trained": trained, "untrained": fresh} if trained else {"untrained": fresh}


def probe_panels(panels: Panels, chosen: Text) -> dict[str, dict[str, pd.DataFrame]]:
    """Probe frames by panel and line name."""
    with st.spinner(f"Probing every layer of {sum(map(len, panels.values()))} models…"):
        return {panel: {line: position_probes(m, chosen) for _, line, m in models}
                for panel, models in panels.items()}


@dataclass(frozen=True)
class ProbeView:
    """What the probe tab draws: the figures, the recipes that redraw them, the reading, and the sizes its caption
    states."""

    figures: list[go.Figure]  # one per panel ("trained" first when there is one), for columns a phone stacks
    recipes: list[Recipe | None]  # each figure's (lpos.figures.export); None where no snippet can load the models
    reading: list[str]
    fitted: int  # tokens each probe was fitted on
    scored: int  # tokens it was scored on
    window: int  # tokens per window
    trained: bool  # whether any trained model was probed


@cache_figure_per_text
def _probe_view(shipped: tuple[str, ...], extra: LoadedModel | None, chosen: Text) -> ProbeView:
    models = panel_models(extra)
    frames = probe_panels(models, chosen)
    trained, fresh = frames.get("trained", {}), frames["untrained"]
    drawn = [compared(panel, frames[name], chosen=chosen, tokens=whole_text(chosen), measure=probed, opened=extra,
                      draw=lambda lines, name=name: [step("figs", probe_figures, {name: lines})],
                      pick=0) for name, panel in models.items()]
    sample = next(iter(fresh.values())).iloc[0]
    limit = coverage.trained_rows(extra.meta, extra.model) if extra is not None else None
    limits = {f"{extra.scheme} · {extra.label}": limit} if limit is not None else {}
    return ProbeView([figure for figure, _ in drawn], [recipe for _, recipe in drawn],
                     probes.probe_reading(trained, fresh, limits=limits), int(sample["fitted"]), int(sample["scored"]),
                     int(sample["window"]), bool(trained))


@cache_figure_per_text
def _own_probe_view(model: LoadedModel, chosen: Text) -> ProbeView:
    """probe_view of a model on its own tokenizer (the shipped models cannot read its text): the model,
    and an untrained model of its shape and vocabulary for every scheme."""
    with st.spinner(f"Probing every layer of {len(SCHEMES) + model.trained} models…"):
        trained = {f"{model.scheme} · {model.label}": position_probes(model.model, chosen, model.tokenizer)} \
            if model.trained else {}
        fresh = {scheme: position_probes(untrained_like(model.model, model.key, scheme), chosen, model.tokenizer)
                 for scheme in SCHEMES}
    panels = {"trained": trained, "untrained": fresh} if trained else {"untrained": fresh}
    sample = next(iter(fresh.values())).iloc[0]
    limit = coverage.trained_rows(model.meta, model.model) if trained else None
    limits = {name: limit for name in trained} if limit is not None else {}
    return ProbeView(probe_figures(panels), [None] * len(panels), probes.probe_reading(trained, fresh, limits=limits),
                     int(sample["fitted"]), int(sample["scored"]), int(sample["window"]), bool(trained))


def probe_view(selection: Selection, chosen: Text) -> ProbeView:
    """The probe figure and its reading for the models probe_panels probes, built once per text
    and set of models (the sidebar's model counts only when it is neither shipped nor untrained)."""
    model = selection.model
    if not model.tokenizer.is_gpt2:
        return _own_probe_view(model, chosen)
    extra = model if model.trained and model.key not in scheme_checkpoints() else None
    return _probe_view(tuple(checkpoints.available()), extra, chosen)


@st.fragment
def where_position_lives(selection: Selection, chosen: Text, sidebar_model: LoadedModel) -> None:
    """The first tab: every scheme's probes side by side, what they were measured on, and what the lines show."""
    try:
        view = probe_view(selection, chosen)
    except ValueError as error:
        st.warning(f"The probes cannot run on this model: {error}.", icon=":material/warning:")
        return
    columns = st.columns(len(view.figures), gap="small")  # side by side; a phone stacks them
    for column, key, panel, recipe in zip(columns, ("inside_probes", "inside_probes_2"), view.figures, view.recipes):
        chart(panel, recipe=recipe, name=key, where=column, model=sidebar_model, key=key)
    windows = windows_used(chosen, windows=(view.fitted + view.scored) // view.window, length=view.window)
    st.caption(probes.method_sentence(fitted=view.fitted, scored=view.scored, window=view.window, windows=windows))
    if not view.trained:
        st.info("No shipped checkpoint is installed yet, so only untrained models are drawn.", icon=":material/hourglass_empty:")
    st.markdown("**What the lines show**")
    for line in view.reading:
        st.markdown(f"- {line}")
    st.caption(f"Reference: {HAVIV}. A linear probe finds only what is written linearly; a low R² does not "
               "prove the position is absent.")
