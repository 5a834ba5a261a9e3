"""The Stretching-the-context views: losses and attention under RoPE scaling, keyed by model,
text, method and factor; the figures of sections 1 to 3, which do not depend on the
sidebar sentence, built once per input (a new sentence reruns the page: it rebuilds none of them);
the writing job of section 4 (five continuations written a slice at a time, its state kept in the
session here, not in the page); and section 5's shift of every position.

Sections 1 to 3 rescale one model that rotates queries and keys (`rope_model`): the selected one
when it is a trained one (a Llama, say: its own base and training length), else the first shipped
one; the shipped models of the schemes that place positions without rotating and without a last
row (`references`: sinusoidal and ALiBi among them) are drawn beside it when they speak its tokens.
Section 4 writes with the shipped models.
"""
from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
import torch

from streamlit.errors import StreamlitAPIException

from lpos import checkpoints, corpus, precomputed
from lpos.analysis import generate, stretch
from lpos.analysis.lengths import training_length
from lpos.figures.stretch import attention_profile_figure, scaled_loss_figure, wavelength_methods_figure
from lpos.model import GPT
from lpos.positions import REGISTRY, ROPE_METHODS, schemes_with
from lpos.tokenizer import END_OF_TEXT_ID, decode
from lpos.ui.caching import cache_data, cache_resource
from lpos.ui.text import literal
from lpos.ui.models import LoadedModel, label, load_offered
from lpos.ui.stored import computed

STORY = precomputed.STRETCH_STORY
HELD_OUT = precomputed.STRETCH_HELD_OUT
FIGURES = 32  # per function: factors × texts, or factors × layers × measures
JOB = "stretch_job"  # the session's writing job
SLICE_SECONDS = 0.25  # one fragment run writes this long, then reruns: a Stop is read within a slice
SEPARATOR = "\n\n:gray-background[⏎ end of story: the model wrote the separator between training stories ⏎]\n\n"
LEADING_SPACES = re.compile(r"^ +")  # four would start a Markdown code block


def shipped(name: str) -> tuple[GPT, dict] | None:
    return load_offered(name) if name in checkpoints.available() else None


def train_length_of(name: str) -> int:
    model, meta = load_offered(name)
    return training_length(meta, model)


def rope_model(selected: LoadedModel) -> LoadedModel | None:
    """The model sections 1 to 3 rescale: the selected model when it is a trained model whose scheme
    rotates queries and keys (a Llama from the shared folder, an upload), else the shipped model of
    the first such scheme (None when neither)."""
    if selected.model.scheme.shows("rotation") and selected.trained:
        return selected
    name = next((name for name in schemes_with("rotation") if name in checkpoints.available()), None)
    if name is None:
        return None
    model, meta = load_offered(name)
    return LoadedModel(name, label(name), model, meta)


def references() -> list[str]:
    """The shipped models drawn beside the rescaled one, in registry order: those of the schemes that
    place positions without rotating them (a table, sinusoids, a bias, counts) and read any length."""
    return [name for name, scheme in REGISTRY.items() if scheme.views and not scheme.shows("rotation")
            and name in checkpoints.available() and load_offered(name)[0].max_input_length is None]


def left_off_sentence(rope: LoadedModel) -> str:
    """Which shipped models section 1 leaves off and why, from the models themselves ("" when none is)."""
    if not speaks_gpt2(rope):
        return (f" Only {rope.label}'s own curves are drawn: the shipped models read GPT-2's tokens, so they cannot "
                "score the same text.")
    ended = {name: load_offered(name)[0].max_input_length for name in REGISTRY if name in checkpoints.available()}
    ended = {name: rows for name, rows in ended.items() if rows is not None}
    return "".join(f" The {name} model has no row past {rows:,} and is left off (see Length extrapolation)."
                   for name, rows in ended.items())


def rope_length(rope: LoadedModel) -> int:
    """The length `rope` was trained on: what its rescaling stretches."""
    return training_length(rope.meta, rope.model)


def speaks_gpt2(rope: LoadedModel) -> bool:
    """Whether `rope` reads GPT-2's tokens, as the shipped references (and their held-out stream) do."""
    return rope.tokenizer.is_gpt2


@cache_resource(max_entries=16, show_spinner="Reading the held-out stories…")
def text_chunks(rope: LoadedModel, text: str) -> torch.Tensor | None:
    """A text every curve is scored on, as chunks of CHUNK + 1 of `rope`'s tokens: the story's first
    chunk, or EVAL_CHUNKS chunks spread over the held-out stream (None when its corpus is not here,
    or the model speaks other tokens than the stream's GPT-2, or the story is too short in them)."""
    if speaks_gpt2(rope):
        return precomputed.stretch_chunks(text, {} if text == STORY else rope.meta)
    if text != STORY:
        return None
    story = torch.tensor(rope.tokenizer.encode_known(corpus.story())[0])
    return stretch.chunks(story, count=1) if len(story) > stretch.CHUNK else None


@cache_data(max_entries=128, show_spinner=False)
def _losses(model: GPT, method: str, factor: float, text: str, rope: LoadedModel) -> pd.DataFrame:
    """One curve: `model` under `method`, scored on `text` in `rope`'s tokens, rescaled from `rope`'s training length."""
    # the shipped models' are precomputed; a shared-folder model's are kept on disk once scored
    table = computed(model, precomputed.LOSSES, method=method, factor=factor, chunks=text_chunks(rope, text),
                     train_length=rope_length(rope),
                     doing=f"Scoring {text.lower()} at 128 to 1,024 tokens ({model.config.position}, {method} ×{factor:g})")
    curve = stretch.curve_name(model.config.position, method, factor)
    return stretch.loss_frame({curve: table}, text=text)


def loss_curves(rope: LoadedModel, factor: float, *, text: str) -> pd.DataFrame | None:
    """Every curve of one loss figure: `rope` under each method at `factor`, then the shipped
    references when they read the same tokens; None when the text is not available."""
    if text_chunks(rope, text) is None:
        return None
    frames = [_losses(rope.model, method, factor if method != "none" else 1.0, text, rope) for method in ROPE_METHODS]
    if speaks_gpt2(rope):
        frames += [_losses(load_offered(name)[0], "none", 1.0, text, rope) for name in references()]
    return pd.concat(frames, ignore_index=True)


@cache_data(max_entries=32, show_spinner=False)
def attention_profiles(rope: LoadedModel, factor: float) -> dict[str, pd.DataFrame]:
    ids = precomputed.profile_ids() if speaks_gpt2(rope) else text_chunks(rope, STORY)[0, :stretch.CHUNK].tolist()
    out = {}
    for method in ROPE_METHODS:
        profile = computed(rope.model, precomputed.PROFILE, method=method, factor=factor if method != "none" else 1.0,
                           ids=ids, train_length=rope_length(rope),  # precomputed for the shipped model
                           doing=f"Reading {len(ids):,} tokens through {rope.model.config.n_layer} layers under "
                                 f"{method} ×{factor:g}")
        out[stretch.curve_name(rope.scheme, method, factor)] = profile
    return out


@cache_resource(max_entries=FIGURES, show_spinner=False)
def _loss_view(rope: LoadedModel, shipped: tuple[str, ...], factor: float, text: str) -> tuple[go.Figure, str] | None:
    frame = loss_curves(rope, factor, text=text)
    if frame is None:
        return None
    predictions, train_length = int(frame["tokens"].max()), rope_length(rope)
    figure = scaled_loss_figure(frame, title=f"{text}: {predictions:,} predictions at every length", train_length=train_length)
    return figure, stretch.loss_reading(frame, train_length=train_length, factor=factor)


def loss_view(rope: LoadedModel, factor: int, *, text: str) -> tuple[go.Figure, str] | None:
    """Section 1's figure and reading for one text; None when the text is not available for `rope`."""
    return _loss_view(rope, tuple(checkpoints.available()), float(factor), text)


@cache_resource(max_entries=FIGURES, show_spinner=False)
def wavelength_view(head: int, *, factor: int, train_length: int, base: float) -> tuple[go.Figure, str]:
    """Section 2: each pair's wavelength under every method at RoPE base `base`, and YaRN's regions in words."""
    waves = stretch.wavelength_frame(head, base, factor=factor, original_length=train_length)
    return (wavelength_methods_figure(waves, original_length=train_length, factor=factor),
            stretch.wavelength_reading(waves, original_length=train_length, factor=factor))


@cache_resource(max_entries=FIGURES, show_spinner=False)
def attention_view(rope: LoadedModel, factor: int, *, layer: int, measure: str) -> tuple[go.Figure, str]:
    """Section 3: one layer's attention measure along 1,024 tokens under every method, and its reading."""
    profiles, train_length = attention_profiles(rope, float(factor)), rope_length(rope)
    return (attention_profile_figure(profiles, layer=layer, measure=measure, train_length=train_length),
            stretch.profile_reading(profiles, layer=layer, train_length=train_length))


@cache_data(max_entries=256, show_spinner=False)
def offset_change(model: GPT, ids: list[int], *, offset: int) -> float | None:
    """How far the last position's logits move when every position shifts by `offset` (None past
    a table's last row)."""
    return stretch.offset_change(model, list(ids), offset=offset)


def offset_changes(models: list[LoadedModel], ids: list[int], offset: int) -> list[float | None]:
    return [offset_change(m.model, ids, offset=offset) for m in models]


def plain(text: str) -> str:
    """Markdown showing `text` as the characters it is, line breaks and leading spaces kept: a
    prompt's `<b>`, `**` or `===` line is never markup (lpos.ui.text.literal, plus setext `=`)."""
    lines = [literal(line).replace("=", "\\=") for line in text.split("\n")]
    return "  \n".join(LEADING_SPACES.sub(lambda m: "\u00a0" * len(m.group()), line) for line in lines)


def readable(ids: list[int]) -> str:
    """Markdown of GPT-2 tokens as text, each end-of-text token a visible label, never its raw name."""
    runs, run = [], []
    for token in ids:
        if token == END_OF_TEXT_ID:
            runs.append(run)
            run = []
        else:
            run.append(token)
    return SEPARATOR.join(plain(decode(r)) for r in runs + [run])


def marked_text(prompt: list[int], new: list[int], *, length: int) -> str:
    """Markdown of prompt + continuation with the training length marked where it falls."""
    ids = prompt + new
    shown = readable(ids[:length])
    if len(ids) > length:
        after = readable(ids[length:])  # a leading space is already kept (as a no-break space)
        shown += f" :red[**⟦{length} tokens: the training length ends here⟧**]" + ("" if after[:1].isspace() else " ") + after
    return shown


@dataclass
class Writing:
    """Five continuations in progress: advanced a slice at a time by successive runs of the
    page's fragment, so a click on Stop (which Streamlit queues until a run ends) is seen
    within one slice. The streams hold each model's KV cache."""

    settings: tuple  # what the controls said when writing started
    prompt: list[int]
    lengths: dict[str, int]  # training length per model, where the mark goes
    streams: dict[str, Iterator[int]]
    written: dict[str, list[int]] = field(default_factory=dict)
    state: str = "writing"  # writing | done | stopped | interrupted

    def stop(self, state: str) -> None:
        self.streams.clear()  # frees the caches
        self.state = state


def start_writing(models: dict[str, GPT], prompt: list[int], *, tokens: int, sampling: generate.Sampling,
                  lengths: dict[str, int], settings: tuple) -> Writing:
    streams = {name: generate.stream(model, prompt, max_new_tokens=tokens, sampling=sampling)
               for name, model in models.items()}
    return Writing(settings, prompt, lengths, streams, {name: [] for name in models})


def advance(writing: Writing, *, seconds: float) -> None:
    """One token from every model in turn, until `seconds` have passed or every model is done."""
    deadline = time.monotonic() + seconds
    while writing.streams and time.monotonic() < deadline:
        for name in list(writing.streams):
            token = next(writing.streams[name], None)
            if token is None:
                del writing.streams[name]
            else:
                writing.written[name].append(token)
    if not writing.streams and writing.state == "writing":
        writing.state = "done"


def draw(writing: Writing, boxes: dict) -> None:
    for name, box in boxes.items():
        cursor = " ▌" if name in writing.streams else ""
        box.markdown(marked_text(writing.prompt, writing.written.get(name, []), length=writing.lengths[name]) + cursor)


def writers(names: list[str], prompt: list[int]) -> tuple[dict[str, GPT], dict[str, str], list[str]]:
    """The shipped models that can continue `prompt`, a note on how far each may write, and a
    warning for each that cannot (a table whose rows the prompt already fills)."""
    models, notes, refused = {}, {}, []
    for name in names:
        model, _ = load_offered(name)
        room = generate.room(model, len(prompt))
        if room == 0:
            refused.append(f"**{name}**: the prompt has {len(prompt)} tokens and the learned table "
                           f"{model.max_input_length} rows, so there is no position left to write at.")
            continue
        models[name] = model
        notes[name] = (f"stops at its {model.max_input_length}-row table: {room} new tokens at most"
                       if room is not None else "reads its whole text, past the training length")
    return models, notes, refused


def writing_job(models: dict[str, GPT], prompt: list[int], *, tokens: int, sampling: generate.Sampling,
                start: bool, stop: bool) -> Writing | None:
    """The session's writing job for these settings, or None when none matches them: Write starts
    one; Stop, or a control changed while it writes, ends the one in progress."""
    settings = (tuple(prompt), tokens, sampling)
    job = st.session_state.get(JOB)
    if start:
        lengths = {name: train_length_of(name) for name in models}
        job = st.session_state[JOB] = start_writing(models, prompt, tokens=tokens, sampling=sampling,
                                                    lengths=lengths, settings=settings)
    elif job is not None and job.state == "writing" and (stop or job.settings != settings):
        job.stop("stopped" if stop else "interrupted")
    return job if job is not None and job.settings == settings else None


def write(job: Writing, boxes: dict, *, started: bool) -> None:
    """One slice of writing into the boxes, then the next slice as a rerun of the calling fragment."""
    advance(job, seconds=SLICE_SECONDS)
    draw(job, boxes)
    if job.state != "writing":
        return
    try:
        st.rerun(scope="fragment")  # the next slice; a Stop clicked meanwhile is read first
    except StreamlitAPIException:  # a full-app run (a test, or the sidebar changed mid-way)
        if started:
            advance(job, seconds=float("inf"))
            draw(job, boxes)
        else:
            job.stop("interrupted")
