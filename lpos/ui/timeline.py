"""The Training-timeline views: a model's training timeline and each snapshot's figures, kept per
model (named by its key, lpos.ui.caching): the timeline never depends on the sidebar sentence, so
a new sentence rebuilds none of it. What the page reads at every step (the band, the bias, the
sentences: lpos.analysis.timeline.timeline_views) is a precomputed view, stored for the shipped
models and computed once for others (lpos.ui.stored); a step's figures are built once, the
attention heads' all in one call. `st.cache_resource` holds the objects themselves (no pickled
copy per run); the page only reads them."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from lpos import precomputed
from lpos.analysis import timeline
from lpos.analysis.similarity import neighbour_sentence
from lpos.analysis.coverage import split_band
from lpos.figures.export import Recipe, Ref, step
from lpos.figures.timeline import (attention_figures, band_figure, bias_figure, loss_curve_figure, position_map_animation,
                                   position_map_figure, repeated_figure)
from lpos.ui.caching import cache_resource
from lpos.ui.export import chart, run_recipe
from lpos.ui.models import LoadedModel
from lpos.ui.stored import computed

STEP_FIGURES = 64  # 16 snapshots of a few models


@dataclass(frozen=True)
class ModelTimeline:
    timeline: timeline.Timeline
    maps: np.ndarray  # (S, T, T) cosine map at every snapshot
    views: timeline.TimelineViews  # the band, the readings, the bias at every snapshot


@cache_resource(max_entries=8, show_spinner="Reading the training snapshots…")
def model_timeline(model: LoadedModel) -> ModelTimeline | None:
    """The model's timeline and what the page derives from it, or None without one."""
    found = timeline.timeline_of(model.meta, tokenizer=model.tokenizer)
    if found is None:
        return None
    views = computed(model.model, precomputed.TIMELINE, line=found,
                     doing="Measuring the band, the bias and the sentences of every snapshot")
    return ModelTimeline(found, timeline.cosine_maps(found), views)


@dataclass(frozen=True)
class StepFigures:
    figures: dict[str, go.Figure]  # by part: loss, position-map, band, repeated-token, attention-head-N, bias (t5, fire)
    recipes: dict[str, Recipe]  # the recipe each is drawn from (lpos.figures.export)
    heads: int  # attention-head-1 .. attention-head-<heads>


def step_recipes(model: LoadedModel, found: ModelTimeline, index: int) -> dict[str, Recipe]:
    """Each figure of snapshot `index` as a recipe (lpos.figures.export) on the model's timeline."""
    line, steps = found.timeline, found.timeline.steps
    read = step("line", timeline.timeline_of, Ref("meta"), tokenizer=Ref("tokenizer"))
    maps = step("maps", timeline.cosine_maps, Ref("line"))
    recipes = {
        "loss": Recipe((read, step("fig", loss_curve_figure, Ref("line"), index))),
        "position-map": Recipe((read, maps, step("fig", position_map_figure, Ref("maps"), Ref("line"), index))),
        "band": Recipe((read, step("band", timeline.band_over_time, Ref("line")),
                        step("bands", timeline.bands_at, Ref("band"), [steps[0], steps[index]]),
                        step("fig", band_figure, Ref("bands"), title="The band, measured: mean cosine by distance",
                             of="the rows" if line.position_kind == "table" else "what block 1 adds"))),
        "repeated-token": Recipe((read, step("repeated", timeline.repeated_similarity, Ref("line")),
                                  step("fig", repeated_figure, Ref("repeated"), word=line.repeated_word,
                                       index=index))),
        **{f"attention-head-{head + 1}": Recipe((read, step("panels", attention_figures, Ref("line"), index)),
                                                pick=head) for head in range(line.attention.shape[1])}}
    if line.bias is not None:
        recipes["bias"] = Recipe((read, step("bias", timeline.bias_over_distance, Ref("line"), index),
                                  step("fig", bias_figure, Ref("bias"), step=steps[index],
                                       label=model.model.scheme.label)))
    return recipes


def results(found: ModelTimeline) -> dict[str, object]:
    """What the recipes' steps compute that the page already holds, by the steps' names."""
    return {"line": found.timeline, "maps": found.maps, "band": found.views.band, "repeated": found.views.repeated}


def step_results(found: ModelTimeline, index: int) -> dict[str, object]:
    """`results`, and snapshot `index`'s own: its bias (precomputed) and every head's figure, built once
    for the recipes that each pick one."""
    held = {**results(found), "panels": attention_figures(found.timeline, index)}
    if found.views.bias is not None:
        held["bias"] = found.views.bias[index]
    return held


@cache_resource(max_entries=STEP_FIGURES, show_spinner=False)
def step_figures(model: LoadedModel, index: int) -> StepFigures:
    """The figures of snapshot `index` of the model's timeline (which must exist), and their recipes."""
    found = model_timeline(model)
    recipes, held = step_recipes(model, found, index), step_results(found, index)
    return StepFigures({part: run_recipe(recipe, model, **held) for part, recipe in recipes.items()}, recipes,
                       found.timeline.attention.shape[1])


@cache_resource(max_entries=8, show_spinner=False)
def animation(model: LoadedModel) -> tuple[go.Figure, Recipe]:
    """All 16 maps as one animation, and its recipe (lpos.figures.export)."""
    recipe = Recipe((step("line", timeline.timeline_of, Ref("meta"), tokenizer=Ref("tokenizer")),
                     step("maps", timeline.cosine_maps, Ref("line")),
                     step("fig", position_map_animation, Ref("maps"), Ref("line"))))
    return run_recipe(recipe, model, **results(model_timeline(model))), recipe


def timeline_chart(figures: StepFigures, part: str, model: LoadedModel, *, key: str, where=None) -> None:
    """One figure of a snapshot with the recipe it was drawn from, its download named timeline-<part>."""
    chart(figures.figures[part], recipe=figures.recipes[part], name=f"timeline-{part}", where=where, model=model, key=key)


def band_captions(found: ModelTimeline, model: LoadedModel, index: int, *, limit: int | None) -> list[str]:
    """What the band beside the map shows at snapshot `index`, from its own numbers: a learned table's
    neighbouring rows (and, for a model trained on shorter windows, the rows training never read), or
    for a scheme without a table what its first block adds."""
    step, rows, band = found.timeline.steps[index], found.maps.shape[-1], found.views.band
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
