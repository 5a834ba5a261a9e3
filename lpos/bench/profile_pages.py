"""The server's CPU per new sidebar sentence, page by page, without a browser, and where it goes.

`python -m lpos.bench.profile_pages [--runs 5] [--page inside] [--out DIR]`: each page is opened
with AppTest from app.py (as tests/conftest.py does), given one warm-up sentence, then `runs` new
sentences. Each change is timed twice over: first without the profiler (the CPU time of this
process, `time.process_time`, all threads: the script runs on AppTest's script thread), then with
LPOS_PROFILE set, so lpos/ui/profiling.py samples the script thread with pyinstrument. The
median CPU comes from the unprofiled runs; the top functions from the profiled ones, as shares of
the samples: the project's own functions by time inside them (lpos/, pages/) and every function
by self time.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from lpos.bench.common import CPU_GOAL_MS, ROOT

SENTENCES = ["The little dog {n} ran to the old red barn and slept",
             "A girl named Lily {n} found a shiny stone by the river",
             "Once upon a time {n} there was a cat who liked to sing",
             "The sun was hot {n} so Tom and his mom went to the park",
             "Sam had a big blue ball {n} and he gave it to his friend",
             "The bird sat on the tree {n} and looked at the sky all day",
             "Mia wanted a cake {n} but the shop was closed that night"]
OWN = (str(ROOT / "lpos"), str(ROOT / "pages"))
NOT_COUNTED = (str(ROOT / "lpos" / "ui" / "profiling.py"),)  # the profiler's own wrapper frame


def pages() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "pages").glob("*.py"))


def sentence(n: int) -> str:
    return SENTENCES[n % len(SENTENCES)].format(n=n)


def top_functions(sessions, *, own: bool, count: int = 3) -> list[tuple[str, float]]:
    """(name, % of the samples) of the functions with the most time, averaged over the runs: inside
    them (own code only, each counted once per call path) or in themselves (self time, any code).
    A share, not milliseconds: pyinstrument samples wall time, which a busy machine stretches, and
    its own overhead (a check on every call) inflates a profiled run's CPU two- to threefold."""
    totals: dict[str, float] = defaultdict(float)
    root_time, runs = 1.0, max(len(sessions), 1)

    def walk(frame, above: frozenset) -> None:
        name = f"{frame.function} ({frame.file_path_short}:{frame.line_no})"
        path = frame.file_path or ""
        if own:
            counted = (path.startswith(OWN) and path not in NOT_COUNTED and frame.function != "<module>"
                       and name not in above)
            if counted:
                totals[name] += frame.time / root_time * 100 / runs  # a whole run: exactly 100
                above = above | {name}
        elif not frame.is_synthetic:
            totals[name] += frame.total_self_time / root_time * 100 / runs
        for child in frame.children:
            walk(child, above)

    for session in sessions:
        root = session.root_frame(trim_stem=False)
        if root is not None and root.time > 0:
            root_time = root.time
            walk(root, frozenset())
    return sorted(totals.items(), key=lambda item: -item[1])[:count]


def profile_page(page: str, *, runs: int, scheme: str, model: str, folder: Path, start: int) -> dict:
    """Median CPU ms per new sentence on one page, and its top functions."""
    from pyinstrument.session import Session

    from lpos.ui.harness import app_test  # here: importing lpos.ui loads Streamlit
    from lpos.ui.profiling import PROFILE_ENV

    os.environ.pop(PROFILE_ENV, None)
    at = app_test(timeout=600)
    at.query_params.update(scheme=scheme, model=model)
    at.run()
    at.switch_page(page).run()
    n = start

    def change() -> float:
        nonlocal n
        at.text_area(key="sentence").set_value(sentence(n))
        n += 1
        began = time.process_time()
        at.run()
        spent = (time.process_time() - began) * 1000
        if at.exception:
            raise RuntimeError(f"{page}: {at.exception[0].message}")
        return spent

    change()  # warm-up: the first change may still fill a cache the first load did not
    plain = [change() for _ in range(runs)]
    page_folder = folder / Path(page).stem
    os.environ[PROFILE_ENV] = str(page_folder)
    try:
        profiled = [change() for _ in range(runs)]
    finally:
        os.environ.pop(PROFILE_ENV, None)
    sessions = [Session.load(p) for p in sorted(page_folder.glob("*.pyisession"))[-runs:]]
    return {"page": page, "median_ms": statistics.median(plain), "min_ms": min(plain), "max_ms": max(plain),
            "profiled_median_ms": statistics.median(profiled), "own": top_functions(sessions, own=True),
            "self": top_functions(sessions, own=False), "reports": str(page_folder), "next": n}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lpos.bench.profile_pages", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="new sentences per page (after one warm-up)")
    parser.add_argument("--page", action="append", help="a page's file stem (inside, stretch, ...); repeatable")
    parser.add_argument("--scheme", default="learned")
    parser.add_argument("--model", default="learned", help="a shipped name or 'untrained'")
    parser.add_argument("--out", help="folder for the pyinstrument reports (default: a new temporary folder)")
    args = parser.parse_args(argv)
    from lpos.ui.harness import server_navigation_mode

    server_navigation_mode()
    folder = Path(args.out or tempfile.mkdtemp(prefix="lpos-profile-"))
    chosen = [p for p in pages() if not args.page or Path(p).stem in args.page]
    print(f"{args.runs} new sentences per page, scheme {args.scheme}, model {args.model}; reports in {folder}")
    n = 0
    for page in chosen:
        try:
            result = profile_page(page, runs=args.runs, scheme=args.scheme, model=args.model, folder=folder, start=n)
        except Exception as error:  # noqa: BLE001 - a page that fails is reported, and the others still measured
            print(f"\n{page}: FAILED: {error}")
            continue
        n = result["next"]
        mark = "ok" if result["median_ms"] <= CPU_GOAL_MS else f"over {CPU_GOAL_MS}"
        print(f"\n{page}: CPU per new sentence median {result['median_ms']:.0f} ms "
              f"[{result['min_ms']:.0f}–{result['max_ms']:.0f}] ({mark}); profiled {result['profiled_median_ms']:.0f} ms")
        for title, key in (("own code, time inside", "own"), ("any code, self time", "self")):
            print(f"  top, {title}: " + "; ".join(f"{name} {share:.0f}%" for name, share in result[key]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
