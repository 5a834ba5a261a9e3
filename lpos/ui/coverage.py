"""The learned table's second limit, as views: which offered model trained on windows shorter
than its table, how far its rows moved from step 0, and its loss at each position of longer
windows beside a model of the same table trained on full windows (`learned`). Kept per model
(named by its key, lpos.ui.caching); nothing here depends on the sidebar sentence."""
from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from lpos import checkpoints, precomputed
from lpos.analysis import coverage
from lpos.figures.coverage import position_loss_figure, row_drift_figure
from lpos.figures.export import Recipe, Ref, step
from lpos.ui.caching import cache_resource
from lpos.ui.export import model_steps, run_recipe
from lpos.ui.models import LoadedModel, shipped_card
from lpos.ui.stored import computed

WINDOWS = coverage.POSITION_WINDOWS


def trained_rows(model: LoadedModel) -> int | None:
    """L when this model's learned rows from L on never trained; None otherwise (a shipped model's card says it)."""
    return coverage.trained_rows(model.summary, model.described)


def short_window_model(preferred: LoadedModel | None = None) -> LoadedModel | None:
    """`preferred` when it trained on short windows, else the first shipped model that did (None if none)."""
    if preferred is not None and trained_rows(preferred) is not None:
        return preferred
    for name in checkpoints.available():
        card = shipped_card(name)
        if coverage.trained_rows(card.meta, card) is not None:
            return LoadedModel.shipped(name)
    return None


def full_window_model(short: LoadedModel | None = None) -> LoadedModel | None:
    """The first shipped model with a table that trained every row of it on full windows, in order (not
    at random positions): of `short`'s scheme and table length when given (None if none is shipped)."""
    for name in checkpoints.available():
        card = shipped_card(name)
        alike = short is None or (card.config.position, card.config.block_size) == (
            short.config.position, short.config.block_size)
        if card.max_input_length is not None and not card.config.random_positions and alike \
                and coverage.trained_rows(card.meta, card) is None:
            return LoadedModel.shipped(name)
    return None


@cache_resource(max_entries=8, show_spinner=False)
def row_drift(model: LoadedModel) -> coverage.RowDrift | None:
    return coverage.row_drift(model.model, model.meta)


@cache_resource(max_entries=32, show_spinner=False)
def drift_view(model: LoadedModel, upto: int | None = None) -> tuple[go.Figure, list[str], str] | None:
    """The row-drift figure over the first `upto` rows, its sentences, and where the step-0 table came from."""
    drift = row_drift(model)
    if drift is None:
        return None
    figure = row_drift_figure(drift, label=model.key, upto=upto)  # the key, not the label: a title that fits 400 px
    return figure, coverage.drift_reading(drift, upto=upto), drift.source


@dataclass(frozen=True)
class PositionLosses:
    figure: go.Figure
    recipe: Recipe | None  # the Python that redraws the figure (lpos.figures.export); None for a file of one's own
    reading: str
    text: str  # which text was scored


def position_losses_recipe(short: LoadedModel, full: LoadedModel, *,
                           opened: LoadedModel | None) -> tuple[Recipe, bool]:
    """position_losses' figure as a recipe: both models scored on the text the short model's corpus gives, each
    loaded by name unless it is `opened` (the model the snippet's opening loads); and whether a snippet can load
    both (not a file of the learner's own other than `opened`)."""
    window, steps, curves, loadable = full.config.block_size, [], {}, True
    for name, model in (("short", short), ("full", full)):
        bound = model_steps(model, name, opened=opened)
        loadable &= bound is not None
        loads, gpt, meta = bound or ([], Ref(f"{name}_model"), Ref(f"{name}_meta"))  # never printed
        steps += loads
        if model is short:
            steps.append(step("stream, text", coverage.position_loss_text, meta, length=window))
        steps.append(step(f"{name}_losses", coverage.loss_by_position, gpt, Ref("stream"),
                          length=window, max_windows=WINDOWS))
        curves[model.key] = Ref(f"{name}_losses")
    return Recipe((*steps, step("fig", position_loss_figure, curves,
                                limit=trained_rows(short), window=window))), loadable


@cache_resource(max_entries=8, show_spinner="Scoring every position…")
def position_losses(short: LoadedModel, full: LoadedModel, *, opened: LoadedModel | None = None) -> PositionLosses:
    """Both models' mean loss at each position of windows of `full`'s table length: held-out
    stories when the corpus is on this machine, the built-in story otherwise; with the recipe that
    redraws the figure in a snippet that opens with `opened`."""
    window = full.config.block_size
    limit = trained_rows(short)
    stream, text = coverage.position_loss_text(short.meta, length=window)
    windows = min(WINDOWS, len(stream) // window)

    # the shipped models' are precomputed (checkpoints/<name>.views.pt); others are scored once and kept
    curves = {m.key: computed(m.model, precomputed.POSITION_LOSS, stream=stream, length=window,
                              doing="Scoring every position") for m in (short, full)}
    recipe, loadable = position_losses_recipe(short, full, opened=opened)
    return PositionLosses(run_recipe(recipe, short_losses=curves[short.key], full_losses=curves[full.key]),
                          recipe if loadable else None,
                          coverage.position_loss_reading(curves, short=short.key, full=full.key, trained=limit,
                                                               windows=windows), text)
