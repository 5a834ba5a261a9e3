"""The Inside-the-model page's texts: the story and the held-out stories it offers, in each model's own
tokens, the choice between them, how captions name their tokens and the recipe steps that read them; and the
caches the page's three tabs (lpos.ui.probes, lpos.ui.heads, lpos.ui.streaming) keep their results and
figures in, per (model, text) and per (models, text), so a new sidebar sentence rebuilds none of them.

A text is named in a cache key by a digest of its token ids (`text_key`): Streamlit's hasher
walks ids one by one, and the ten probe lookups of the default text's ~4,500 ids took more than
half of the page's 150-170 ms per new sentence (docs/PERFORMANCE.md). A model is named by its
key (lpos.ui.caching).
"""
from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from lpos import checkpoints, precomputed
from lpos.analysis.probes import held_out_ids, story_ids
from lpos.figures.export import Ref, Step, step
from lpos.tokenizer import decode
from lpos.ui.caching import HASH_FUNCS
from lpos.ui.models import LoadedModel, shipped_card

Texts = tuple[tuple[str, tuple[int, ...]], ...]  # (name, ids) pairs
FIGURES = 16  # per function: one per (models, text) a class looks at
STORY = precomputed.INSIDE_STORY
HELD_OUT = precomputed.INSIDE_HELD_OUT
text_key = precomputed.text_key  # what names a text in a cache key: each part's name, length and ids' digest


@dataclass(frozen=True)
class Text:
    """One choice of the page's text box: its parts, named in cache keys by `text_key`."""

    parts: Texts


_HASH = {**HASH_FUNCS, Text: lambda text: text_key(text.parts)}
cache_per_text = st.cache_data(hash_funcs=_HASH, max_entries=64, show_spinner=False)  # results per (model, text)
cache_figure_per_text = st.cache_resource(hash_funcs=_HASH, max_entries=FIGURES, show_spinner=False)


@st.cache_resource(show_spinner="Reading the held-out stories…")
def _texts(name: str | None) -> dict[str, Text]:
    return {choice: Text(parts) for choice, parts in
            precomputed.inside_texts(shipped_card(name).meta if name is not None else None).items()}


def texts() -> dict[str, Text]:
    """The texts the page offers, by choice: the story, the held-out stories when the training
    corpus is on this machine, and both (lpos.precomputed.inside_texts)."""
    shipped = checkpoints.available()
    return _texts(shipped[0] if shipped else None)


@st.cache_resource(hash_funcs=HASH_FUNCS, max_entries=8, show_spinner="Encoding the texts with the model's tokenizer…")
def _own_texts(model: LoadedModel) -> tuple[dict[str, Text], dict[str, str]]:
    tokenizer, own, left_out = model.tokenizer, {}, {}
    for choice, text in texts().items():
        decoded = [(name, decode(list(ids))) for name, ids in text.parts]
        own[choice] = Text(tuple((name, tuple(tokenizer.encode_known(part)[0])) for name, part in decoded))
        left_out[choice] = tokenizer.left_out_sentence("".join(part for _, part in decoded), of="this text")
    return own, left_out


def texts_for(model: LoadedModel) -> tuple[dict[str, Text], dict[str, str]]:
    """texts() in `model`'s own tokenizer, and for each the sentence saying which characters its vocabulary
    lacks and left out ("" for none); GPT-2's texts as they are for a model that speaks GPT-2."""
    if model.tokenizer.is_gpt2:
        offered = texts()
        return offered, dict.fromkeys(offered, "")
    return _own_texts(model)


def text_choice(model: LoadedModel) -> Text:
    """The page's text box: the text every tab reads, encoded with `model`'s own tokenizer."""
    offered, left_out = texts_for(model)
    if len(offered) > 1:
        source = st.radio("Text", list(offered), key="inside_text", horizontal=True,
                          help="Stories no model was trained on: the app's own story, and the held-out stories of the "
                               "training corpus (the text the model cards' losses are measured on).")
    else:  # one choice is no choice: say it instead of offering it
        source = next(iter(offered))
        st.markdown(f"Text: **{source}** (no model was trained on it).")  # no word to learners about a corpus they cannot add
    if left_out[source]:
        st.caption(left_out[source])
    return offered[source]


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


def text_steps(chosen: Text, tokens: int) -> tuple[list[Step], dict[str, Ref]]:
    """The steps (lpos.figures.export) that read the parts of `chosen` its first `tokens` ids come from, in the
    model's own tokens, and those parts as the {name: ids} a later step reads."""
    steps, parts, left = [], {}, tokens
    for name, ids in chosen.parts:
        if left <= 0:
            break
        if name == STORY:
            steps.append(step("story", story_ids, tokenizer=Ref("tokenizer")))
        else:  # the held-out stories of the shipped models' corpus (texts())
            steps += [step("corpus_model, corpus_meta", checkpoints.load, checkpoints.available()[0]),
                      step("held_out", held_out_ids, Ref("corpus_meta"), tokenizer=Ref("tokenizer"))]
        parts[name] = Ref(steps[-1].target)
        left -= len(ids)
    return steps, parts
