"""The learned table's second limit, as views: which offered model trained on windows shorter
than its table, how far its rows moved from step 0, and its loss at each position of longer
windows beside the full-window `learned` model's. Kept per model (named by its key,
lpos.ui.caching); nothing here depends on the sidebar sentence."""
from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from lpos import checkpoints, precomputed
from lpos.analysis import table_coverage
from lpos.figures.coverage import position_loss_figure, row_drift_figure
from lpos.ui.caching import cache_resource
from lpos.ui.collect import release_memory
from lpos.ui.models import LoadedModel, label, load_offered
from lpos.ui.stored import computed

FULL_WINDOW = "learned"  # the learned scheme's representative: trained on full 128-token windows
WINDOWS = table_coverage.POSITION_WINDOWS


def trained_rows(model: LoadedModel) -> int | None:
    """L when this model's learned rows from L on never trained; None otherwise."""
    return table_coverage.trained_rows(model.meta, model.model)


def short_window_model(preferred: LoadedModel | None = None) -> LoadedModel | None:
    """`preferred` when it trained on short windows, else the first shipped model that did (None if none)."""
    if preferred is not None and trained_rows(preferred) is not None:
        return preferred
    for name in checkpoints.available():
        model, meta = load_offered(name)
        if table_coverage.trained_rows(meta, model) is not None:
            return LoadedModel(name, label(name), model, meta)
    return None


def full_window_model() -> LoadedModel | None:
    if FULL_WINDOW not in checkpoints.available():
        return None
    model, meta = load_offered(FULL_WINDOW)
    return LoadedModel(FULL_WINDOW, label(FULL_WINDOW), model, meta)


@cache_resource(max_entries=8, show_spinner=False)
def row_drift(model: LoadedModel) -> table_coverage.RowDrift | None:
    return table_coverage.row_drift(model.model, model.meta)


@cache_resource(max_entries=32, show_spinner=False)
def drift_view(model: LoadedModel, upto: int | None = None) -> tuple[go.Figure, list[str], str] | None:
    """The row-drift figure over the first `upto` rows, its sentences, and where the step-0 table came from."""
    drift = row_drift(model)
    if drift is None:
        return None
    figure = row_drift_figure(drift, label=model.key, upto=upto)  # the key, not the label: a title that fits 400 px
    return figure, table_coverage.drift_reading(drift, upto=upto), drift.source


@dataclass(frozen=True)
class PositionLosses:
    figure: go.Figure
    reading: str
    text: str  # which text was scored


@cache_resource(max_entries=8, show_spinner="Scoring every position…")
def position_losses(short: LoadedModel, full: LoadedModel) -> PositionLosses:
    """Both models' mean loss at each position of windows of `full`'s table length: held-out
    stories when the corpus is on this machine, the built-in story otherwise."""
    window = full.model.config.block_size
    limit = trained_rows(short)
    stream, text = table_coverage.position_loss_streams(short.meta, length=window)[0]
    windows = min(WINDOWS, len(stream) // window)

    def scored(model: LoadedModel):
        return lambda: table_coverage.loss_by_position(model.model, stream, length=window, max_windows=WINDOWS)

    # the shipped models' are precomputed (checkpoints/<name>.views.pt); others are scored once and kept
    curves = {m.key: computed(m.model, precomputed.position_loss_key(stream, window), scored(m),
                              doing="Scoring every position") for m in (short, full)}
    release_memory()
    return PositionLosses(position_loss_figure(curves, limit=limit, window=window),
                          table_coverage.position_loss_reading(curves, short=short.key, full=full.key, trained=limit,
                                                               windows=windows), text)
