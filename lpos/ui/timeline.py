"""The Training-timeline views: a model's training timeline and each snapshot's figures, kept per
model (named by its key, lpos.ui.caching): the timeline never depends on the sidebar sentence, so
a new sentence rebuilds none of it. `st.cache_resource` holds the objects themselves (no pickled
copy per run); the page only reads them."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from lpos.analysis import timeline
from lpos.analysis.similarity import neighbour_sentence
from lpos.analysis.coverage import split_band
from lpos.figures.timeline import (attention_figures, band_figure, bias_figure, loss_curve_figure, position_map_figure,
                                   repeated_figure)
from lpos.ui.caching import cache_resource
from lpos.ui.models import LoadedModel

STEP_FIGURES = 64  # 16 snapshots of a few models


@dataclass(frozen=True)
class ModelTimeline:
    timeline: timeline.Timeline
    maps: np.ndarray  # (S, T, T) cosine map at every snapshot
    band: pd.DataFrame  # band over time (lpos.analysis.timeline.band_over_time)
    reading: list[str]  # timeline_reading's sentences
    repeated: pd.DataFrame  # the repeated word's cosine per step


@cache_resource(max_entries=8, show_spinner="Reading the training snapshots…")
def model_timeline(model: LoadedModel) -> ModelTimeline | None:
    """The model's timeline and what the page derives from it, or None without one."""
    found = timeline.timeline_of(model.meta, tokenizer=model.tokenizer)
    if found is None:
        return None
    return ModelTimeline(found, timeline.cosine_maps(found), timeline.band_over_time(found),
                         timeline.timeline_reading(found), timeline.repeated_similarity(found))


@dataclass(frozen=True)
class StepFigures:
    loss: go.Figure
    position_map: go.Figure
    band: go.Figure
    repeated: go.Figure
    attention: list[go.Figure]  # one per head
    bias: go.Figure | None  # the learned bias by distance (t5, fire), None for other schemes


@cache_resource(max_entries=STEP_FIGURES, show_spinner=False)
def step_figures(model: LoadedModel, index: int) -> StepFigures:
    """The figures of snapshot `index` of the model's timeline (which must exist)."""
    found = model_timeline(model)
    line, band, steps = found.timeline, found.band, found.timeline.steps
    shown = {f"step {steps[0]}": band[band.step == steps[0]], f"step {steps[index]}": band[band.step == steps[index]]}
    return StepFigures(loss_curve_figure(line, index), position_map_figure(found.maps, line, index),
                       band_figure(shown, title="The band, measured: mean cosine by distance",
                                   of="the rows" if line.position_kind == "table" else "what block 1 adds"),
                       repeated_figure(found.repeated, word=line.repeated_word, index=index), attention_figures(line, index),
                       None if line.bias is None else
                       bias_figure(timeline.bias_over_distance(line, index), step=steps[index], label=model.model.scheme.label))


def band_captions(found: ModelTimeline, model: LoadedModel, index: int, *, limit: int | None) -> list[str]:
    """What the band beside the map shows at snapshot `index`, from its own numbers: a learned table's
    neighbouring rows (and, for a model trained on shorter windows, the rows training never read), or
    for a scheme without a table what its first block adds."""
    step, rows, band = found.timeline.steps[index], found.maps.shape[-1], found.band
    if found.timeline.position_kind != "table":
        far = min(64, rows // 2)
        here = band[band.step == step].set_index("distance").cosine
        return ["This model has no learned table of position rows. The map compares what the first block adds to the "
                f"residual stream at each position, averaged over held-out windows. At step {step}: cosine "
                f"{here[1]:.2f} at distance 1, {here[far]:.2f} at distance {far} (the reading above follows the whole run)."]
    here = band[(band.step == step) & (band.distance == 1)].iloc[0]
    said = [f"At step {step} neighbouring rows have cosine {here.cosine:.2f}; "
            f"{neighbour_sentence(here.neighbour_distance, rows)}."]
    if limit is not None:
        split = split_band(found.timeline.position_rows[index], limit)
        said.append(f"This model trained on windows of at most {limit} tokens. At step {step}, neighbouring rows among "
                    f"rows 0–{limit - 1} have cosine {split['trained']:.2f}; among rows {limit} and after, which "
                    f"training never read, {split['untrained']:.2f}.")
    return said
