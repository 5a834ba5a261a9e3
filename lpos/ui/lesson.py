"""The lesson's live figures: one per step, each the view of the step's topic module (lpos.ui.*)
on the sidebar sentence, one sentence of measured numbers to go with it, and where the step has one
the recipe that redraws the figure (lpos.ui.lesson_recipes), which the page prints.

A step about one scheme uses that scheme's shipped model when the sidebar model is trained
(an untrained model of that scheme otherwise), so every step works whatever the sidebar holds.
"""
from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass

import plotly.graph_objects as go
import streamlit as st

from lpos import checkpoints
from lpos.analysis import embeddings as embedding_analysis
from lpos.analysis import lengths as length_analysis
from lpos.analysis import similarity as similarity_analysis
from lpos.analysis.scheme_views import bias_sentence
from lpos.analysis.biases import bias_lines
from lpos.analysis.counts import listed
from lpos.analysis.shuffle import order_blind_sentence
from lpos.figures.export import Recipe
from lpos.figures.scheme_views import bias_lines_figure
from lpos.lesson import STEPS
from lpos.ui import attention, coverage, embeddings, lengths, shuffle, similarity
from lpos.ui.caching import cache_resource
from lpos.ui.export import drawn, run_recipe
from lpos.ui.lesson_recipes import (PRESETS, bias_models, learned_band_recipe, mask_leaks_recipe, order_blind_recipe,
                                     position_rows_recipe, relative_bias_recipe, rope_offsets_recipe, shuffle_pair,
                                     sinusoid_distance_recipe, table_wall_recipe, train_short_recipe)
from lpos.ui.text import literal
from lpos.ui.models import LoadedModel, label, shipped_card
from lpos.ui.selection import Selection, model_for

LESSON_TOKENS = 48  # the lesson draws short sentences; a long paste is cut, with a note
LESSON_FIGURES = 128  # a class on one step with one link builds it once

Figure = tuple[go.Figure | str, str | None]  # the figure (step 1's: the chips' HTML) and its measured sentence


def step_from_url() -> tuple[int, str | None]:
    """The step the URL asks for (1-based) and a notice if the value was refused."""
    raw = st.query_params.get("step", "1")
    if raw.isdigit() and 1 <= int(raw) <= len(STEPS):
        return int(raw), None
    return 1, f"There is no step {raw[:20]!r}; the lesson has steps 1 to {len(STEPS)}, so it starts at 1."


def token_rows(sidebar: LoadedModel, model: LoadedModel, ids: list[int]) -> Figure:
    chips = embeddings.token_chips(sidebar, ids)
    n = len(ids)
    return chips, f"{n} token{'s' if n != 1 else ''}, so {n} row{'s' if n != 1 else ''} looked up."


def order_blind(sidebar: LoadedModel, model: LoadedModel, ids: list[int]) -> Figure:
    result = shuffle.shuffle_results([model], *shuffle_pair(ids, tokenizer=model.tokenizer))[0]
    return (run_recipe(order_blind_recipe(sidebar, model, ids), model, result=result),
            order_blind_sentence(result, literal=literal, tokenizer=model.tokenizer))


def position_rows(sidebar: LoadedModel, model: LoadedModel, ids: list[int]) -> Figure:
    view = embeddings.embedding_view(model, ids)
    repeats = embedding_analysis.repeated_tokens(view)
    said = (embedding_analysis.repeat_sentence(repeats[0], literal=literal) if repeats else
            "No token occurs more than once in your sentence; try “The dog saw the cat and the man”.")
    return run_recipe(position_rows_recipe(sidebar, model, ids), model, view=view), said


def table_wall(sidebar: LoadedModel, model: LoadedModel, ids: list[int]) -> Figure:
    rows = model.max_input_length
    try:
        model.model.check_length(rows + 1)
        said = ""
    except ValueError as error:
        said = f"First limit: at {rows + 1} tokens the model answers “{error}”"
    answer = randomized_sentence()
    short, full = coverage.short_window_model(model), coverage.full_window_model()
    if short is None or full is None:
        return drawn(table_wall_recipe(sidebar, model, ids)), (
            said + "\n\nThe second limit needs a shipped model trained on shorter windows; none is installed." + answer)
    drift = coverage.drift_view(short)
    losses = coverage.position_losses(short, full, opened=model)  # its recipe: table_wall_recipe
    return losses.figure, (f"{said}\n\nSecond limit, {short.label}: " + " ".join(drift[1] if drift else [])
                           + f"\n\n{losses.reading} (Text: {losses.text}.)" + answer)


def randomized_sentence() -> str:
    """The shipped table trained at random positions, as the answer to both limits ("" when none is installed)."""
    for name in checkpoints.available():
        card = shipped_card(name)
        if card.config.random_positions:
            window = length_analysis.training_length(card.meta, card)
            return (f"\n\nBoth answered: {label(name)} has a {card.max_input_length:,}-row table whose rows training "
                    f"read at random, {window} at a time, so it reads up to {card.max_input_length:,} tokens (Length "
                    "extrapolation shows its loss there).")
    return ""


def sinusoid_distance(sidebar: LoadedModel, model: LoadedModel, ids: list[int]) -> Figure:
    return drawn(sinusoid_distance_recipe(sidebar, model, ids)), \
        f"Width {model.config.n_embd}: three starting positions, one curve."


def rope_offsets(sidebar: LoadedModel, model: LoadedModel, ids: list[int]) -> Figure:
    query, key = attention.query_and_key(model.model, ids, layer=0, head=0, position=len(ids) - 1)
    figure, spread = attention.offset_scores_view(query, key, offsets=[0, 1, 4, 16], length=64)
    return figure, f"Largest change of a score along its line: {spread:.1e}."


def relative_bias(sidebar: LoadedModel, model: LoadedModel, ids: list[int]) -> Figure:
    """Every bias scheme's first-layer bias against distance, for the last query of a training window,
    each from the model the sidebar offers for it (shipped when the sidebar's is trained)."""
    models, reach = bias_models(sidebar)
    curves = {m.model.scheme.label: bias_lines(m.model, layer=0, query=reach, max_distance=reach) for m in models}
    return bias_lines_figure(curves, title=f"Each head's bias against distance, layer 1, query at position {reach}"), (
        bias_sentence(curves) + " Models: " + "; ".join(f"{m.model.scheme.label}, {m.label}" for m in models) + ".")


def learned_band(sidebar: LoadedModel, model: LoadedModel, ids: list[int]) -> Figure:
    rows = model.max_input_length
    _, structure = similarity.position_band(model, rows)
    return drawn(learned_band_recipe(sidebar, model, ids), model), band_sentence(model, structure, rows)


def _band(near: float, far: float | None) -> str:
    """How alike neighbouring rows are, read against rows 64 apart where the table has them: a level that rows
    64 apart share too is not nearness at that distance (a band hundreds of rows wide, or a direction every row
    shares: the map tells them apart, these two numbers do not)."""
    if far is None:
        return f"neighbouring rows have mean cosine {near:.2f}"
    said = f"neighbouring rows have mean cosine {near:.2f}, rows 64 apart {far:+.2f}"
    if near - far >= 0.2:
        return said + ": near rows are much more alike than far ones"
    if far >= 0.2:
        return (said + f": neighbours are only {near - far:.2f} more alike than rows 64 apart, which still share "
                f"{far:.2f}, so over 64 rows nearness hardly shows (the map shows the wider pattern)")
    return said + ": neighbours are hardly more alike than far rows"


def band_sentence(model: LoadedModel, structure: dict, rows: int) -> str:
    """Step 8's measured line: how alike neighbouring and far rows are, in numbers and words, and which of the
    drawn rows never trained (an untrained model's, or a short-window model's later rows)."""
    near, far = structure["cosine_at_1"], structure.get("cosine_at_64")
    said = f"{model.label}: {_band(near, far)}"
    said += f"; {similarity_analysis.neighbour_sentence(structure['neighbour_distance'], rows, indexed=not model.config.random_positions)}."
    limit = coverage.trained_rows(model)
    if not model.trained:
        said = ("This model is untrained, so its table is its step-0 table: both maps are random rows and neither "
                "has a band to find. " + said + " Pick a trained learned model in the sidebar to see what training draws.")
    elif limit is not None and limit < rows:
        said += (f" It trained on windows of at most {limit} tokens: rows {limit}–{rows - 1} never received a "
                 f"gradient and are still near their random start, so these numbers mix {limit} trained rows with {rows - limit} untrained ones")
        trained = similarity.band_structure(model, limit)  # the trained rows' own band
        said += f"; rows 0–{limit - 1} alone: {_band(trained['cosine_at_1'], trained.get('cosine_at_64'))}."
    return said + " The Training timeline page shows the band forming step by step."


def train_short(sidebar: LoadedModel, model: LoadedModel, ids: list[int]) -> Figure:
    """The cards' curves of the shipped models trained at one length (the first scheme's), never the sidebar
    model's block size; a model trained at another length is named and left out (step 4 shows it)."""
    cards = lengths.cards_at_one_length()
    if cards is None:
        return lengths.length_curves({}, train_length=model.config.block_size), "No shipped model card is installed."
    return lengths.length_curves(cards.tables, train_length=cards.train_length, unigram=cards.unigram), (  # the cards held
        length_analysis.worst_curve_sentence(cards.tables, train_length=cards.train_length, unigram=cards.unigram)
        + cards.left_out_sentence() + "\n\n"
        + length_analysis.length_reading(cards.tables, train_length=cards.train_length)
        + "\n\nThree published ways to stretch a RoPE model's rotations (PI, NTK-aware, YaRN), applied without "
        "fine-tuning and measured: "
        f"[Stretching the context]({same_view('stretch')}).")


def mask_leaks(sidebar: LoadedModel, model: LoadedModel, ids: list[int]) -> Figure:
    result = shuffle.shuffle_results([model], *shuffle_pair(ids, tokenizer=model.tokenizer))[0]
    return run_recipe(mask_leaks_recipe(sidebar, model, ids), model, result=result), (
        f"Layer 1 moved by {result.attention_change:.1e}, yet the full model's next-token distribution moved by a "
        f"total variation of {result.distribution_change:.3f} (top-1 {'unchanged' if result.same_top1 else 'changed'}).")


STEP_VIEWS: list[Callable[[LoadedModel, LoadedModel, list[int]], Figure]] = [
    token_rows, order_blind, position_rows, table_wall, sinusoid_distance, rope_offsets, relative_bias, learned_band,
    train_short, mask_leaks]
SENTENCE_STEPS = (1, 2, 3, 6, 10)  # the steps whose figure is drawn on the sidebar sentence (tests/pages/test_sentences.py)
SHUFFLE_STEPS = tuple(i + 1 for i, view in enumerate(STEP_VIEWS) if view in (order_blind, mask_leaks))  # shuffle_pair's
LAST_TOKEN_STEPS = (6,)  # of those, the steps that read only its last token (RoPE's query and key there)
RECIPES = {order_blind: order_blind_recipe, position_rows: position_rows_recipe, table_wall: table_wall_recipe,
           sinusoid_distance: sinusoid_distance_recipe, rope_offsets: rope_offsets_recipe,
           relative_bias: relative_bias_recipe, learned_band: learned_band_recipe, train_short: train_short_recipe,
           mask_leaks: mask_leaks_recipe}  # the views whose figure has a recipe (lpos.ui.lesson_recipes): the page prints it


@dataclass(frozen=True)
class LessonFigure:
    figure: go.Figure | str  # step 1's: the token chips, escaped HTML for st.html
    measured: str  # one sentence of measured numbers
    model: LoadedModel  # the step's model: what the figure shows and its recipe reads
    recipe: Recipe | None  # the Python that redraws the figure (lpos.figures.export); None where the step has none


def lesson_caption() -> str:
    """The lesson's description: which steps draw the sidebar sentence, which the shipped models on fixed
    inputs, and what stands in for a sentence a step cannot use."""
    sentence = [step for step in range(1, len(STEPS) + 1) if step in SENTENCE_STEPS]
    others = [step for step in range(1, len(STEPS) + 1) if step not in SENTENCE_STEPS]
    last = listed([str(step) for step in LAST_TOKEN_STEPS])
    return (f"Ten short steps, each one idea with one live figure. {_steps(sentence)} draw the sidebar sentence "
            f"({'step' if len(LAST_TOKEN_STEPS) == 1 else 'steps'} {last} only its last token). {_steps(others)} "
            f"draw the shipped models on fixed inputs. {_steps(list(SHUFFLE_STEPS))} compare the sentence with a "
            f"shuffle of itself; where it cannot be shuffled (under three tokens, or nothing to reorder) they compare "
            f"“{PRESETS[0]}” with “{PRESETS[1]}” instead. An empty sentence is replaced by “{PRESETS[0]}” in every "
            "step. Each step says when it stands in. Share the link: it keeps the step, the sentence and the scheme.")


def _steps(steps: list[int]) -> str:
    return f"Step {steps[0]}" if len(steps) == 1 else f"Steps {listed([str(step) for step in steps])}"


@cache_resource(max_entries=LESSON_FIGURES, ttl=600, show_spinner=False)
def _figure(step: int, sidebar: LoadedModel, model: LoadedModel, ids: list[int]) -> Figure:
    return STEP_VIEWS[step - 1](sidebar, model, ids)


def figure(step: int, selection: Selection) -> LessonFigure:
    """The live figure of a 1-based step, kept per step, model and sentence, with one sentence of measured
    numbers, the step's model and the recipe that redraws the figure."""
    ids = selection.ids[:LESSON_TOKENS] or selection.model.tokenizer.encode_known(PRESETS[0])[0]
    model = model_for(selection, STEPS[step - 1].scheme or selection.scheme)
    fig, measured = _figure(step, selection.model, model, ids)
    measured = stand_in_note(step, selection.ids, model) + (measured or "")
    if len(selection.ids) > LESSON_TOKENS and step in (1, 3):
        measured = f"(The lesson uses the first {LESSON_TOKENS} tokens of your text.) " + measured
    view = STEP_VIEWS[step - 1]
    return LessonFigure(fig, measured, model, RECIPES[view](selection.model, model, ids) if view in RECIPES else None)


def stand_in_note(step: int, sidebar_ids: list[int], model: LoadedModel) -> str:
    """"" or a note that this step drew a preset, not the sidebar sentence: an empty sentence (every step that
    draws the sentence), or one the shuffle steps cannot shuffle (shuffle_pair's presets)."""
    if step not in SENTENCE_STEPS:
        return ""
    if not sidebar_ids:
        return f"(The sidebar sentence is empty, so this step uses “{PRESETS[0]}”.) "
    ids = sidebar_ids[:LESSON_TOKENS]
    if step in SHUFFLE_STEPS and shuffle_pair(ids, tokenizer=model.tokenizer)[0] != ids:
        why = "has fewer than three tokens" if len(ids) < 3 else "has nothing to reorder before its last token"
        return (f"(The sidebar sentence {why}, so this step sets “{PRESETS[0]}” against “{PRESETS[1]}” "
                "instead.) ")
    return ""


def same_view(path: str) -> str:
    """A link to another page that opens with this sidebar (a Markdown link opens a new tab)."""
    shared = {k: st.query_params[k] for k in ("text", "scheme", "model") if k in st.query_params}
    return f"{path}?{urllib.parse.urlencode(shared)}" if shared else path


def presenter_css() -> str:
    """Static CSS for presenter mode (no user content): no sidebar or toolbar, large text."""
    return """<style>
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], header[data-testid="stHeader"] {display: none;}
[data-testid="stMainBlockContainer"] {max-width: 100%; padding: 1.5rem 2.5rem;}
[data-testid="stMain"] p, [data-testid="stMain"] li {font-size: 1.55rem; line-height: 1.45;}
[data-testid="stMain"] h1 {font-size: 3rem;}
[data-testid="stMain"] .lpos-chips {font-size: 1.55rem;}
[data-testid="stMain"] .st-key-live_class_code h1 {font: 700 clamp(2.5rem, 9vw, 6rem)/1.1 monospace;
  letter-spacing: .06em; white-space: nowrap;}
</style>"""


PRESENTER_SCALE = 1.5  # presenter prose is 1.55rem (presenter_css); figure text grows about as much
PLOTLY_FONT_PX = 12  # Plotly's default layout font size


def _scale_fonts(node, scale: float) -> None:
    """Multiply every explicit font size in a figure's dict (layout, axes, annotations, traces) in place."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key.endswith("font") and isinstance(value, dict) and isinstance(value.get("size"), (int, float)):
                value["size"] = round(value["size"] * scale, 1)
            _scale_fonts(value, scale)
    elif isinstance(node, list):
        for item in node:
            _scale_fonts(item, scale)


def presenter_figure(fig: go.Figure, *, scale: float = PRESENTER_SCALE) -> go.Figure:
    """A copy of `fig` with every font `scale` times larger, for presenter mode (the cached figure is kept):
    the default from 12 px to 18, labels set at 10-13 px to 15-20, titles likewise."""
    spec = fig.to_dict()
    spec.setdefault("layout", {}).setdefault("font", {}).setdefault("size", PLOTLY_FONT_PX)
    _scale_fonts(spec, scale)
    return go.Figure(spec)
