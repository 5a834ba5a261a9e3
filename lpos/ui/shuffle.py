"""The Order-blindness view: the shuffle experiment on every scheme's model, cached per
(models, original ids, shuffled ids); a model is named by its key (lpos.ui.caching)."""
from __future__ import annotations

from lpos import precomputed
from lpos.analysis import shuffle
from lpos.figures.export import Recipe, Ref, step
from lpos.ui.caching import cache_data
from lpos.ui.models import LoadedModel
from lpos.ui.stored import computed


@cache_data(max_entries=128, show_spinner="Shuffling and running every scheme's model…")
def shuffle_results(models: list[LoadedModel], original: list[int], shuffled: list[int]) -> list[shuffle.ShuffleResult]:
    """shuffle_experiment on each model, in order (the presets' are precomputed for the shipped models)."""
    return [computed(m.model, precomputed.SHUFFLE, original=list(original), shuffled=list(shuffled), tokenizer=m.tokenizer)
            for m in models]


def bars_recipe(result: shuffle.ShuffleResult, *, head: int) -> Recipe:
    """The attention bars of one model's shuffle result, as the recipe that reruns the experiment
    (lpos.figures.export): drawn with that model, shown as Python."""
    return Recipe((step("result", "lpos.analysis.shuffle.shuffle_experiment", Ref("model"), list(result.original),
                        shuffled=list(result.shuffled), tokenizer=Ref("tokenizer")),
                   step("fig", "lpos.figures.shuffle.attention_bars", Ref("result"), head=head, tokenizer=Ref("tokenizer"))))
