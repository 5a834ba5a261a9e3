"""Results the pages need not compute: the shipped and untrained models' precomputed views, and
what was computed for a shared-folder model, kept on disk for the next student and server.

A view function asks `computed(model, view, **parameters)` for one of lpos.precomputed's VIEWS:
the entry `stored` finds, that is lpos.precomputed's sidecar (`checkpoints/<name>.views.pt`, read
once per process and only when a page asks) for a shipped or untrained model, the disk cache's for
a shared-folder model, this process's memory for any other (an upload, named by its digest); else
the view's own analysis call, computed live and `keep`-ed. The key and the call come from the same
View record `python -m lpos precompute` writes from. A model is known by the reference it was loaded
under (lpos.ui.caching, lpos.checkpoints.reference); an upload is never written anywhere.

A section that needs several results computes them under one `progress` bar that names each piece
of work as it starts; results already stored draw no bar at all.
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import streamlit as st

from lpos import settings
from lpos import checkpoints, precomputed
from lpos.checkpoints import ModelRef
from lpos.model import GPT
from lpos.ui.caching import model_key
from lpos.ui.collect import release_memory
from lpos.ui.models import LoadedModel, shared_dir_files

UNTRAINED = precomputed.UNTRAINED
MEMORY_ENTRIES = 256  # results kept in memory for models with no sidecar or disk cache (uploads), oldest dropped first
_lock = threading.Lock()
_memory: OrderedDict[str, object] = OrderedDict()  # "<model key>|<view key>" -> plain entry


class Progress:
    """One progress bar over the `total` results (each a `unit`: "curve") a section needs; it appears
    only once one of them has to be computed (`doing`), saying what and which of them."""

    def __init__(self, total: int, unit: str):
        self.slot, self.total, self.unit, self.done = st.empty(), total, unit, 0

    def doing(self, work: str) -> None:
        self.slot.progress(self.done / self.total, text=f"{work}, {self.unit} {self.done + 1} of {self.total}…")


@contextmanager
def progress(total: int, unit: str) -> Iterator[Progress]:
    """A Progress over `total` results, gone once they are all in (a cached caller replays an empty slot)."""
    bar = Progress(total, unit)
    try:
        yield bar
    finally:
        bar.slot.empty()


@st.cache_resource(show_spinner=False, max_entries=16)
def sidecar_entries(name: str) -> dict:
    """A shipped model's (or the untrained models') precomputed entries, still as plain data."""
    if name == UNTRAINED:
        return precomputed.load(precomputed.sidecar(UNTRAINED), source_digest=precomputed.untrained_digest())
    return precomputed.load(precomputed.sidecar(name), source_digest=precomputed.source_digest(name))


def cache_key(model: GPT | LoadedModel) -> str:
    """What names `model` in a cache key (a shipped LoadedModel not loaded stays so); ValueError for a
    model the app did not load."""
    return model.cache_key if isinstance(model, LoadedModel) else model_key(model)


def _owner(model: GPT | LoadedModel) -> tuple[ModelRef, str] | None:
    """The reference and scheme `model` was loaded under (None for a model the app did not load)."""
    try:
        return ModelRef.from_cache_key(cache_key(model))
    except ValueError:
        return None


def computed(model: GPT | LoadedModel, view: precomputed.View, *, doing: str | None = None,
             progress: Progress | None = None, **parameters):
    """`view` of `model` for these parameters: the stored entry, else the view's own analysis call,
    saying what it does and for which model on `progress` or under an st.status (quietly when `doing`
    is None), then kept (on disk for a shared-folder model, in memory for any other). A LoadedModel's
    weights are loaded only for the analysis call."""
    key = view.key_of(parameters)
    found = stored(model, key)
    if found is None:
        found = _compute(model.model if isinstance(model, LoadedModel) else model, view, key, parameters,
                         doing=doing, progress=progress)
    if progress is not None:
        progress.done += 1
    return found


def _compute(model: GPT, view: precomputed.View, key: str, parameters: dict, *, doing: str | None,
             progress: Progress | None):
    """computed's live path: the analysis call, said on `progress` or an st.status, then kept."""
    owner = _owner(model)
    work = f"{doing} ({owner[0].shown if owner else 'the model'})"
    if doing is None:
        found = view.compute(model, **parameters)
    elif progress is not None:
        progress.doing(work)
        found = view.compute(model, **parameters)
    else:
        slot = st.empty()  # the status goes once the result is in (a cached caller replays an empty slot)
        with slot.status(f"{work}…", expanded=False) as status:
            status.write("Computed once and kept on disk: the next student who picks this model reads it at once."
                         if owner and owner[0].is_shared and cache_folder() is not None else
                         "Computed once and kept while the app runs: the next visit reads it at once.")
            found = view.compute(model, **parameters)
        slot.empty()
    release_memory()  # the computation's large temporaries are freed: give them back to the system
    keep(model, key, found)
    return found


def stored(model: GPT | LoadedModel, key: str):
    """The precomputed result `key` of `model`, or None when it has to be computed."""
    owner = _owner(model)
    if owner is None:
        return None
    ref, scheme = owner
    if ref.is_untrained:
        entry = sidecar_entries(UNTRAINED).get(f"{scheme}|{key}")
    elif ref.is_shipped and ref.name in checkpoints.available():
        entry = sidecar_entries(ref.name).get(key)
    elif ref.is_shared and cache_folder() is not None:
        entry = _disk(str(ref)).get(key)
    else:  # an upload, or a shared-folder model with no disk cache
        with _lock:
            entry = _memory.get(f"{cache_key(model)}|{key}")
    return None if entry is None else precomputed.from_plain(entry)


def keep(model: GPT, key: str, value) -> None:
    """Remember a result computed for a shared-folder model on disk, for any other model but the
    shipped and untrained ones (which have theirs) in this process's memory: an upload is never written."""
    owner = _owner(model)
    if owner is None or owner[0].is_shipped or owner[0].is_untrained:
        return
    folder = cache_folder()
    if not owner[0].is_shared or folder is None:
        with _lock:
            _memory[f"{model_key(model)}|{key}"] = precomputed.to_plain(value)
            while len(_memory) > MEMORY_ENTRIES:
                _memory.popitem(last=False)
        return
    name = str(owner[0])
    path = _disk_path(name)
    if path is None:
        return
    with _lock:
        entries = dict(_disk(name))
        entries[key] = precomputed.to_plain(value)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            precomputed.save_plain(entries, path, source_digest=path.name[: -len(precomputed.SUFFIX)])
        except OSError:  # a read-only disk: the in-process caches still hold it
            return
        _disk_entries.clear()


def cache_folder() -> Path | None:
    return settings.view_cache()  # LPOS_VIEW_CACHE: where shared-folder models' views are kept; "off" keeps none


@st.cache_resource(show_spinner=False, max_entries=64)
def _digest(name: str, stamp: tuple) -> str:
    path = shared_dir_files().get(name)
    files = sorted(path.iterdir()) if path.is_dir() else [path]
    return "-".join(hashlib.blake2b(f.read_bytes(), digest_size=16).hexdigest() for f in files if f.is_file())[:64]


def _disk_path(name: str) -> Path | None:
    path, folder = shared_dir_files().get(name), cache_folder()
    if path is None or folder is None:
        return None
    stat = path.stat()
    digest = _digest(name, (stat.st_size, stat.st_mtime_ns))
    return folder / f"{digest}{precomputed.SUFFIX}"


def _disk(name: str) -> dict:
    path = _disk_path(name)
    return {} if path is None else _disk_entries(str(path))


@st.cache_resource(show_spinner=False, max_entries=16)
def _disk_entries(file: str) -> dict:
    path = Path(file)
    try:
        return precomputed.load(path, source_digest=path.name[: -len(precomputed.SUFFIX)])
    except Exception:  # a damaged cache file is recomputed, never trusted
        return {}
