"""Cached computations of the two experiment pages: the shuffle across all five schemes and
the loss along a long text.

Cache keys name the models (key and scheme) and the token ids; the model objects ride along
unhashed (leading underscore), as in lpos/ui/cached.py.
"""
from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from lpos import checkpoints
from lpos.analysis import lengths, shuffle
from lpos.model import GPT
from lpos.positions import SCHEMES
from lpos.ui.collect import release_memory
from lpos.ui.models import UNTRAINED, label, load_offered, untrained
from lpos.ui.state import Selection


@dataclass(frozen=True)
class SchemeModel:
    scheme: str
    key: str  # what names the model in a cache key
    label: str
    model: GPT


def scheme_models(selection: Selection) -> list[SchemeModel]:
    """One model per scheme: the selected model for its own scheme; for the others the shipped
    checkpoint when the selection is a trained model (untrained when none is shipped yet), else
    an untrained model of the same size."""
    shipped = checkpoints.available()
    chosen = selection.model
    models = []
    for scheme in SCHEMES:
        if scheme == chosen.model.config.position:
            models.append(SchemeModel(scheme, chosen.key, chosen.label, chosen.model))
        elif chosen.trained and scheme in shipped:
            models.append(SchemeModel(scheme, scheme, label(scheme), load_offered(scheme)[0]))
        else:
            name = "untrained (no shipped checkpoint yet)" if chosen.trained else label(UNTRAINED)
            models.append(SchemeModel(scheme, UNTRAINED, name, untrained(scheme)))
    return models


@st.cache_data(max_entries=128, show_spinner="Shuffling and running five models…")
def _shuffle_results(keys: tuple[tuple[str, str], ...], original: tuple[int, ...], shuffled: tuple[int, ...],
                     _models: tuple[GPT, ...]) -> list[shuffle.ShuffleResult]:
    return [shuffle.shuffle_experiment(model, list(original), shuffled=list(shuffled)) for model in _models]


def shuffle_results(models: list[SchemeModel], original: list[int], shuffled: list[int]) -> list[shuffle.ShuffleResult]:
    keys = tuple((m.key, m.scheme) for m in models)
    return _shuffle_results(keys, tuple(original), tuple(shuffled), tuple(m.model for m in models))


@st.cache_data(max_entries=64, show_spinner="Scoring every token…")
def _loss_curve(key: str, scheme: str, ids: tuple[int, ...], _model: GPT) -> lengths.LossCurve:
    curve = lengths.loss_along_text(_model, list(ids))
    release_memory()  # the scoring's large temporaries are freed: give them back to the system
    return curve


def loss_curve(selection: Selection, ids: list[int]) -> lengths.LossCurve:
    return _loss_curve(selection.model.key, selection.scheme, tuple(ids), selection.model.model)


def shipped_loss_tables() -> dict[str, dict[int, dict]]:
    """Loss by evaluation length from each shipped model card, keyed by scheme name."""
    return {name: lengths.loss_table(load_offered(name)[1]) for name in checkpoints.available()}


def shipped_card(name: str) -> tuple[GPT, dict]:
    """A shipped model and its meta (the model card)."""
    return load_offered(name)
