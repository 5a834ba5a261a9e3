"""The Length-extrapolation views: the model cards' loss by evaluation length, and the live loss
of every token of a long text, cached per (model, token ids); a model is named by its key
(lpos.ui.caching). Figures are kept as built objects (`st.cache_resource`)."""
from __future__ import annotations

import re
from dataclasses import dataclass

import plotly.graph_objects as go

from lpos import checkpoints, precomputed
from lpos.analysis import lengths
from lpos.figures.export import Recipe, Ref, step
from lpos.figures.lengths import length_curves_figure, token_loss_figure
from lpos.tokenizer import visible
from lpos.ui.caching import cache_data, cache_resource
from lpos.ui.models import LoadedModel, shipped_card
from lpos.ui.sinusoids import FIGURES, LIFETIME
from lpos.ui.stored import computed


def shipped_loss_tables() -> dict[str, dict[int, dict]]:
    """Loss by evaluation length from each shipped model card, keyed by model name."""
    return {name: lengths.loss_table(shipped_card(name).meta) for name in checkpoints.available()}


def shipped_training_windows() -> str:
    """One sentence: the window length each shipped model trained on, grouped ("" when none is shipped)."""
    windows: dict[int, list[str]] = {}
    for name in checkpoints.available():
        card = shipped_card(name)
        windows.setdefault(lengths.training_length(card.meta, card), []).append(name)
    if not windows:
        return ""
    most = max(windows, key=lambda length: len(windows[length]))
    others = "".join(f"; {', '.join(names)} on windows of at most {length}" for length, names in windows.items()
                     if length != most)
    every = ("Every shipped model was" if len(windows) == 1 else
             f"{', '.join(windows[most])} {'was' if len(windows[most]) == 1 else 'were'}")
    return f"{every} trained on windows of {most} tokens{others}. "


def card_training(name: str) -> tuple[int, float | None]:
    """A shipped model's training length and the unigram loss its card states (None if absent)."""
    card = shipped_card(name)
    return lengths.training_length(card.meta, card), card.meta.get("unigram_val_loss")


@dataclass(frozen=True)
class CardCurves:
    """The shipped cards that can share one plot: those trained on windows of one length."""
    tables: dict[str, dict[int, dict]]  # model name -> loss by evaluation length
    train_length: int
    unigram: float | None  # the card's unigram loss (word frequencies alone)
    left_out: dict[str, int]  # cards trained on windows of another length -> that length

    @property
    def longest(self) -> int:
        """The longest evaluation length on any plotted card."""
        return max(length for table in self.tables.values() for length in table)

    def left_out_sentence(self) -> str:
        """Markdown naming each card left out and why ("" when none is)."""
        return "".join(f" **{name}** (trained on {length}-token windows) is left out: its curve would not start "
                       f"at the same training length." for name, length in self.left_out.items())

    def table_ends(self) -> str:
        """The plotted models whose position table stops, each with its last row, as a sentence."""
        ends = {name: shipped_card(name).max_input_length for name in self.tables}
        ends = {name: rows for name, rows in ends.items() if rows is not None}
        return "".join(f" `{name}` has no row past {rows:,}." for name, rows in ends.items())


def cards_at_one_length() -> CardCurves | None:
    """The shipped cards trained at the window length most of them share, the first on a tie (None
    when nothing is shipped)."""
    tables = shipped_loss_tables()
    if not tables:
        return None
    trained = {name: card_training(name)[0] for name in tables}
    train_length = max(trained.values(), key=list(trained.values()).count)
    unigram = card_training(next(name for name, length in trained.items() if length == train_length))[1]
    return CardCurves({name: table for name, table in tables.items() if trained[name] == train_length},
                      train_length, unigram, {name: length for name, length in trained.items() if length != train_length})


@cache_resource(max_entries=FIGURES, ttl=LIFETIME, show_spinner=False)
def length_curves(tables: dict[str, dict[int, dict]], *, train_length: int, unigram: float | None = None) -> go.Figure:
    """The model cards' loss against evaluation length; keyed by the cards' contents."""
    return length_curves_figure(tables, train_length=train_length, unigram=unigram)


def length_curves_recipe(names: list[str], *, train_length: int, unigram: float | None = None) -> Recipe:
    """length_curves as a recipe (lpos.figures.export): each shipped model's card read from its file."""
    steps, tables = [], {}
    for name in names:
        var = re.sub(r"\W", "_", name)
        steps += [step(f"{var}_model, {var}_card", checkpoints.load, name),
                  step(f"{var}_losses", lengths.loss_table, Ref(f"{var}_card"))]
        tables[name] = Ref(f"{var}_losses")
    return Recipe((*steps, step("fig", length_curves_figure, tables, train_length=train_length,
                                unigram=unigram)))


@cache_data(max_entries=64, show_spinner=False)
def loss_curve(model: LoadedModel, ids: list[int]) -> lengths.LossCurve:
    # the shipped models' story is precomputed; a shared-folder model's is kept on disk once scored
    return computed(model.model, precomputed.CURVE, ids=list(ids), doing=f"Scoring every one of {len(ids):,} tokens")


@cache_data(max_entries=64, show_spinner=False)
def window_baseline(model: LoadedModel, ids: list[int], *, window: int):
    """The same tokens each read with a sliding window of the training length
    (lpos.analysis.lengths.sliding_losses); None when the text does not go past one window."""
    if len(ids) - 1 <= window:
        return None
    # the shipped models' story is precomputed; a shared-folder model's is kept on disk once scored
    return computed(model.model, precomputed.SLIDING, ids=list(ids), window=window,
                    doing=f"Scoring the same tokens again, each with only the {window - 1:,} tokens before it")


@cache_resource(max_entries=FIGURES, ttl=LIFETIME, show_spinner=False)
def token_loss_chart(model: LoadedModel, ids: list[int], *, train_length: int) -> go.Figure:
    """The loss of every token of a long text (the Length extrapolation page's live view), with the same
    tokens each read with a sliding window of the training length as a baseline."""
    curve = loss_curve(model, ids)
    predicted = [visible(t) for t in model.tokenizer.token_strings(list(ids[1 : len(curve.losses) + 1]))]
    return token_loss_figure(curve, tokens=predicted, train_length=train_length, label=model.label,
                             baseline=window_baseline(model, ids, window=train_length))
