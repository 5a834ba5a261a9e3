"""Sections 4 and 5 of the Stretching-the-context page (sections 1 to 3, RoPE scaling, are
lpos.ui.scaling): the writing job of section 4, the shipped models' continuations written a slice at
a time (lpos.analysis.generate.Writing), kept in the session here, not in the page; and section 5's
shift of every position.

Streamlit reads a click (Stop) only when the run in progress ends, so writing is cut into slices,
one fragment run each; within a slice the boxes (st.empty placeholders) are redrawn every frame,
only those whose text changed, so the texts grow as they are written without a rerun per frame.
"""
from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from streamlit.errors import StreamlitAPIException

from lpos import checkpoints, precomputed
from lpos.analysis import generate, stretch
from lpos.analysis.lengths import training_length
from lpos.positions import SCHEMES
from lpos.tokenizer import encode
from lpos.ui.caching import cache_data
from lpos.ui.models import LoadedModel, label, load_offered, shipped_card
from lpos.ui.selection import MAX_TOKENS, Selection, scheme_models
from lpos.ui.stored import computed
from lpos.ui.text import literal

JOB = "stretch_job"  # the session's writing job
SLICE_SECONDS = 0.5  # one fragment run writes this long, then reruns: a Stop is read within a slice
FRAME_SECONDS = 0.25  # the boxes are redrawn this often within a slice (the first frame: one token each)


def train_length_of(name: str) -> int:
    card = shipped_card(name)
    return training_length(card.meta, card)


def marked_text(prompt: list[int], new: list[int], *, length: int) -> str:
    """Markdown of prompt + continuation with the training length marked where it falls, the text shown
    as the characters it is (lpos.ui.text.literal)."""
    return generate.marked_text(prompt, new, length=length, literal=literal)


def draw(writing: generate.Writing, boxes: dict, drawn: dict[str, tuple[int, bool]]) -> None:
    """Redraw the boxes whose text grew or whose cursor went since `drawn` (name -> tokens, cursor shown)."""
    for name, box in boxes.items():
        shown = (len(writing.written.get(name, [])), name in writing.streams)
        if drawn.get(name) == shown:
            continue
        drawn[name] = shown
        cursor = " ▌" if shown[1] else ""
        box.markdown(marked_text(writing.prompt, writing.written.get(name, []), length=writing.lengths[name]) + cursor)


def writers(names: list[str], prompt: list[int], *, tokens: int) -> tuple[dict[str, str], list[str]]:
    """{name: note} of the shipped models that can continue `prompt`, each note saying how it writes `tokens` more
    and how far (lpos.analysis.generate.writer_note), and a warning for each that cannot (a table whose rows the
    prompt already fills). Read from the models' cards: a model is loaded when it writes."""
    notes, refused = {}, []
    for name in names:
        card = shipped_card(name)
        if generate.room(card, len(prompt)) == 0:
            refused.append(f"**{name}**: the prompt has {len(prompt)} tokens and the learned table "
                           f"{card.max_input_length} rows, so there is no position left to write at.")
            continue
        notes[name] = generate.writer_note(card, prompt_length=len(prompt), tokens=tokens,
                                           trained_at=train_length_of(name))
    return notes, refused


def writing_job(names: list[str], prompt: list[int], *, tokens: int, sampling: generate.Sampling,
                start: bool, stop: bool) -> generate.Writing | None:
    """The session's writing job for these settings, or None when none matches them: Write starts
    one, with the shipped models `names`; Stop, or a control changed while it writes, ends the one in progress."""
    settings = (tuple(prompt), tokens, sampling)
    job = st.session_state.get(JOB)
    if start:
        models = {name: load_offered(name)[0] for name in names}
        lengths = {name: train_length_of(name) for name in models}
        job = st.session_state[JOB] = generate.start_writing(models, prompt, tokens=tokens, sampling=sampling,
                                                             lengths=lengths, settings=settings)
    elif job is not None and job.state == "writing" and (stop or job.settings != settings):
        job.stop("stopped" if stop else "interrupted")
    return job if job is not None and job.settings == settings else None


def write(job: generate.Writing, boxes: dict, *, started: bool) -> None:
    """One slice of writing into the boxes, a frame at a time, then the next slice as a rerun of the
    calling fragment."""
    drawn: dict[str, tuple[int, bool]] = {}
    deadline = time.monotonic() + SLICE_SECONDS
    while True:
        first = not any(job.written.values())  # show the first words at once
        generate.advance(job, seconds=0.0 if first else min(FRAME_SECONDS, deadline - time.monotonic()))
        draw(job, boxes, drawn)
        if job.state != "writing" or time.monotonic() >= deadline:
            break
    if job.state != "writing":
        return
    try:
        st.rerun(scope="fragment")  # the next slice; a Stop clicked meanwhile is read first
    except StreamlitAPIException:  # a full-app run (a test, or the sidebar changed mid-way)
        if started:
            generate.advance(job, seconds=float("inf"))
        else:
            job.stop("interrupted")
        draw(job, boxes, drawn)  # the whole texts, or the cursors gone


def writing_controls(names: list[str]) -> tuple[str, int, generate.Sampling]:
    """The prompt, how many tokens, and how to sample them (top-k at most what every writer can write)."""
    prompt_text = st.text_input("Prompt", "Once upon a time", key="stretch_prompt", max_chars=2000)
    columns = st.columns(5)
    tokens = columns[0].slider("New tokens", 16, generate.MAX_NEW_TOKENS, 256, step=16, key="stretch_tokens")
    greedy = columns[1].toggle("Greedy", key="stretch_greedy", help="Always the most likely token (temperature 0).")
    temperature = columns[2].slider("Temperature", 0.1, 2.0, 0.8, step=0.1, key="stretch_temperature", disabled=greedy)
    vocabulary = min(shipped_card(name).output_count for name in names)  # the writers' own outputs, never assumed
    top_k = columns[3].number_input("Top-k", 1, vocabulary, min(40, vocabulary), key="stretch_top_k", disabled=greedy,
                                    help=f"Sample among the k likeliest tokens; at most {vocabulary:,}, the tokens these "
                                         "models can write.")
    seed = columns[4].number_input("Seed", 0, 2**31 - 1, 0, key="stretch_seed", disabled=greedy)
    sampling = generate.Sampling(0.0 if greedy else temperature, None if greedy else int(top_k), int(seed))
    return prompt_text, tokens, sampling


@st.fragment
def write_past_the_wall() -> None:
    """Section 4: every shipped writer continues one prompt, a slice at a time, until done or stopped."""
    st.subheader("4. Write past the wall")
    # a model per scheme, and a table read at random positions (it reaches past the training length)
    names = [name for name in checkpoints.available() if name in SCHEMES or shipped_card(name).config.random_positions]
    if not names:
        st.info("No shipped checkpoint is installed yet, so there is no trained model to write with.",
                icon=":material/hourglass_empty:")
        return
    prompt_text, tokens, sampling = writing_controls(names)
    write_column, stop_column, _ = st.columns([1, 1, 5])
    start = write_column.button("Write", key="stretch_write", type="primary", icon=":material/edit:")
    stopped = stop_column.button("Stop", key="stretch_stop", icon=":material/stop:")
    prompt = encode(prompt_text)
    if not prompt:
        st.info("Type a prompt to continue: any text works.", icon=":material/edit:")
        return
    notes, refused = writers(names, prompt, tokens=tokens)
    for warning in refused:
        st.warning(warning, icon=":material/straighten:")
    job = writing_job(list(notes), prompt, tokens=tokens, sampling=sampling, start=start, stop=stopped)
    if job is None:
        st.caption("Press Write: each model continues the prompt in its own box, token by token.")
    else:
        boxes = {}
        for name in job.written:
            st.markdown(f"**{label(name)}** · {notes.get(name, '')}")
            boxes[name] = st.container(border=True).empty()  # the whole text, full width: no scroll box
        write(job, boxes, started=start)
        if job.state in ("stopped", "interrupted"):
            st.caption(f"{job.state.capitalize()}: the texts end where writing stopped.")
    st.caption("The line above each text says how its model writes: from a cache of the keys and values already "
               "computed, or reading its whole text again. The red mark is where the text reaches the training length; a sampled run repeats exactly for a seed. "
               "A model with a position table stops at its last row rather than sliding a window, which would "
               "quietly forget the prompt.")


@cache_data(max_entries=256, show_spinner=False)
def offset_change(model: LoadedModel, ids: list[int], *, offset: int) -> float | None:
    """How far the last position's logits move when every position shifts by `offset` (None past
    a table's last row); precomputed for the sidebar's first sentence."""
    return computed(model, precomputed.OFFSET, ids=list(ids), offset=offset)


def offset_changes(models: list[LoadedModel], ids: list[int], offset: int) -> list[float | None]:
    return [offset_change(m, ids, offset=offset) for m in models]


@st.fragment
def shift_section(selection: Selection) -> None:
    """Section 5: the sidebar sentence at positions k, k+1, … against 0, 1, …, in every scheme's model."""
    st.subheader("5. Absolute vs relative, as a shift")
    ids = selection.ids[:MAX_TOKENS]
    if not ids:
        st.info("Type a sentence in the sidebar: this section moves it along the positions.", icon=":material/edit:")
        return
    offset = st.slider("Offset k: the sentence sits at positions k, k+1, … instead of 0, 1, …",
                       stretch.SHIFT_OFFSETS[0], stretch.SHIFT_OFFSETS[-1], stretch.SHIFT_OFFSET, key="stretch_offset")
    models = scheme_models(selection)
    changes = offset_changes(models, ids, offset)
    rows = [{"scheme": m.scheme, "model": m.label,
             "max |change| of the last position's logits": f"{c:.2e}" if c is not None else
             f"n/a: the table has {m.max_input_length} rows; the sentence would end at position {offset + len(ids) - 1}"}
            for m, c in zip(models, changes)]
    st.table(pd.DataFrame(rows).set_index("scheme"))
    st.caption(" ".join(filter(None, (
        stretch.shift_sentence([(m.scheme, c) for m, c in zip(models, changes)], tokens=len(ids), offset=offset,
                               table_rows={m.scheme: m.max_input_length for m in models}),
        *(stretch.shifted_rows_sentence(m.label, m.described, tokens=len(ids), offset=offset)
          for m in models)))))
