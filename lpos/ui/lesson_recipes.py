"""The Python behind the lesson's figures: each step's figure as a recipe (lpos.figures.export) on the
step's model, which the step's view (lpos.ui.lesson) draws from and the page prints; and the sentence
pair the shuffle steps read.
"""
from __future__ import annotations

from collections.abc import Callable

from lpos import checkpoints
from lpos.analysis.attention import offset_scores, query_and_key
from lpos.analysis.biases import bias_lines
from lpos.analysis.embeddings import embedding_view, token_counts
from lpos.analysis.lengths import training_length
from lpos.analysis.shuffle import can_shuffle, shuffle_earlier, shuffle_experiment
from lpos.figures.attention import offset_scores_figure
from lpos.figures.embeddings import embedding_heatmaps
from lpos.figures.export import Recipe, Ref, step
from lpos.figures.scheme_views import bias_lines_figure
from lpos.figures.shuffle import attention_bars, prediction_bars
from lpos.positions import schemes_with
from lpos.tokenizer import GPT2, Tokenizer
from lpos.ui import coverage, lengths, similarity, sinusoids
from lpos.ui.export import model_steps
from lpos.ui.models import LoadedModel
from lpos.ui.selection import Selection, scheme_models

PRESETS = ("The dog bit the man.", "The man bit the dog.")  # same tokens, same last token


def shuffle_pair(ids: list[int], *, tokenizer: Tokenizer = GPT2) -> tuple[list[int], list[int]]:
    """The sidebar sentence and a shuffle of it, or the two presets in `tokenizer` when it cannot be
    shuffled (their characters all in tiny Shakespeare's 65: a character model keeps them whole)."""
    if len(ids) >= 3 and can_shuffle(ids):
        return ids, shuffle_earlier(ids, seed=0)
    return tokenizer.encode_known(PRESETS[0])[0], tokenizer.encode_known(PRESETS[1])[0]


def shuffle_recipe(model: LoadedModel, ids: list[int], figure: Callable, **options) -> Recipe:
    """The shuffle experiment on `model` and one of lpos.figures.shuffle's figures of it, as a recipe
    (lpos.figures.export)."""
    original, shuffled = shuffle_pair(ids, tokenizer=model.tokenizer)
    return Recipe((step("result", shuffle_experiment, Ref("model"), original, shuffled=shuffled,
                        tokenizer=Ref("tokenizer")),
                   step("fig", figure, Ref("result"), **options)))


def order_blind_recipe(sidebar: LoadedModel, model: LoadedModel, ids: list[int]) -> Recipe:
    return shuffle_recipe(model, ids, attention_bars, head=0, tokenizer=Ref("tokenizer"))


def position_rows_recipe(sidebar: LoadedModel, model: LoadedModel, ids: list[int]) -> Recipe:
    return Recipe((step("counts", token_counts, Ref("meta")),
                   step("view", embedding_view, Ref("model"), list(ids), counts=Ref("counts"),
                        tokenizer=Ref("tokenizer")),
                   step("fig", embedding_heatmaps, Ref("view"), scheme=model.scheme)))


def sinusoid_distance_recipe(sidebar: LoadedModel, model: LoadedModel, ids: list[int]) -> Recipe:
    return sinusoids.offset_dots_recipe(model.config.n_embd, (0, 20, 60), 100, 10000.0)


def rope_offsets_recipe(sidebar: LoadedModel, model: LoadedModel, ids: list[int]) -> Recipe:
    return Recipe((step("query, key", query_and_key, Ref("model"), list(ids), layer=0, head=0,
                        position=len(ids) - 1),
                   step("scores", offset_scores, Ref("query"), Ref("key"),
                        offsets=[0, 1, 4, 16], length=64),
                   step("fig", offset_scores_figure, Ref("scores"))))


def bias_models(sidebar: LoadedModel) -> tuple[list[LoadedModel], int]:
    """The model the sidebar offers for every bias scheme (shipped when the sidebar's is trained), and the last
    query of the shortest training window among them: step 7 draws distances 0 to it."""
    offered = {m.scheme: m for m in scheme_models(Selection("", sidebar.scheme, sidebar, []))}
    models = [offered[name] for name in schemes_with("bias")]
    return models, min(training_length(m.meta, m.model) for m in models) - 1


def relative_bias_recipe(sidebar: LoadedModel, model: LoadedModel, ids: list[int]) -> Recipe | None:
    """Step 7's lines as a recipe (lpos.figures.export), reading `model` and loading the others; None when one of
    them is a file of the learner's own."""
    models, reach = bias_models(sidebar)
    steps, curves = [], {}
    for other in models:
        if (bound := model_steps(other, other.scheme, opened=model)) is None:
            return None
        loads, source, _ = bound
        steps += [*loads, step(f"{other.scheme}_bias", bias_lines, source, layer=0, query=reach,
                               max_distance=reach)]
        curves[other.model.scheme.label] = Ref(f"{other.scheme}_bias")
    return Recipe((*steps, step("fig", bias_lines_figure, curves,
                                title=f"Each head's bias against distance, layer 1, query at position {reach}")))


def table_wall_recipe(sidebar: LoadedModel, model: LoadedModel, ids: list[int]) -> Recipe | None:
    """Step 4's figure: the loss at each position of a short-window model beside a full-window one, or, when
    either is not installed, the cards' curves of every shipped model."""
    short, full = coverage.short_window_model(model), coverage.full_window_model()
    if short is None or full is None:
        return lengths.length_curves_recipe(checkpoints.available(), train_length=model.max_input_length)
    return coverage.position_losses(short, full, opened=model).recipe


def learned_band_recipe(sidebar: LoadedModel, model: LoadedModel, ids: list[int]) -> Recipe:
    """Step 8's maps: the model's table and the table it started from, side by side."""
    return similarity.position_maps(model, model.max_input_length, with_untrained=True)


def train_short_recipe(sidebar: LoadedModel, model: LoadedModel, ids: list[int]) -> Recipe | None:
    """The cards' curves of the shipped models trained at one length (None when no card is installed)."""
    cards = lengths.cards_at_one_length()
    return None if cards is None else lengths.length_curves_recipe(list(cards.tables), train_length=cards.train_length,
                                                                    unigram=cards.unigram)


def mask_leaks_recipe(sidebar: LoadedModel, model: LoadedModel, ids: list[int]) -> Recipe:
    return shuffle_recipe(model, ids, prediction_bars)
