"""Cached computations of the Inside the model page: the texts, the probes, the head portraits
and the streaming test, each cached per (model, text).

Cache keys name the model (key and scheme) and hold the token ids; the model objects ride along
unhashed (leading underscore), as in lpos/ui/cached_experiments.py.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from lpos import checkpoints
from lpos.analysis import heads, probes, streaming
from lpos.analysis.lengths import story
from lpos.model import GPT
from lpos.positions import SCHEMES
from lpos.tokenizer import encode
from lpos.ui.cached_experiments import SchemeModel
from lpos.ui.models import UNTRAINED, load_offered, untrained
from lpos.ui.state import Selection

Texts = tuple[tuple[str, tuple[int, ...]], ...]  # (name, ids) pairs, hashable for the cache
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


def _text(model: GPT, chosen: Texts) -> probes.ProbeText:
    return probes.probe_text({name: list(ids) for name, ids in chosen}, model=model)


@st.cache_data(max_entries=64, show_spinner=False)
def _probes(key: str, scheme: str, chosen: Texts, _model: GPT) -> pd.DataFrame:
    return probes.position_probes(_model, _text(_model, chosen))


def probe_panels(selection: Selection, chosen: Texts) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame]]:
    """Probe frames by line name: every shipped model (and the sidebar's model when it is neither
    shipped nor untrained), and an untrained model of every scheme."""
    trained = {}
    with st.spinner("Probing every layer of ten models…"):
        for scheme in SCHEMES:
            if scheme in checkpoints.available():
                trained[scheme] = _probes(scheme, scheme, chosen, load_offered(scheme)[0])
        chosen_model = selection.model
        if chosen_model.trained and chosen_model.key not in SCHEMES:
            trained[f"{selection.scheme} · {chosen_model.label}"] = _probes(chosen_model.key, selection.scheme, chosen,
                                                                           chosen_model.model)
        fresh = {scheme: _probes(UNTRAINED, scheme, chosen, untrained(scheme)) for scheme in SCHEMES}
    return trained, fresh


@st.cache_data(max_entries=64, show_spinner=False)
def _portraits(key: str, scheme: str, chosen: Texts, _model: GPT) -> heads.HeadPortraits:
    return heads.head_portraits(_model, _text(_model, chosen))


def portraits(models: list[SchemeModel], chosen: Texts) -> dict[str, heads.HeadPortraits]:
    with st.spinner("Measuring every head…"):
        return {m.scheme: _portraits(m.key, m.scheme, chosen, m.model) for m in models}


def stream_ids(model: GPT, chosen: Texts, *, window: int) -> list[int]:
    """The texts one after another, as long as the streaming test of `model` needs."""
    ids = [t for _, part in chosen for t in part]
    return ids[: streaming.streamed_tokens(model, window=window)]


@st.cache_data(max_entries=64, show_spinner=False)
def _sink_test(key: str, scheme: str, ids: tuple[int, ...], window: int, _model: GPT) -> streaming.SinkTest:
    return streaming.sink_test(_model, list(ids), window=window)


def sink_test(model: SchemeModel, chosen: Texts, *, window: int) -> streaming.SinkTest | str:
    """The streaming test of one model, or why it cannot run (a window past a learned table's rows)."""
    try:
        return _sink_test(model.key, model.scheme, tuple(stream_ids(model.model, chosen, window=window)), window,
                          model.model)
    except ValueError as error:
        return str(error)


def sink_tests(models: list[SchemeModel], chosen: Texts, *, window: int) -> dict[str, streaming.SinkTest | str]:
    with st.spinner(f"Streaming the text through windows of {window} tokens, {len(models)} models…"):
        return {m.scheme: sink_test(m, chosen, window=window) for m in models}
