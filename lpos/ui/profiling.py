"""An opt-in profiler for the script thread: with LPOS_PROFILE naming a folder, every full run of
a page is sampled by pyinstrument and one text report per run is written there, with the
session beside it (`pyinstrument --load <file>.pyisession` shows it again, e.g. as HTML).

The profiler is started inside the run, on the thread that runs the script: pyinstrument samples
only the thread that started it, and both the server and AppTest run scripts on a thread of
their own, so a profiler started by the caller sees only the caller waiting. Without the
variable this costs nothing and pyinstrument need not be installed (it is a dev dependency).
"""
from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lpos import settings

PROFILE_ENV = settings.PROFILE
INTERVAL_S = 0.001  # one sample a millisecond: a run costs 10 to 200 ms


def report_path(folder: Path, page: str, *, now: float) -> Path:
    """Where one run's report goes: the page's name, made safe for a file name, and a timestamp."""
    safe = re.sub(r"[^A-Za-z0-9]+", "_", page).strip("_") or "page"
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f".{int(now * 1e6) % 1_000_000:06d}"
    return folder / f"{safe}-{stamp}.txt"


@contextmanager
def profiled(page: str) -> Iterator[None]:
    """Profile the body when LPOS_PROFILE names a folder (created if missing); else just run it."""
    folder = settings.profile_dir()
    if not folder:
        yield
        return
    from pyinstrument import Profiler

    profiler = Profiler(interval=INTERVAL_S, async_mode="disabled")
    profiler.start()
    began = time.time()
    try:
        yield
    finally:
        session = profiler.stop()
        path = report_path(Path(folder), page, now=began)
        path.parent.mkdir(parents=True, exist_ok=True)
        header = f"page: {page}\nstarted: {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(began))} UTC\n"
        header += f"cpu_s: {session.cpu_time:.4f}\nwall_s: {session.duration:.4f}\n"
        path.write_text(header + profiler.output_text(unicode=True, color=False, short_mode=False), encoding="utf-8")
        session.save(str(path.with_suffix(".pyisession")))
