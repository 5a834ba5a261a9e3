"""Precomputed views: what the pages draw from a shipped model and fixed texts, computed once.

Stretching's loss curves (every RoPE method and factor) and attention profiles, Inside's position
probes, head portraits and sink test, Length extrapolation's loss along the story, and Order
blindness's preset shuffles depend only on a model and on texts that never change. `compute`
runs the same analysis functions the pages would, and `save` writes the result beside the
checkpoint as `checkpoints/<name>.views.pt` (`untrained.views.pt` for the five untrained models):
a sidecar, not the checkpoint's meta, so a rebuild of the views never rewrites the weights the
pinned numbers are read from, and each file stays far under 8 MB. It holds plain data only
(dicts, lists, strings, numbers, tensors), so `load` reads it with `torch.load(weights_only=True)`,
the same safe loader as the checkpoints: nothing in it is executed.

Every entry is keyed by what it was computed from (a digest of the token ids read), and the
file by the checkpoint it describes (`source_digest`): a page uses an entry only when both
match, so a changed corpus or a retrained model never shows stale numbers. Written by
`python -m lpos precompute` (and at the end of checkpoints/rebuild.sh).
"""
from __future__ import annotations

import dataclasses
import hashlib
from array import array
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from lpos import checkpoints, corpus
from lpos.analysis import heads, lengths, probes, shuffle, streaming, stretch, table_coverage
from lpos.model import GPT
from lpos.positions import SCHEMES, RopeScaling
from lpos.tokenizer import encode

VERSION = 1  # bump when an analysis function's output changes: older files are then ignored
SUFFIX = ".views.pt"
UNTRAINED = "untrained"
STRETCH_STORY, STRETCH_HELD_OUT = "The built-in story", "The held-out stream"
INSIDE_STORY, INSIDE_HELD_OUT = "the built-in story", "held-out stories"
FACTORS = (2, 4, 8)
SINK_WINDOW = 64  # the sink test's default window; the others are computed when asked
SHUFFLE_PRESETS = {"dog": "The dog bit the man.", "man": "The man bit the dog."}
_RECORDS = {cls.__name__: cls for cls in (heads.HeadPortraits, streaming.SinkTest, shuffle.ShuffleResult,
                                           lengths.LossCurve)}


def ids_digest(ids) -> str:
    """A digest of token ids (16 bytes of blake2b over int64s): what names a text in a key."""
    return hashlib.blake2b(array("q", [int(t) for t in ids]).tobytes(), digest_size=16).hexdigest()


def text_key(parts) -> tuple[tuple[str, int, str], ...]:
    """Inside's name for a text of (name, ids) parts: each part's name, length and digest."""
    return tuple((name, len(ids), ids_digest(ids)) for name, ids in parts)


def file_digest(path: Path) -> str:
    return hashlib.blake2b(Path(path).read_bytes(), digest_size=16).hexdigest()


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


# --- the keys ------------------------------------------------------------------------------------

def loss_key(method: str, factor: float, chunks: torch.Tensor) -> str:
    return f"losses|{method}|{float(factor):g}|{ids_digest(chunks.reshape(-1).tolist())}"


def profile_key(method: str, factor: float, ids: list[int]) -> str:
    return f"profile|{method}|{float(factor):g}|{ids_digest(ids)}"


def inside_key(kind: str, parts, *extra) -> str:
    return "|".join([kind, repr(text_key(parts)), *map(str, extra)])


def curve_key(ids: list[int]) -> str:
    return f"curve|{ids_digest(ids)}"


def position_loss_key(stream: torch.Tensor, length: int) -> str:
    return f"position_loss|{length}|{ids_digest(stream.tolist())}"


def shuffle_key(original: list[int], shuffled: list[int]) -> str:
    return f"shuffle|{ids_digest(original)}|{ids_digest(shuffled)}"


# --- computing -----------------------------------------------------------------------------------

def scaling(method: str, factor: float, train_length: int) -> RopeScaling | None:
    return RopeScaling(method, factor, train_length) if method != "none" else None


def methods(model: GPT) -> list[tuple[str, float]]:
    """(method, factor) pairs Stretching measures: every method and factor for RoPE, none for others."""
    if model.config.position != "rope":
        return [("none", 1.0)]
    return [("none", 1.0)] + [(m, float(f)) for f in FACTORS for m in ("pi", "ntk", "yarn")]


def compute(model: GPT, meta: dict, *, held_out_meta: dict | None = None, progress=print) -> dict[str, object]:
    """Every view of one model, {key: result}, each from the same analysis call a page makes.
    `held_out_meta` names the corpus of the held-out texts (the model's own meta by default)."""
    corpus_meta = meta if held_out_meta is None else held_out_meta
    train_length = lengths.training_length(meta, model)
    views: dict[str, object] = {}
    for text in (STRETCH_STORY, STRETCH_HELD_OUT):
        chunks = stretch_chunks(text, corpus_meta)
        if chunks is None:
            continue
        for method, factor in methods(model):
            progress(f"  losses: {text}, {method} ×{factor:g}")
            views[loss_key(method, factor, chunks)] = stretch.chunk_losses(
                model, chunks, rope_scaling=scaling(method, factor, train_length))
    if model.config.position == "rope":
        ids = profile_ids()
        for method, factor in methods(model):
            progress(f"  attention profile: {method} ×{factor:g}")
            views[profile_key(method, factor, ids)] = stretch.attention_profile(
                model, ids, rope_scaling=scaling(method, factor, train_length))
    views.update(compute_inside(model, corpus_meta, progress=progress))
    views[curve_key(story_ids())] = lengths.loss_along_text(model, story_ids())
    for original, shuffled in shuffle_pairs():
        views[shuffle_key(original, shuffled)] = shuffle.shuffle_experiment(model, original, shuffled=shuffled)
    if model.max_input_length is not None:  # a table: the loss by position beside a short-window model
        length = model.config.block_size
        for stream, name in table_coverage.position_loss_streams(corpus_meta, length=length):
            progress(f"  loss by position: {name}")
            views[position_loss_key(stream, length)] = table_coverage.loss_by_position(
                model, stream, length=length, max_windows=table_coverage.POSITION_WINDOWS)
    return views


def compute_inside(model: GPT, corpus_meta: dict | None, *, progress=print) -> dict[str, object]:
    """Inside's probes, head portraits and sink test (default window) for every text offered."""
    views: dict[str, object] = {}
    sinks: dict[str, streaming.SinkTest] = {}  # by the ids streamed: texts that start alike share a test
    for name, parts in inside_texts(corpus_meta).items():
        progress(f"  inside: {name}")
        text = probes.probe_text({part: list(ids) for part, ids in parts}, model=model)
        views[inside_key("probes", parts)] = probes.position_probes(model, text)
        views[inside_key("portraits", parts)] = heads.head_portraits(model, text)
        ids = [t for _, part in parts for t in part]
        streamed = ids[: streaming.streamed_tokens(model, window=SINK_WINDOW)]
        try:
            digest = ids_digest(streamed)
            sinks[digest] = sinks.get(digest) or streaming.sink_test(model, streamed, window=SINK_WINDOW)
            views[inside_key("sink", parts, SINK_WINDOW)] = sinks[digest]
        except ValueError:  # a window past a learned table's rows: the page says why, live
            pass
    return views


def compute_untrained(meta: dict | None, *, progress=print) -> dict[str, dict[str, object]]:
    """Inside's views of the untrained model of every scheme (the page draws them beside the trained)."""
    from lpos.model import untrained_model

    out = {}
    for scheme in SCHEMES:
        progress(f"untrained {scheme}")
        out[scheme] = compute_inside(untrained_model(scheme), meta, progress=progress)
    return out


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
    if "__dict__" in value:
        return {_hashable(from_plain(k)): from_plain(v) for k, v in value["__dict__"]}
    raise ValueError("not a precomputed view")


def _hashable(key):
    return tuple(key) if isinstance(key, list) else key


def save(views: dict[str, object], path: Path, *, source_digest: str) -> None:
    save_plain({key: to_plain(value) for key, value in views.items()}, path, source_digest=source_digest)


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


def precompute(names: list[str] | None = None, *, folder: Path | None = None, progress=print) -> list[Path]:
    """Compute and write the sidecar of every shipped model (`names`, all by default) and of the
    untrained models; returns the files written."""
    names = checkpoints.available() if names is None else names
    written = []
    first_meta = None
    for name in names:
        progress(name)
        model, meta = checkpoints.load(name)
        first_meta = first_meta or meta
        path = sidecar(name, folder)
        save(compute(model, meta, progress=progress), path, source_digest=file_digest(checkpoints.CHECKPOINT_DIR / f"{name}.pt"))
        written.append(path)
    if first_meta is None and checkpoints.available():
        first_meta = checkpoints.load(checkpoints.available()[0])[1]
    untrained = compute_untrained(first_meta, progress=progress)
    path = sidecar(UNTRAINED, folder)
    save({f"{scheme}|{key}": value for scheme, views in untrained.items() for key, value in views.items()}, path,
         source_digest=untrained_digest())
    written.append(path)
    return written
