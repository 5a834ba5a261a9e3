"""The Python behind the Inside page's figures that set several models side by side (the probes, the head grid,
one head's attention by distance, every scheme's sink gain), as recipes (lpos.figures.export): each model loaded
(a shipped one by name, an untrained one by scheme, the sidebar's as the snippet's opening loads it), measured on
the page's text, and the figure drawn from the measures. The page draws each figure from its recipe with the
measures it already holds (precomputed or cached), so the snippet it prints cannot drift from the figure.
"""
from __future__ import annotations

from collections.abc import Callable

import plotly.graph_objects as go

from lpos.analysis.heads import head_portraits
from lpos.analysis.probes import position_probes, probe_text
from lpos.analysis.streaming import sink_summary, sink_test, streamed_ids
from lpos.figures.export import Recipe, Ref, Step, step
from lpos.ui.export import model_steps, run_recipe
from lpos.ui.inside import Text, text_steps
from lpos.ui.models import LoadedModel

Measure = Callable[[str, Ref, dict[str, Ref]], list[Step]]  # (name, the model, the text's parts) -> its steps
Draw = Callable[[dict[str, Ref]], list[Step]]  # each line's measure -> the steps that draw the figure


def probed(name: str, model: Ref, parts: dict[str, Ref]) -> list[Step]:
    """A model's position probes on the text (lpos.precomputed.PROBES)."""
    return [step(f"{name}_text", probe_text, parts, model=model),
            step(f"{name}_probes", position_probes, model, Ref(f"{name}_text"))]


def portrayed(name: str, model: Ref, parts: dict[str, Ref]) -> list[Step]:
    """A model's head portraits on the text (lpos.precomputed.PORTRAITS)."""
    return [step(f"{name}_text", probe_text, parts, model=model),
            step(f"{name}_portraits", head_portraits, model, Ref(f"{name}_text"))]


def streamed(window: int) -> Measure:
    """A model's sink test through windows of `window` tokens (lpos.precomputed.SINK), summed up."""
    def measure(name: str, model: Ref, parts: dict[str, Ref]) -> list[Step]:
        return [step(f"{name}_ids", streamed_ids, model, parts, window=window),
                step(f"{name}_test", sink_test, model, Ref(f"{name}_ids"), window=window),
                step(f"{name}_summary", sink_summary, Ref(f"{name}_test"))]
    return measure


def compared(models: list[tuple[str, str, LoadedModel]], measured: dict[str, object], *, chosen: Text, tokens: int,
             measure: Measure, draw: Draw, opened: LoadedModel | None, pick: int | None = None
             ) -> tuple[go.Figure, Recipe | None]:
    """The figure of several models and the recipe that redraws it (None when one of them is a file of the
    learner's own, other than `opened`, which no snippet loads by name). `models`: (its name in the snippet, its
    line in the figure, the model), in the figure's order; `measured`: each line's measure as the page holds it;
    `tokens`: how many of `chosen`'s ids the measures read; `opened`: the model the snippet's opening loads."""
    read, parts = text_steps(chosen, tokens)
    steps, lines, given, loadable = [], {}, {}, True
    for name, line, model in models:
        name = name.replace("-", "_")  # a Python name in the snippet: rope-partial_model would not be one
        bound = model_steps(model, name, opened=opened)
        loadable &= bound is not None
        loads, gpt, _ = bound or ([], Ref(f"{name}_model"), None)  # never printed: the recipe is not shown
        made = measure(name, gpt, parts)
        steps += [*loads, *made]
        lines[line] = Ref(made[-1].target)
        given[made[-1].target] = measured[line]
    recipe = Recipe((*read, *steps, *draw(lines)), pick=pick)
    return run_recipe(recipe, **given), recipe if loadable else None  # only the drawing steps run here


def whole_text(chosen: Text) -> int:
    """Every id of `chosen`: what the probes and the head portraits read (probe_text cuts its windows)."""
    return sum(len(ids) for _, ids in chosen.parts)
