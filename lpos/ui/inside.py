"""Cached computations of the Inside the model page: the texts, the probes, the head portraits
and the streaming test, each cached per (model, text); and the page's sentence-independent
figures, built once per (models, text), so a new sidebar sentence rebuilds none of them.

Cache keys name the model (key and scheme) and the text by a digest of its token ids: Streamlit's
hasher walks ids one by one, and the ten probe lookups of the default text's ~4,500 ids took more
than half of the page's 150-170 ms per new sentence (docs/PERFORMANCE.md). The model objects and
the ids ride along unhashed (leading underscore), as in lpos/ui/cached_experiments.py.
"""
from __future__ import annotations

import hashlib
from array import array
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from lpos import checkpoints
from lpos.analysis import heads, probes, streaming
from lpos.analysis.lengths import story
from lpos.figures.inside import head_grid_figure, probe_figure
from lpos.model import GPT
from lpos.positions import SCHEMES
from lpos.tokenizer import encode
from lpos.ui.cached_experiments import SchemeModel
from lpos.ui.models import UNTRAINED, load_offered, untrained
from lpos.ui.state import Selection

Texts = tuple[tuple[str, tuple[int, ...]], ...]  # (name, ids) pairs
FIGURES = 16  # per function: one per (models, text) a class looks at
STORY = "the built-in story"
HELD_OUT = "held-out stories"


@st.cache_resource(show_spinner="Reading the held-out stories…")
def _held_out(files: tuple[str, ...], seed: int) -> tuple[int, ...]:
    return tuple(probes.held_out_stream([Path(f) for f in files], seed=seed))


def texts() -> dict[str, Texts]:
    """The texts the page offers, by choice: the story, the held-out stories when the training
    corpus is on this machine, and both."""
    from lpos.cli import DEFAULT_DATA_DIR  # where the corpus sits beside the project

    offered = {STORY: ((STORY, tuple(encode(story()))),)}
    shipped = checkpoints.available()
    if shipped:
        meta = load_offered(shipped[0])[1]
        files = tuple(str(DEFAULT_DATA_DIR / name) for name in meta.get("data_files", []))
        held_out = _held_out(files, int(meta.get("train_args", {}).get("seed", 1337)))
        if held_out:
            offered = {f"{STORY} + {HELD_OUT}": (offered[STORY][0], (HELD_OUT, held_out)), **offered,
                       HELD_OUT: ((HELD_OUT, held_out),)}
    return offered


def text_key(chosen: Texts) -> tuple[tuple[str, int, str], ...]:
    """What names a text in a cache key: each part's name, length and a digest of its ids."""
    return tuple((name, len(ids), hashlib.blake2b(array("q", ids).tobytes(), digest_size=16).hexdigest())
                 for name, ids in chosen)


def _text(model: GPT, chosen: Texts) -> probes.ProbeText:
    return probes.probe_text({name: list(ids) for name, ids in chosen}, model=model)


@st.cache_data(max_entries=64, show_spinner=False)
def _probes(key: str, scheme: str, text: tuple, _chosen: Texts, _model: GPT) -> pd.DataFrame:
    return probes.position_probes(_model, _text(_model, _chosen))


def probe_panels(selection: Selection, chosen: Texts) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame]]:
    """Probe frames by line name: every shipped model (and the sidebar's model when it is neither
    shipped nor untrained), and an untrained model of every scheme."""
    trained, text = {}, text_key(chosen)
    with st.spinner("Probing every layer of ten models…"):
        for scheme in SCHEMES:
            if scheme in checkpoints.available():
                trained[scheme] = _probes(scheme, scheme, text, chosen, load_offered(scheme)[0])
        chosen_model = selection.model
        if chosen_model.trained and chosen_model.key not in SCHEMES:
            trained[f"{selection.scheme} · {chosen_model.label}"] = _probes(chosen_model.key, selection.scheme, text,
                                                                           chosen, chosen_model.model)
        fresh = {scheme: _probes(UNTRAINED, scheme, text, chosen, untrained(scheme)) for scheme in SCHEMES}
    return trained, fresh


@dataclass(frozen=True)
class ProbeView:
    """What the probe tab draws: the figure, the reading, and the sizes its caption states."""

    figure: go.Figure
    reading: list[str]
    fitted: int  # tokens each probe was fitted on
    scored: int  # tokens it was scored on
    window: int  # tokens per window
    trained: bool  # whether any trained model was probed


@st.cache_resource(max_entries=FIGURES, show_spinner=False)
def _probe_view(shipped: tuple[str, ...], extra: tuple[str, str] | None, text: tuple, _selection: Selection,
                _chosen: Texts) -> ProbeView:
    trained, fresh = probe_panels(_selection, _chosen)
    panels = {"trained": trained, "untrained": fresh} if trained else {"untrained": fresh}
    sample = next(iter(fresh.values())).iloc[0]
    return ProbeView(probe_figure(panels), probes.probe_reading(trained, fresh), int(sample["fitted"]),
                     int(sample["scored"]), int(sample["window"]), bool(trained))


def probe_view(selection: Selection, chosen: Texts) -> ProbeView:
    """The probe figure and its reading for the models probe_panels probes, built once per text."""
    model = selection.model
    extra = (model.key, selection.scheme) if model.trained and model.key not in SCHEMES else None
    return _probe_view(tuple(checkpoints.available()), extra, text_key(chosen), selection, chosen)


@st.cache_data(max_entries=64, show_spinner=False)
def _portraits(key: str, scheme: str, text: tuple, _chosen: Texts, _model: GPT) -> heads.HeadPortraits:
    return heads.head_portraits(_model, _text(_model, _chosen))


def portraits(models: list[SchemeModel], chosen: Texts) -> dict[str, heads.HeadPortraits]:
    text = text_key(chosen)
    with st.spinner("Measuring every head…"):
        return {m.scheme: _portraits(m.key, m.scheme, text, chosen, m.model) for m in models}


@st.cache_resource(max_entries=FIGURES, show_spinner=False)
def _head_grid(names: tuple[tuple[str, str, str], ...], text: tuple, _portraits: dict) -> go.Figure:
    return head_grid_figure(_portraits)


def head_grid(models: list[SchemeModel], named: dict[str, heads.HeadPortraits], chosen: Texts) -> go.Figure:
    """The head grid of `named` (line name -> the portraits of `models`, in order), built once per text."""
    names = tuple((name, m.key, m.scheme) for name, m in zip(named, models))
    return _head_grid(names, text_key(chosen), named)


def stream_ids(model: GPT, chosen: Texts, *, window: int) -> list[int]:
    """The texts one after another, as long as the streaming test of `model` needs."""
    ids = [t for _, part in chosen for t in part]
    return ids[: streaming.streamed_tokens(model, window=window)]


@st.cache_data(max_entries=64, show_spinner=False)
def _sink_test(key: str, scheme: str, text: tuple, window: int, _ids: list[int], _model: GPT) -> streaming.SinkTest:
    return streaming.sink_test(_model, _ids, window=window)


def sink_test(model: SchemeModel, chosen: Texts, *, window: int) -> streaming.SinkTest | str:
    """The streaming test of one model, or why it cannot run (a window past a learned table's rows)."""
    ids = stream_ids(model.model, chosen, window=window)
    try:
        return _sink_test(model.key, model.scheme, text_key((("stream", tuple(ids)),)), window, ids, model.model)
    except ValueError as error:
        return str(error)


def sink_tests(models: list[SchemeModel], chosen: Texts, *, window: int) -> dict[str, streaming.SinkTest | str]:
    with st.spinner(f"Streaming the text through windows of {window} tokens, {len(models)} models…"):
        return {m.scheme: sink_test(m, chosen, window=window) for m in models}
