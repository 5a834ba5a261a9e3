"""Garbage collection for a server with many sessions: a full collection at most every
FULL_COLLECTION_SECONDS, instead of Streamlit's after every script run.

Streamlit's default (`runner.postScriptGC`) runs `gc.collect(2)` after every run. With torch,
Plotly, pandas and Streamlit loaded that walks about 280,000 long-lived objects: 95 ms a run with
the GIL held, a third of the server's time under load (docs/RELIABILITY.md). `.streamlit/config.toml`
turns it off and app.py calls `collect_garbage()` at the start of every run instead. Python's own
collector still runs as usual; this adds the periodic full pass that frees sessions Streamlit has
dropped (they hold reference cycles, so only a full collection frees them and their uploads).
(`gc.freeze()` after the imports was tried first: as fast, but it also froze the first session's
objects, so that session and its upload were never freed.)
"""
from __future__ import annotations

import ctypes
import ctypes.util
import gc
import threading
import time

from lpos import settings

FULL_COLLECTION_SECONDS = settings.full_gc_seconds()  # LPOS_FULL_GC_SECONDS

_lock = threading.Lock()
_last = time.monotonic()


def collect_garbage() -> bool:
    """Run a full collection if none ran in the last FULL_COLLECTION_SECONDS; True if it ran."""
    global _last
    with _lock:
        if time.monotonic() - _last < FULL_COLLECTION_SECONDS:
            return False
        _last = time.monotonic()
    gc.collect()
    return True


def _libc():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


_LIBC = _libc()


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number (malloc.h)
MMAP_THRESHOLD_BYTES = 1 << 20


def map_large_allocations() -> bool:
    """Serve every allocation of MMAP_THRESHOLD_BYTES or more with its own mapping, returned to the
    system when freed; True if glibc took the setting. By default glibc raises this threshold to
    the size of each large block freed (up to 32 MB), so after the first model load the 26 MB
    token tables and the scoring's 4 MB attention maps come from the heap and their freed space
    stays in the process. Measured in one process (load/memory_steps.py): five shipped
    models 209 -> 179 MB, peak while scoring 1,024 tokens 806 -> 626 MB (docs/PERFORMANCE.md)."""
    mallopt = getattr(_LIBC, "mallopt", None)
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) if mallopt is not None else False


def release_memory() -> bool:
    """Hand freed heap memory back to the operating system (glibc's malloc_trim); True if it could.
    Scoring 1,024 tokens allocates a few hundred MB of short-lived tensors: without this, the
    process keeps that memory as free heap after the scoring is done (docs/PERFORMANCE.md)."""
    trim = getattr(_LIBC, "malloc_trim", None)
    return bool(trim(0)) if trim is not None else False

