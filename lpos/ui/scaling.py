"""RoPE scaling, sections 1 to 3 of the Stretching-the-context page: losses and attention under
PI, NTK-aware and YaRN, keyed by model, text, method and factor; the figures, which do not depend
on the sidebar sentence, built once per input (a new sentence reruns the page: it rebuilds none of
them); and the sections that draw them. Each figure is drawn from a Recipe (lpos.figures.export) with the
precomputed scores bound in, so its "Data and code" shows the Python that scores them again.

The sections rescale one model that rotates queries and keys (`rope_model`): the selected one
when it is a trained one (a Llama, say: its own base and training length), else the first shipped
one; the shipped models of the schemes that place positions without rotating and without a last
row (`references`: sinusoidal and ALiBi among them) are drawn beside it when they speak its tokens.
"""
from __future__ import annotations

import re

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
import torch

from lpos import checkpoints, corpus, precomputed
from lpos.analysis import rescaling, stretch
from lpos.analysis.lengths import training_length
from lpos.figures.export import Recipe, Ref, Step, step
from lpos.figures.stretch import (attention_profile_figure, division_figure, scaled_loss_figure,
                                 wavelength_methods_figure)
from lpos.positions import AS_TRAINED, REGISTRY, ROPE_METHODS, RopeScaling, applied_factor, schemes_with
from lpos.ui.caching import cache_resource
from lpos.ui.export import chart, run_recipe
from lpos.ui.models import LoadedModel, label, load_offered, shipped_card
from lpos.ui.selection import Selection
from lpos.ui.stored import Progress, computed, progress

STORY = precomputed.STRETCH_STORY
HELD_OUT = precomputed.STRETCH_HELD_OUT
FIGURES = 32  # per function: factors × texts, or factors × layers × measures

def rope_model(selected: LoadedModel) -> LoadedModel | None:
    """The model sections 1 to 3 rescale: the selected model when it is a trained model whose scheme
    rotates queries and keys (a Llama from the shared folder, an upload), else the shipped model of
    the first such scheme (None when neither)."""
    if selected.model.scheme.shows("rotation") and selected.trained:
        return selected
    name = next((name for name in schemes_with("rotation") if name in checkpoints.available()), None)
    if name is None:
        return None
    model, meta = load_offered(name)
    return LoadedModel(name, label(name), model, meta)


def references() -> list[str]:
    """The shipped models drawn beside the rescaled one, in registry order: those of the schemes that
    place positions without rotating them (a table, sinusoids, a bias, counts) and read any length."""
    return [name for name, scheme in REGISTRY.items() if scheme.views and not scheme.shows("rotation")
            and name in checkpoints.available() and shipped_card(name).max_input_length is None]


def left_off_sentence(rope: LoadedModel) -> str:
    """Which shipped models section 1 leaves off and why, from the models themselves ("" when none is)."""
    if not speaks_gpt2(rope):
        return (f" Only {rope.label}'s own curves are drawn: the shipped models read GPT-2's tokens, so they cannot "
                "score the same text.")
    ended = {name: shipped_card(name).max_input_length for name in REGISTRY if name in checkpoints.available()}
    ended = {name: rows for name, rows in ended.items() if rows is not None}
    return "".join(f" The {name} model has no row past {rows:,} and is left off (see Length extrapolation)."
                   for name, rows in ended.items())


def rope_length(rope: LoadedModel) -> int:
    """The length `rope` was trained on: what its rescaling stretches."""
    return training_length(rope.meta, rope.model)


def speaks_gpt2(rope: LoadedModel) -> bool:
    """Whether `rope` reads GPT-2's tokens, as the shipped references (and their held-out stream) do."""
    return rope.tokenizer.is_gpt2


@cache_resource(max_entries=16, show_spinner="Reading the held-out stories…")
def text_chunks(rope: LoadedModel, text: str) -> torch.Tensor | None:
    """A text every curve is scored on, as chunks of CHUNK + 1 of `rope`'s tokens: the story's first
    chunk, or EVAL_CHUNKS chunks spread over the held-out stream (None when its corpus is not here,
    or the model speaks other tokens than the stream's GPT-2, or the story is too short in them)."""
    if speaks_gpt2(rope):
        return precomputed.stretch_chunks(text, {} if text == STORY else rope.meta)
    if text != STORY:
        return None
    story = torch.tensor(rope.tokenizer.encode_known(corpus.story())[0])
    return stretch.chunks(story, count=1) if len(story) > stretch.CHUNK else None


def _losses(model: LoadedModel, method: str, factor: float, text: str, rope: LoadedModel, progress: Progress) -> dict[int, dict]:
    """One curve's chunk_losses: `model` under `method`, scored on `text` in `rope`'s tokens, rescaled from `rope`'s
    training length."""
    # the shipped models' are precomputed; a shared-folder model's are kept on disk once scored, an upload's in memory
    return computed(model, precomputed.LOSSES, method=method, factor=factor, chunks=text_chunks(rope, text),
                    train_length=rope_length(rope), progress=progress,
                    doing=f"Scoring {text.lower()} at 128 to 1,024 tokens: {worded(model.config.position, method, factor)}")


def worded(scheme: str, method: str, factor: float) -> str:
    """A curve's name as a progress bar says it: a rotating model's curve without rescaling says so."""
    name = stretch.curve_name(scheme, method, factor)
    return f"{name}, not rescaled" if method == AS_TRAINED.name and REGISTRY[scheme].shows("rotation") else name


def variable(name: str) -> str:
    """A method's or model's name as a Python variable of a recipe ("as-trained" -> "as_trained")."""
    return re.sub(r"\W", "_", name)


def scaling_step(method: str, factor: float, train_length: int) -> tuple[list[Step], dict[str, Ref]]:
    """The step that builds `method`'s RopeScaling (none as trained), and the keyword that hands it to a model."""
    if method == AS_TRAINED.name:
        return [], {}
    return ([step(f"{variable(method)}_scaling", RopeScaling, method, factor, train_length)],
            {"rope_scaling": Ref(f"{variable(method)}_scaling")})


def loss_steps(rope: LoadedModel, factor: float, *, text: str) -> tuple[list[Step], dict[str, tuple[str, LoadedModel, str, float]]]:
    """The steps that score every curve of one loss figure (lpos.figures.export): `rope` under each method at
    `factor`, then the shipped references when they read the same tokens; and by curve name, the step's name, the
    model, the method and the factor."""
    train_length = rope_length(rope)
    steps = [step("chunks", stretch.story_chunk, tokenizer=Ref("tokenizer")) if text == STORY else
             step("chunks", stretch.held_out_chunks, Ref("meta"))]
    curves = {}
    for method in ROPE_METHODS:
        scaled = applied_factor(method, factor)
        made, scaling = scaling_step(method, scaled, train_length)
        steps += [*made, step(f"{variable(method)}_losses", stretch.chunk_losses, Ref("model"), Ref("chunks"), **scaling)]
        curves[stretch.curve_name(rope.scheme, method, scaled)] = (f"{variable(method)}_losses", rope, method, scaled)
    for name in references() if speaks_gpt2(rope) else []:
        var = variable(name)
        steps += [step(f"{var}_model, {var}_card", checkpoints.load, name),
                  step(f"{var}_losses", stretch.chunk_losses, Ref(f"{var}_model"), Ref("chunks"))]
        curves[stretch.curve_name(name)] = (f"{var}_losses", LoadedModel.shipped(name), AS_TRAINED.name, 1.0)
    return steps, curves


@cache_resource(max_entries=FIGURES, show_spinner=False)
def _loss_view(rope: LoadedModel, shipped: tuple[str, ...], factor: float, text: str) -> tuple[go.Figure, Recipe, str] | None:
    if text_chunks(rope, text) is None:
        return None
    steps, curves = loss_steps(rope, factor, text=text)
    with progress(len(curves), "curve") as bar:
        tables = {curve: _losses(model, method, scaled, text, rope, bar) for curve, (_, model, method, scaled) in curves.items()}
    frame, train_length = stretch.loss_frame(tables, text=text), rope_length(rope)
    recipe = Recipe((*steps, step("frame", stretch.loss_frame,
                                  {curve: Ref(name) for curve, (name, *_) in curves.items()}, text=text),
                     step("fig", scaled_loss_figure, Ref("frame"), train_length=train_length,
                          title=f"{text}: {int(frame['tokens'].max()):,} predictions at every length")))
    figure = run_recipe(recipe, rope, frame=frame)  # the scores precomputed: only the figure is built here
    return figure, recipe, stretch.loss_reading(frame, train_length=train_length, factor=factor)


def loss_view(rope: LoadedModel, factor: int, *, text: str) -> tuple[go.Figure, Recipe, str] | None:
    """Section 1's figure, the recipe that redraws it and its reading for one text; None when the text is not
    available for `rope`."""
    return _loss_view(rope, tuple(checkpoints.available()), float(factor), text)


def trained_scaling_steps(scaling: RopeScaling | None) -> tuple[list[Step], dict[str, Ref]]:
    """The step that builds a config's own rescaling (none without one), and the keyword that hands it on."""
    if scaling is None:
        return [], {}
    return ([step("trained_scaling", RopeScaling, scaling.method, scaling.factor, scaling.original_length,
                  scaling.low_frequency_factor, scaling.high_frequency_factor)], {"trained_scaling": Ref("trained_scaling")})


def wavelength_view(head: int, *, factor: int, train_length: int, base: float, scheme: str, share: float | None = None,
                    trained_scaling: RopeScaling | None = None) -> tuple[Recipe, str]:
    """Section 2: each pair's wavelength under every method at RoPE base `base` for a head of the rotating `scheme`
    (turning `share` of its columns; as trained under the config's `trained_scaling`), as a recipe
    (lpos.figures.export), and YaRN's regions in words."""
    waves = rescaling.wavelength_frame(head, base, factor=factor, original_length=train_length, scheme=scheme,
                                       share=share, trained_scaling=trained_scaling)
    made, trained = trained_scaling_steps(trained_scaling)
    return (Recipe((*made, step("waves", rescaling.wavelength_frame, head, base, factor=factor,
                                original_length=train_length, scheme=scheme, share=share, **trained),
                    step("fig", wavelength_methods_figure, Ref("waves"),
                         original_length=train_length, factor=factor))),
            rescaling.wavelength_reading(waves, original_length=train_length, factor=factor,
                                         trained_scaled=trained_scaling is not None))


def division_view(head: int, *, factor: int, train_length: int, base: float, scheme: str,
                  share: float | None = None, trained_scaled: bool = False) -> tuple[Recipe, str]:
    """Section 2's second figure: which pairs each method leaves, divides or blends, as a recipe, and in words."""
    frame = rescaling.division_frame(head, base, factor=factor, original_length=train_length, scheme=scheme, share=share)
    return (Recipe((step("shares", rescaling.division_frame, head, base, factor=factor,
                         original_length=train_length, scheme=scheme, share=share),
                    step("fig", division_figure, Ref("shares"), factor=factor))),
            rescaling.division_reading(frame, factor=factor, trained_scaled=trained_scaled))


def attention_profiles(rope: LoadedModel, factor: float) -> dict[str, pd.DataFrame]:
    """Section 3's measures of `rope` under every method (the shipped model's precomputed, any other's kept once read)."""
    ids = precomputed.profile_ids() if speaks_gpt2(rope) else text_chunks(rope, STORY)[0, :stretch.CHUNK].tolist()
    out = {}
    with progress(len(ROPE_METHODS), "method") as bar:
        for method in ROPE_METHODS:
            out[stretch.curve_name(rope.scheme, method, factor)] = computed(
                rope, precomputed.PROFILE, method=method, factor=applied_factor(method, factor), ids=ids,
                train_length=rope_length(rope), progress=bar,  # precomputed for the shipped model
                doing=f"Reading {len(ids):,} tokens through {rope.config.n_layer} layers: {worded(rope.scheme, method, factor)}")
    return out


def attention_recipe(rope: LoadedModel, factor: float, *, layer: int, measure: str) -> Recipe:
    """Section 3's figure as a recipe (lpos.figures.export): the story read under every method."""
    train_length, steps = rope_length(rope), [step("ids", stretch.story_window, tokenizer=Ref("tokenizer"))]
    for method in ROPE_METHODS:
        made, scaling = scaling_step(method, applied_factor(method, factor), train_length)
        steps += [*made, step(f"{variable(method)}_profile", stretch.attention_profile, Ref("model"), Ref("ids"), **scaling)]
    profiles = {stretch.curve_name(rope.scheme, method, factor): Ref(f"{variable(method)}_profile") for method in ROPE_METHODS}
    return Recipe((*steps, step("fig", attention_profile_figure, profiles, layer=layer,
                                measure=measure, train_length=train_length)))


@cache_resource(max_entries=FIGURES, show_spinner=False)
def attention_view(rope: LoadedModel, factor: int, *, layer: int, measure: str) -> tuple[go.Figure, Recipe, str]:
    """Section 3: one layer's attention measure along 1,024 tokens under every method, the recipe that redraws
    it, and its reading."""
    profiles, train_length = attention_profiles(rope, float(factor)), rope_length(rope)
    recipe = attention_recipe(rope, float(factor), layer=layer, measure=measure)
    given = {f"{variable(method)}_profile": profiles[stretch.curve_name(rope.scheme, method, float(factor))] for method in ROPE_METHODS}
    return (run_recipe(recipe, rope, **given), recipe,
            stretch.profile_reading(profiles, layer=layer, train_length=train_length))


def loss_panel(rope: LoadedModel, text: str, factor: int) -> None:
    view = loss_view(rope, factor, text=text)
    if view is None:
        st.info("The held-out stream needs the training corpus (shared/data) and a model that reads its GPT-2 tokens; "
                "neither holds here." if text != STORY else
                f"The built-in story is shorter than {stretch.CHUNK + 1:,} of this model's tokens, so there is no "
                "chunk to score.", icon=":material/info:")
        return
    figure, recipe, reading = view
    plot_column, reading_column = st.columns([3, 2])
    chart(figure, recipe=recipe, name=f"stretch-loss-{text}", where=plot_column, model=rope, key=f"stretch_loss_{text}")
    reading_column.markdown(reading)


@st.fragment
def scaling_sections(rope: LoadedModel | None, selection: Selection) -> None:
    """Sections 1 to 3, under one factor control: using it reruns only them."""
    if rope is None:
        st.info("No shipped RoPE checkpoint is installed yet (checkpoints/rope.pt), and the selected model is not a "
                "trained RoPE model, so there is nothing to rescale. Sections 4 and 5 below work with whatever is "
                "installed.", icon=":material/hourglass_empty:")
        return
    train_length = rope_length(rope)
    st.markdown(f"Sections 1 to 3 rescale **{rope.label}**" + (
        ", the model in the sidebar." if rope.key == selection.model.key else
        ": the model in the sidebar is not a trained RoPE model. Pick a RoPE model there to rescale that one instead."))
    factor = st.radio("Scaling factor (target length ÷ training length)", [2, 4, 8], index=1, horizontal=True,
                      key="stretch_factor", format_func=lambda f: f"×{f} ({f * train_length:,} tokens" + (
                          f"; losses read to {stretch.CHUNK:,})" if f * train_length > stretch.CHUNK else ")"))

    measured = train_length < stretch.CHUNK  # every text is read in chunks of 1,024 tokens
    section_1 = st.container()  # filled after section 2, which scores nothing: a model without stored
    wavelengths(rope, factor, train_length)  # scores (an upload) shows a chart while section 1's are computed
    with section_1:
        losses_by_length(rope, factor, train_length)
    if measured:
        past_the_wall(rope, factor)


def losses_by_length(rope: LoadedModel, factor: int, train_length: int) -> None:
    """Section 1: each method's loss against evaluation length, on the story and (folded) the held-out stream."""
    st.subheader("1. Loss against evaluation length")
    measured = train_length < stretch.CHUNK
    if not measured:
        st.info(f"This model was trained on {train_length:,} tokens, at least the {stretch.CHUNK:,} this page reads, so "
                "sections 1 and 3 would measure nothing past its training length; section 2 holds for any length.",
                icon=":material/info:")
    else:
        loss_panel(rope, STORY, factor)
    held_out = st.expander(f"The same on the held-out stream: {stretch.EVAL_CHUNKS} × 1,024 tokens of the stories "
                           "held out from training", key="stretch_held_out_open", on_change="rerun")
    if held_out.open and measured:  # closed, it computes nothing: opening it reruns this fragment
        with held_out:
            loss_panel(rope, HELD_OUT, factor)
    st.caption("Each text is cut into chunks of 1,024 tokens and every chunk into windows of L tokens, so every length "
               "scores the same predictions and a line moves only because the model reads more context. These are the "
               "methods without their fine-tune: what a short fine-tune at the longer length would change is not "
               "measured here." + left_off_sentence(rope))


def wavelengths(rope: LoadedModel, factor: int, train_length: int) -> None:
    """Section 2: which RoPE pairs turn fully inside the training window, under each method."""
    config = rope.config
    st.subheader("2. Which pairs turn fully inside the training window")
    head, trained = config.head_size, config.layer_scalings[0] if config.layer_scalings else None  # layer 1's
    recipe, reading = wavelength_view(head, factor=factor, train_length=train_length, base=config.rope_base,
                                      scheme=config.position, share=config.rope_share, trained_scaling=trained)
    chart(recipe, name="stretch-wavelengths", model=rope, key="stretch_wavelengths")
    st.markdown(reading)
    st.caption(rescaling.pairs_sentence(head, train_length=train_length, base=config.rope_base, scheme=rope.model.scheme,
                                      layers=config.n_layer))
    recipe, reading = division_view(head, factor=factor, train_length=train_length, base=config.rope_base,
                                    scheme=config.position, share=config.rope_share, trained_scaled=trained is not None)
    chart(recipe, name="stretch-division", model=rope, key="stretch_division")
    st.markdown(reading)
    st.page_link("pages/sinusoids.py", label="The same wavelengths for the sinusoidal table", icon=":material/waves:")


def past_the_wall(rope: LoadedModel, factor: int) -> None:
    """Section 3: the attention logits and entropy past the training length, under each method."""
    config = rope.config
    st.subheader("3. What goes wrong past the wall")
    left, right = st.columns(2)
    layer = left.selectbox("Layer", range(config.n_layer), key="stretch_layer", format_func=lambda i: str(i + 1))
    measure = right.radio("Measure", ["max_logit", "entropy"], horizontal=True, key="stretch_measure",
                          format_func={"max_logit": "largest attention logit", "entropy": "attention entropy"}.get)
    figure, recipe, reading = attention_view(rope, factor, layer=layer, measure=measure)
    chart(figure, recipe=recipe, name="stretch-attention", model=rope, key="stretch_attention")
    st.markdown(reading)
    st.caption("The first 1,024 tokens of the built-in story, one forward per method; the largest logit is over heads "
               "and keys, the entropy the mean over heads, both smoothed over 16 positions. Position Interpolation's "
               "diagnosis is that positions past training can give outsized scores: the lines above say whether this "
               "model's largest logit rises past the wall. Entropy grows with the number of keys a query can see, so "
               "compare it with an even spread, not with itself; YaRN's own scale multiplies q and k by "
               "0.1·ln(factor) + 1, so its logits are larger by design.")
