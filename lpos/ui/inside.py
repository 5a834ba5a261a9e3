"""The Inside-the-model views: the texts, the probes, the head portraits and the streaming test,
each cached per (model, text); and the page's sentence-independent figures, built once per
(models, text), so a new sidebar sentence rebuilds none of them.

A text is named in a cache key by a digest of its token ids (`text_key`): Streamlit's hasher
walks ids one by one, and the ten probe lookups of the default text's ~4,500 ids took more than
half of the page's 150-170 ms per new sentence (docs/PERFORMANCE.md). A model is named by its
key (lpos.ui.caching).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from lpos import checkpoints, precomputed
from lpos.analysis import heads, probes, streaming, table_coverage
from lpos.figures.inside import head_grid_figure, head_layer_figure, probe_figures
from lpos.model import GPT
from lpos.positions import SCHEMES
from lpos.ui.caching import HASH_FUNCS
from lpos.tokenizer import GPT2, Tokenizer, decode
from lpos.ui.models import LoadedModel, load_offered, untrained, untrained_like
from lpos.ui.selection import Selection
from lpos.ui.stored import computed

Texts = tuple[tuple[str, tuple[int, ...]], ...]  # (name, ids) pairs
FIGURES = 16  # per function: one per (models, text) a class looks at
GRID_LAYERS = 6  # a model with more layers has its heads drawn one chosen layer at a time
STORY = precomputed.INSIDE_STORY
HELD_OUT = precomputed.INSIDE_HELD_OUT
text_key = precomputed.text_key  # what names a text in a cache key: each part's name, length and ids' digest


@dataclass(frozen=True)
class Text:
    """One choice of the page's text box: its parts, named in cache keys by `text_key`."""

    parts: Texts


_HASH = {**HASH_FUNCS, Text: lambda text: text_key(text.parts)}
_cache_data = st.cache_data(hash_funcs=_HASH, max_entries=64, show_spinner=False)
_cache_figure = st.cache_resource(hash_funcs=_HASH, max_entries=FIGURES, show_spinner=False)


@st.cache_resource(show_spinner="Reading the held-out stories…")
def _texts(name: str | None) -> dict[str, Text]:
    return {choice: Text(parts) for choice, parts in
            precomputed.inside_texts(load_offered(name)[1] if name is not None else None).items()}


def texts() -> dict[str, Text]:
    """The texts the page offers, by choice: the story, the held-out stories when the training
    corpus is on this machine, and both (lpos.precomputed.inside_texts)."""
    shipped = checkpoints.available()
    return _texts(shipped[0] if shipped else None)


@st.cache_resource(hash_funcs=HASH_FUNCS, max_entries=8, show_spinner="Encoding the texts with the model's tokenizer…")
def _own_texts(model: LoadedModel) -> tuple[dict[str, Text], dict[str, int]]:
    tokenizer, own, dropped = model.tokenizer, {}, {}
    for choice, text in texts().items():
        parts = [(name, tokenizer.encode_known(decode(list(ids)))) for name, ids in text.parts]
        own[choice] = Text(tuple((name, tuple(ids)) for name, (ids, _) in parts))
        dropped[choice] = sum(gone for _, (_, gone) in parts)
    return own, dropped


def texts_for(model: LoadedModel) -> tuple[dict[str, Text], dict[str, int]]:
    """texts() in `model`'s own tokenizer, and how many characters of each its vocabulary lacks
    (left out); GPT-2's texts as they are for a model that speaks GPT-2."""
    if model.tokenizer.is_gpt2:
        offered = texts()
        return offered, dict.fromkeys(offered, 0)
    return _own_texts(model)


@_cache_data
def position_probes(model: GPT, chosen: Text, _tokenizer: Tokenizer = GPT2) -> pd.DataFrame:
    # _tokenizer is not hashed: a model (named by its key) always speaks the same one
    return computed(model, precomputed.PROBES, parts=chosen.parts, tokenizer=_tokenizer,  # shipped, untrained: precomputed
                    doing=f"Fitting position probes on every layer, {chosen.parts[0][0]}")


def scheme_checkpoints() -> list[str]:
    """The shipped model of each scheme that has one (named after its scheme), in registry order."""
    return [scheme for scheme in SCHEMES if scheme in checkpoints.available()]


def probe_panels(extra: LoadedModel | None, chosen: Text) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame]]:
    """Probe frames by line name: the shipped model of each scheme (and `extra`, the sidebar's model
    when it is none of them nor untrained), and an untrained model of every scheme."""
    trained = {}
    with st.spinner(f"Probing every layer of {len(scheme_checkpoints()) + len(SCHEMES) + (extra is not None)} models…"):
        for scheme in scheme_checkpoints():
            trained[scheme] = position_probes(load_offered(scheme)[0], chosen)
        if extra is not None:
            trained[f"{extra.scheme} · {extra.label}"] = position_probes(extra.model, chosen)
        fresh = {scheme: position_probes(untrained(scheme), chosen) for scheme in SCHEMES}
    return trained, fresh


@dataclass(frozen=True)
class ProbeView:
    """What the probe tab draws: the figure, the reading, and the sizes its caption states."""

    figures: list[go.Figure]  # one per panel ("trained" first when there is one), for columns a phone stacks
    reading: list[str]
    fitted: int  # tokens each probe was fitted on
    scored: int  # tokens it was scored on
    window: int  # tokens per window
    trained: bool  # whether any trained model was probed


@_cache_figure
def _probe_view(shipped: tuple[str, ...], extra: LoadedModel | None, chosen: Text) -> ProbeView:
    trained, fresh = probe_panels(extra, chosen)
    panels = {"trained": trained, "untrained": fresh} if trained else {"untrained": fresh}
    sample = next(iter(fresh.values())).iloc[0]
    limit = table_coverage.trained_rows(extra.meta, extra.model) if extra is not None else None
    limits = {f"{extra.scheme} · {extra.label}": limit} if limit is not None else {}
    return ProbeView(probe_figures(panels), probes.probe_reading(trained, fresh, limits=limits), int(sample["fitted"]),
                     int(sample["scored"]), int(sample["window"]), bool(trained))


@_cache_figure
def _own_probe_view(model: LoadedModel, chosen: Text) -> ProbeView:
    """probe_view of a model on its own tokenizer (the shipped models cannot read its text): the model,
    and an untrained model of its shape and vocabulary for every scheme."""
    with st.spinner(f"Probing every layer of {len(SCHEMES) + model.trained} models…"):
        trained = {f"{model.scheme} · {model.label}": position_probes(model.model, chosen, model.tokenizer)} \
            if model.trained else {}
        fresh = {scheme: position_probes(untrained_like(model.model, model.key, scheme), chosen, model.tokenizer)
                 for scheme in SCHEMES}
    panels = {"trained": trained, "untrained": fresh} if trained else {"untrained": fresh}
    sample = next(iter(fresh.values())).iloc[0]
    return ProbeView(probe_figures(panels), probes.probe_reading(trained, fresh), int(sample["fitted"]),
                     int(sample["scored"]), int(sample["window"]), bool(trained))


def probe_view(selection: Selection, chosen: Text) -> ProbeView:
    """The probe figure and its reading for the models probe_panels probes, built once per text
    and set of models (the sidebar's model counts only when it is neither shipped nor untrained)."""
    model = selection.model
    if not model.tokenizer.is_gpt2:
        return _own_probe_view(model, chosen)
    extra = model if model.trained and model.key not in scheme_checkpoints() else None
    return _probe_view(tuple(checkpoints.available()), extra, chosen)


@_cache_data
def head_portraits(model: GPT, chosen: Text) -> heads.HeadPortraits:
    return computed(model, precomputed.PORTRAITS, parts=chosen.parts,
                    doing=f"Measuring the attention of {model.config.n_layer} layers × {model.config.n_head} heads")


def portraits(models: list[LoadedModel], chosen: Text) -> dict[str, heads.HeadPortraits]:
    """Each model's head portraits, by scheme."""
    with st.spinner(f"Measuring every head of {len(models)} models…"):
        return {m.scheme: head_portraits(m.model, chosen) for m in models}


def draws_whole(model: GPT) -> bool:
    """Whether the head grid draws every layer of `model` at once (else one chosen layer)."""
    return model.config.n_layer <= GRID_LAYERS


@_cache_figure
def head_grid(models: list[LoadedModel], chosen: Text, *, sidebar: str, layer: int | None = None) -> go.Figure:
    """The head grid of every model, the `sidebar` scheme's line marked, built once per text: every
    layer, or only `layer` (1-based) of each model when given."""
    shown = {(f"{s} (sidebar)" if s == sidebar else s): p for s, p in portraits(models, chosen).items()}
    return head_grid_figure(shown) if layer is None else head_layer_figure(shown, layer=layer)


def in_layer(portraits: heads.HeadPortraits, layer: int | None) -> heads.HeadPortraits:
    """`portraits` with its table cut to one layer (1-based), or whole when `layer` is None."""
    return portraits if layer is None else replace(portraits, table=portraits.table[portraits.table["layer"] == layer])


def first_tokens(chosen: Text, tokens: int) -> str:
    """What the first `tokens` ids of `chosen` are, part by part, as a caption says it: "the first 577
    tokens of the built-in story", or "all 4,512 tokens of the built-in story and the first 88 of
    held-out stories" when they run past the first part."""
    said, left = [], tokens
    for name, ids in chosen.parts:
        if left <= 0:
            break
        taken = min(left, len(ids))
        said.append(f"all {taken:,} tokens of {name}" if taken == len(ids) else
                    f"the first {taken:,} tokens of {name}" if not said else f"the first {taken:,} of {name}")
        left -= taken
    return " and ".join(said) or "no tokens"


def windows_used(chosen: Text, *, windows: int, length: int) -> str:
    """Which parts of `chosen` the first `windows` windows of `length` tokens come from (probe_text
    cuts each part into whole windows, in order): "10 of the built-in story and 24 of held-out stories"."""
    said, left = [], windows
    for name, ids in chosen.parts:
        taken = min(left, len(ids) // length)
        if taken:
            said.append(f"{taken:,} of {name}")
        left -= taken
    return " and ".join(said) or "none"


@_cache_data
def _sink_test(model: GPT, chosen: Text, window: int) -> streaming.SinkTest:
    return computed(model, precomputed.SINK, parts=chosen.parts, window=window,
                    doing=f"Streaming the text through windows of {window} tokens")


def sink_test(model: LoadedModel, chosen: Text, *, window: int) -> streaming.SinkTest | str:
    """The streaming test of one model, or why it cannot run (a window past a learned table's rows)."""
    try:
        return _sink_test(model.model, chosen, window)
    except ValueError as error:
        return str(error)


def sink_tests(models: list[LoadedModel], chosen: Text, *, window: int) -> dict[str, streaming.SinkTest | str]:
    with st.spinner(f"Streaming the text through windows of {window} tokens, {len(models)} models…"):
        return {m.scheme: sink_test(m, chosen, window=window) for m in models}
