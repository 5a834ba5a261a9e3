"""Precomputed views: what the pages draw from a shipped model and fixed texts, computed once.

Stretching's loss curves (every RoPE method and factor) and attention profiles, Inside's position probes, head
portraits and sink test (at every window offered), Length extrapolation's loss along the story (and its
sliding-window baseline) and by position, Order blindness's preset shuffles, Stretching's shift of the
sidebar's first sentence and the Training timeline's band, bias and sentences at every step depend only on a
model and on texts that never change. Each kind is one `View` in `VIEWS`: its key, its analysis call and the
parameters written, read by the pages (lpos.ui.stored.computed) and by `compute`, so the two cannot drift
apart. `precompute` writes the result beside the checkpoint as `checkpoints/<name>.views.pt`
(`untrained.views.pt` for every scheme's untrained model): a sidecar, not the checkpoint's meta, so a rebuild
of the views never rewrites the weights the pinned numbers are read from, and each file stays far under 8 MB.
It holds plain data only (dicts, lists, strings, numbers, tensors), so `load` reads it with
`torch.load(weights_only=True)`, the same safe loader as the checkpoints: nothing in it is executed.

Every entry is keyed by what it was computed from (token ids by digest; the timeline is the checkpoint's own), the
file by the checkpoint it describes (`source_digest`): a page uses an entry only when both match, so a changed
corpus or a retrained model never shows stale numbers. Written by `python -m lpos precompute` (rebuild.sh).
"""
from __future__ import annotations

import dataclasses
import hashlib
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from lpos import checkpoints, corpus
from lpos.analysis import coverage, heads, lengths, probes, shuffle, streaming, stretch, timeline
from lpos.checkpoints.cards import contents_key
from lpos.model import GPT, untrained_model
from lpos.positions import AS_TRAINED, RESCALINGS, SCHEMES, RopeScaling
from lpos.tokenizer import GPT2, encode

VERSION = 1  # bump when an analysis function's output changes: older files are then ignored
SUFFIX = ".views.pt"
UNTRAINED = "untrained"
STRETCH_STORY, STRETCH_HELD_OUT = "The built-in story", "The held-out stream"
INSIDE_STORY, INSIDE_HELD_OUT = "the built-in story", "held-out stories"
FACTORS = (2, 4, 8)
SHUFFLE_PRESETS = {"dog": "The dog bit the man.", "man": "The man bit the dog."}
FIRST_SENTENCE = "The dog bit the man"  # the sidebar's sentence before a learner types one (lpos.ui.selection)
_RECORDS = {cls.__name__: cls for cls in (heads.HeadPortraits, streaming.SinkTest, shuffle.ShuffleResult,
                                           lengths.LossCurve, timeline.TimelineViews)}


def ids_digest(ids) -> str:
    """A digest of token ids (16 bytes of blake2b over int64s): what names a text in a key."""
    return hashlib.blake2b(array("q", [int(t) for t in ids]).tobytes(), digest_size=16).hexdigest()


def text_key(parts) -> tuple[tuple[str, int, str], ...]:
    """Inside's name for a text of (name, ids) parts: each part's name, length and digest."""
    return tuple((name, len(ids), ids_digest(ids)) for name, ids in parts)


def source_digest(name: str) -> str:
    """What a shipped model's sidecar is computed from: its checkpoint's zip records (cards.contents_key: no weights read)."""
    return contents_key(checkpoints.CHECKPOINT_DIR / f"{name}.pt")


def untrained_digest() -> str:
    """What the untrained models depend on: their configuration, seed and torch's generator."""
    return f"untrained/{checkpoints.SHIPPED_SEED}/{torch.__version__.split('+')[0]}"


def sidecar(name: str, folder: Path | None = None) -> Path:
    return Path(folder or checkpoints.CHECKPOINT_DIR) / f"{name}{SUFFIX}"


# --- the fixed texts, shared with the pages ------------------------------------------------------

def stretch_chunks(text: str, meta: dict) -> torch.Tensor | None:
    """Stretching's texts as chunks (n, CHUNK + 1): the story's first chunk, or EVAL_CHUNKS chunks
    of the held-out stream of `meta`'s corpus (None when the corpus is not on this machine)."""
    if text == STRETCH_STORY:
        return stretch.chunks(torch.tensor(encode(corpus.story())), count=1)
    held_out = corpus.held_out_stream(meta)
    return None if held_out is None else stretch.chunks(held_out, count=stretch.EVAL_CHUNKS)


def profile_ids() -> list[int]:
    """The first 1,024 tokens of the story: what Stretching's attention profiles read."""
    return stretch.chunks(torch.tensor(encode(corpus.story())), count=1)[0, :stretch.CHUNK].tolist()


def inside_texts(meta: dict | None) -> dict[str, tuple]:
    """Inside's text choices as (name, ids) parts: the story, and with the held-out stories of
    `meta`'s corpus (when on this machine) both and the held-out alone."""
    story = (INSIDE_STORY, tuple(encode(corpus.story())))
    stream = corpus.held_out_stream(meta, tokens=probes.HELD_OUT_TOKENS) if meta is not None else None
    if stream is None:
        return {INSIDE_STORY: (story,)}
    held_out = (INSIDE_HELD_OUT, tuple(stream.tolist()))
    return {f"{INSIDE_STORY} + {INSIDE_HELD_OUT}": (story, held_out), INSIDE_STORY: (story,),
            INSIDE_HELD_OUT: (held_out,)}


def story_ids(limit: int = 1024) -> list[int]:
    """Length extrapolation's default text: the story, cut where the page cuts it."""
    return encode(corpus.story())[:limit]


def shuffle_pairs() -> list[tuple[list[int], list[int]]]:
    """Order blindness's preset (original, shuffled) pairs at seed 0: the swap and each preset shuffled."""
    dog, man = (encode(text) for text in SHUFFLE_PRESETS.values())
    return [(dog, man), (dog, shuffle.shuffle_earlier(dog, seed=0)), (man, shuffle.shuffle_earlier(man, seed=0))]


def loss_key(method: str, factor: float, chunks: torch.Tensor) -> str:
    return f"losses|{method}|{float(factor):g}|{ids_digest(chunks.reshape(-1).tolist())}"


def inside_key(kind: str, parts, *extra) -> str:
    return "|".join([kind, repr(text_key(parts)), *map(str, extra)])


def curve_key(ids: list[int]) -> str:
    return f"curve|{ids_digest(ids)}"


def position_loss_key(stream: torch.Tensor, length: int) -> str:
    return f"position_loss|{length}|{ids_digest(stream.tolist())}"


def shuffle_key(original: list[int], shuffled: list[int]) -> str:
    return f"shuffle|{ids_digest(original)}|{ids_digest(shuffled)}"


# --- the views: each said once, for the pages that read it and for precompute ---------------------

@dataclass(frozen=True)
class View:
    """One kind of precomputed view. `key(**parameters)` names an entry by what decides its numbers;
    `compute(model, **parameters)` is the analysis call a page makes for it; `written(model, meta,
    corpus_meta)` yields the parameter sets `python -m lpos precompute` writes for a model of that meta
    (held-out texts from corpus_meta's corpus). Parameters in `context` decide nothing a key must name
    (the model's own training length, the tokenizer it speaks): they go to `compute` only."""

    name: str
    key: Callable[..., str]
    compute: Callable[..., object]
    written: Callable[[GPT, dict, dict | None], Iterable[dict]]
    context: tuple[str, ...] = ()
    untrained: bool = False  # written for every scheme's untrained model too (pages draw it beside the trained)
    may_refuse: bool = False  # a ValueError means this model cannot (the page says why): nothing is written

    def key_of(self, parameters: dict) -> str:
        return self.key(**{name: value for name, value in parameters.items() if name not in self.context})


def methods(model: GPT) -> list[tuple[str, float]]:
    """(method, factor) pairs Stretching measures: every method and factor for a model that rotates, none for others."""
    rescaled = [(m, float(f)) for f in FACTORS for m in RESCALINGS]
    return [(AS_TRAINED.name, 1.0)] + (rescaled if model.scheme.shows("rotation") else [])


def probe_text(model: GPT, parts) -> probes.ProbeText:
    return probes.probe_text({name: list(ids) for name, ids in parts}, model=model)


def stream_ids(model: GPT, parts, *, window: int) -> list[int]:
    """The parts one after another, as long as the streaming test of `model` needs."""
    return [t for _, part in parts for t in part][: streaming.streamed_tokens(model, window=window)]


def _losses_written(model, meta, corpus_meta):
    train_length = lengths.training_length(meta, model)
    chunked = (stretch_chunks(text, corpus_meta) for text in (STRETCH_STORY, STRETCH_HELD_OUT))
    return (dict(method=method, factor=factor, chunks=chunks, train_length=train_length)
            for chunks in chunked if chunks is not None for method, factor in methods(model))


def _profiles_written(model, meta, corpus_meta):
    if not model.scheme.shows("rotation"):  # section 3 reads only the model sections 1 to 3 rescale
        return ()
    ids, train_length = profile_ids(), lengths.training_length(meta, model)
    return (dict(method=method, factor=factor, ids=ids, train_length=train_length) for method, factor in methods(model))


def _inside_written(model, meta, corpus_meta):
    return (dict(parts=parts) for parts in inside_texts(corpus_meta).values())


def _position_loss_written(model, meta, corpus_meta):
    length = model.max_input_length
    if length is None or model.config.random_positions:  # only a table read in order has a loss by row
        return ()
    return (dict(stream=stream, length=length) for stream, _ in coverage.position_loss_streams(corpus_meta, length=length))


LOSSES = View("losses", loss_key, lambda model, *, method, factor, chunks, train_length: stretch.chunk_losses(
    model, chunks, rope_scaling=RopeScaling.of(method, factor, train_length)), _losses_written, context=("train_length",))
PROFILE = View("profile", lambda *, method, factor, ids: f"profile|{method}|{float(factor):g}|{ids_digest(ids)}",
               lambda model, *, method, factor, ids, train_length: stretch.attention_profile(
                   model, ids, rope_scaling=RopeScaling.of(method, factor, train_length)), _profiles_written, context=("train_length",))
PROBES = View("probes", lambda *, parts: inside_key("probes", parts), lambda model, *, parts, tokenizer=GPT2:
              probes.position_probes(model, probe_text(model, parts), tokenizer=tokenizer),
              _inside_written, context=("tokenizer",), untrained=True)
PORTRAITS = View("portraits", lambda *, parts: inside_key("portraits", parts), lambda model, *, parts:
                 heads.head_portraits(model, probe_text(model, parts)), _inside_written, untrained=True)
SINK = View("sink", lambda *, parts, window: inside_key("sink", parts, window), lambda model, *, parts, window:
            streaming.sink_test(model, stream_ids(model, parts, window=window), window=window),
            lambda model, meta, corpus_meta: (dict(text, window=window) for text in _inside_written(model, meta, corpus_meta)
                                              for window in streaming.WINDOWS),  # every window the slider offers
            untrained=True, may_refuse=True)  # a window past a table's rows: the page says why
CURVE = View("curve", curve_key, lambda model, *, ids: lengths.loss_along_text(model, ids),
             lambda model, meta, corpus_meta: [dict(ids=story_ids())], untrained=True)
SLIDING = View("sliding", lambda *, ids, window: f"sliding|{window}|{ids_digest(ids)}",  # the curve's baseline
               lambda model, *, ids, window: lengths.sliding_losses(model, ids, window=window),
               lambda model, meta, corpus_meta: [dict(ids=story_ids(), window=lengths.training_length(meta, model))],
               untrained=True)
SHUFFLE = View("shuffle", shuffle_key, lambda model, *, original, shuffled, tokenizer=GPT2: shuffle.shuffle_experiment(
    model, original, shuffled=shuffled, tokenizer=tokenizer),
    lambda model, meta, corpus_meta: [dict(original=o, shuffled=s) for o, s in shuffle_pairs()], context=("tokenizer",))
POSITION_LOSS = View("position_loss", position_loss_key, lambda model, *, stream, length: coverage.loss_by_position(
    model, stream, length=length, max_windows=coverage.POSITION_WINDOWS), _position_loss_written)
TIMELINE = View("timeline", lambda: "timeline|snapshots", lambda model, *, line: timeline.timeline_views(line),
                lambda model, meta, corpus_meta: [dict(line=line) for line in [timeline.timeline_of(meta)] if line is not None],
                context=("line",))  # the snapshots are the checkpoint's own: the file's digest names them
OFFSET = View("offset", lambda *, ids, offset: f"offset|{offset}|{ids_digest(ids)}",
              lambda model, *, ids, offset: stretch.offset_change(model, ids, offset=offset), lambda model, meta,
              corpus_meta: [dict(ids=encode(FIRST_SENTENCE), offset=o) for o in stretch.SHIFT_OFFSETS], untrained=True)
VIEWS = (LOSSES, PROFILE, PROBES, PORTRAITS, SINK, CURVE, SLIDING, SHUFFLE, POSITION_LOSS, TIMELINE, OFFSET)


# --- computing -----------------------------------------------------------------------------------

def entries(model: GPT, meta: dict, *, held_out_meta: dict | None = None,
            views: tuple[View, ...] = VIEWS) -> Iterator[tuple[View, dict]]:
    """Every (view, parameters) `compute` writes for one model, in order; `held_out_meta` names the
    corpus of the held-out texts (the model's own meta by default)."""
    corpus_meta = meta if held_out_meta is None else held_out_meta
    return ((view, parameters) for view in views for parameters in view.written(model, meta, corpus_meta))


def compute(model: GPT, meta: dict, *, held_out_meta: dict | None = None, views: tuple[View, ...] = VIEWS,
            progress=print) -> dict[str, object]:
    """Every view of one model, {key: result}, each from its View's own call (the one a page makes)."""
    results: dict[str, object] = {}
    for view, parameters in entries(model, meta, held_out_meta=held_out_meta, views=views):
        key = view.key_of(parameters)
        progress(f"  {view.name}: {key[:80]}")
        try:
            results[key] = view.compute(model, **parameters)
        except ValueError:
            if not view.may_refuse:
                raise
    return results


# --- plain data, both ways -----------------------------------------------------------------------

def to_plain(value):
    """`value` as dicts, lists, strings, numbers and tensors only (what weights_only loads)."""
    if isinstance(value, pd.DataFrame):
        return {"__frame__": [[str(c), _column(value[c])] for c in value.columns]}
    if isinstance(value, np.ndarray):
        return {"__array__": torch.from_numpy(np.array(value, copy=True, order="C"))}
    if dataclasses.is_dataclass(value) and type(value).__name__ in _RECORDS:
        return {"__record__": type(value).__name__,
                "fields": {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if isinstance(value, dict):
        return {"__dict__": [[to_plain(k), to_plain(v)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str, torch.Tensor)):
        return value
    raise TypeError(f"cannot store a {type(value).__name__} as plain data")


def _column(series: pd.Series):
    values = series.to_numpy()
    if values.dtype.kind not in "biuf":  # text (object or pandas' string dtype): a list, rebuilt by pandas
        return [to_plain(v) for v in series.tolist()]
    return {"__array__": torch.from_numpy(values.copy())}


def from_plain(value):
    """The inverse of `to_plain`; only the records this module names are ever built."""
    if isinstance(value, list):
        return [from_plain(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "__array__" in value:
        return value["__array__"].numpy()
    if "__frame__" in value:
        return pd.DataFrame({name: from_plain(column) for name, column in value["__frame__"]})
    if "__record__" in value:
        fields = {k: from_plain(v) for k, v in value["fields"].items()}
        return _RECORDS[value["__record__"]](**fields)
    if "__dict__" in value:  # a tuple key comes back a list: made hashable again
        pairs = ((from_plain(k), from_plain(v)) for k, v in value["__dict__"])
        return {(tuple(k) if isinstance(k, list) else k): v for k, v in pairs}
    raise ValueError("not a precomputed view")


def save_plain(entries: dict[str, object], path: Path, *, source_digest: str) -> None:
    """Write entries already made plain (`to_plain`), marked with this VERSION and their source."""
    temporary = Path(path).with_name(Path(path).name + ".tmp")  # a reader never sees half a file
    torch.save({"version": VERSION, "source_digest": source_digest, "views": entries}, temporary)
    temporary.replace(path)


def load(path: Path, *, source_digest: str) -> dict[str, object]:
    """{key: plain entry} of a sidecar (decode each with `from_plain` when used); {} when the file
    is missing, of another version, or computed from another checkpoint."""
    if not Path(path).is_file():
        return {}
    payload = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(payload, dict) or payload.get("version") != VERSION or payload.get("source_digest") != source_digest:
        return {}
    return payload.get("views") or {}


def precompute(names: list[str] | None = None, *, folder: Path | None = None, views: tuple[View, ...] = VIEWS,
               progress=print) -> list[Path]:
    """Compute and write the sidecar of every shipped model (`names`, all by default) and of the
    untrained models; returns the files written. With some `views` only, their entries are added
    to the files' others (a new view without recomputing the rest)."""
    names, written, first_meta = checkpoints.available() if names is None else names, [], None

    def write(path: Path, entries: dict[str, object], digest: str) -> None:
        kept = {} if views == VIEWS else load(path, source_digest=digest)
        save_plain(kept | {key: to_plain(value) for key, value in entries.items()}, path, source_digest=digest)
        written.append(path)

    for name in names:
        progress(name)
        model, meta = checkpoints.load(name)
        first_meta = first_meta or meta
        write(sidecar(name, folder), compute(model, meta, views=views, progress=progress), source_digest(name))
    if first_meta is None and checkpoints.available():
        first_meta = checkpoints.load(checkpoints.available()[0])[1]
    untrained = {}  # the views pages draw for the untrained model of every scheme, beside the trained ones
    for scheme in SCHEMES if any(view.untrained for view in views) else ():
        progress(f"untrained {scheme}")
        done = compute(untrained_model(scheme), {}, held_out_meta=first_meta or {}, progress=progress,
                       views=tuple(view for view in views if view.untrained))
        untrained.update({f"{scheme}|{key}": value for key, value in done.items()})
    if untrained:
        write(sidecar(UNTRAINED, folder), untrained, untrained_digest())
    return written
