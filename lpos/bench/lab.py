"""The lab's figures (`python -m lpos bench --lab`, docs/PERFORMANCE.md).

- Time to 95%: the default run (`LabArgs()`: copy, a 32-token window, the tiny preset) of each scheme, trained
  in this process on one thread as a worker trains; the first progress report whose accuracy (on the fresh
  samples of the steps since the one before) reaches 95%, in seconds of training. Goal: under 60 s for
  learned and rope.
- A new sentence on Embeddings while another session's run trains, against the same server idle (before the
  run and after it is stopped), as the app bench's new-sentence row times it. Goal: at most 1.5 times.
- The server's memory while four sessions start a run one after another (one trains, the rest wait): the server
  process alone and with its worker processes, sampled until every run has finished.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch

from lpos.bench.browser import Server, Tab, chromium, peak_memory
from lpos.bench.common import ROOT, spread
from lpos.bench.measure import sentence
from lpos.positions import SCHEMES

TARGET = 0.95  # accuracy inside the window
GOAL_SECONDS = 60.0  # learned and rope reach TARGET within this: defaults that teach within a minute
GOAL_SCHEMES = ("learned", "rope")
BUSY_GOAL_RATIO = 1.5  # a new sentence with a run training, against idle
QUEUED = 4  # sessions that press Start, one after another, for the memory figure
QUEUED_STEPS = 200  # each of their runs: short, so that all four finish
BUSY_STEPS = 5000  # the run that trains while sentences are timed: stopped once they are
RESULTS = "How far each run reads"  # the heading the Lab page shows under finished runs


def time_to_target(scheme: str) -> dict:
    """The default run of `scheme` on one thread: seconds until its accuracy first reaches TARGET (None if never),
    the whole run's seconds and steps, and its accuracy at the window."""
    from lpos import lab

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as a worker process (lpos.lab.job)
    try:
        args = lab.LabArgs(scheme=scheme)
        _, meta = lab.train(args)
    finally:
        torch.set_num_threads(threads)
    run = meta["lab"]
    reached = next((point for point in run["curve"] if point["accuracy"] >= TARGET), None)
    return {"scheme": scheme, "task": args.task, "window": args.window, "preset": args.preset,
            "seconds_to_target": reached["seconds"] if reached else None, "step_at_target": reached["step"] if reached else None,
            "seconds": run["seconds"], "steps": run["steps_done"],
            "accuracy_at_window": lab.summary(meta)["accuracy_by_length"][args.window]}


def start_run(tab: Tab, server: Server, *, steps: int) -> None:
    """Open the Lab page in `tab`, set the steps and press Start training (the other settings at their defaults)."""
    tab.open(f"{server.url}/lab")
    box = tab.page.get_by_label("Steps")
    tab.act(lambda: box.fill(str(steps)), lambda: box.press("Enter"))
    tab.act(lambda: None, tab.page.get_by_role("button", name="Start training").click)


def sentences(tab: Tab, server: Server, first: int, runs: int) -> list[float]:
    return [tab.new_sentence(sentence(7, first + run), server=server)["ms"] for run in range(runs)]


def busy_page(browser, folder: Path, runs: int, progress=print) -> dict:
    """A new sentence on Embeddings idle, while another session's run trains, and idle again."""
    server = Server(ROOT / "app.py", folder / "busy.log")
    try:
        tab = Tab(browser)
        tab.open(f"{server.url}/?scheme=learned&model=learned")
        tab.new_sentence(sentence(7, 99), server=server)  # not counted: the page's first views and code
        idle = sentences(tab, server, 0, runs)
        progress("a run training in the lab while a new sentence is timed")
        trainer = Tab(browser)
        start_run(trainer, server, steps=BUSY_STEPS)
        trainer.page.get_by_text(f" of {BUSY_STEPS:,}", exact=False).first.wait_for(timeout=180_000)  # it trains
        busy = sentences(tab, server, runs, runs)
        still = trainer.page.get_by_text(RESULTS).count() == 0
        trainer.act(lambda: None, trainer.page.get_by_role("button", name="Stop").first.click)
        trainer.page.get_by_text(RESULTS).wait_for(timeout=120_000)
        idle += sentences(tab, server, 2 * runs, runs)
        return {"idle_ms": spread(idle), "busy_ms": spread(busy), "ratio": spread(busy)["median"] / spread(idle)["median"],
                "trained_throughout": still, "goal_ratio": BUSY_GOAL_RATIO}
    finally:
        server.stop()


def server_alone_mb(server: Server) -> float:
    """The server process's RSS without its children (the lab's worker processes)."""
    import psutil

    try:
        return psutil.Process(server.process.pid).memory_info().rss / 2**20
    except psutil.Error:
        return 0.0


def queued_memory(browser, folder: Path, *, sessions: int = QUEUED, steps: int = QUEUED_STEPS, progress=print) -> dict:
    """`sessions` sessions press Start one after another; each is told its place in the queue (or is training
    already); the server's peak memory until every run has finished."""
    server = Server(ROOT / "app.py", folder / "queue.log")
    try:
        tabs = [Tab(browser) for _ in range(sessions)]
        began = time.perf_counter()
        with peak_memory(server, measures={"server_mb": lambda: server_alone_mb(server),
                                           "with_workers_mb": server.rss_mb}) as peak:
            places = []
            for tab in tabs:
                start_run(tab, server, steps=steps)
                places.append(tab.page.get_by_text("in the queue", exact=False).count() > 0)
            progress(f"{sessions} runs started, {sum(places)} shown a place in the queue")
            for tab in tabs:
                tab.page.get_by_text(RESULTS).wait_for(timeout=1_800_000)
        errors = sum(tab.page.locator('[data-testid="stException"]').count() for tab in tabs)
        return {"sessions": sessions, "steps": steps, "shown_a_place": sum(places), "errors": errors,
                "finished": sum(tab.page.get_by_text(RESULTS).count() > 0 for tab in tabs),
                "seconds": time.perf_counter() - began, **{f"peak_{k}": v for k, v in peak.items()}}
    finally:
        server.stop()


def lab_side(*, runs: int = 5, schemes=tuple(SCHEMES), sessions: int = QUEUED, progress=print) -> dict:
    results = {"time_to_target": [], "target": TARGET, "goal_s": GOAL_SECONDS}
    for scheme in schemes:
        progress(f"training {scheme}'s default run on one thread")
        results["time_to_target"].append(time_to_target(scheme))
    with tempfile.TemporaryDirectory() as folder, chromium() as browser:
        results["busy_page"] = busy_page(browser, Path(folder), runs, progress=progress)
        progress(f"{sessions} sessions starting a run one after another")
        results["queued_memory"] = queued_memory(browser, Path(folder), sessions=sessions, progress=progress)
    return results


def report(results: dict) -> list[str]:
    lines = [f"Lab: the default run (copy, window 32, tiny, one thread): seconds until accuracy first reaches "
             f"{results['target']:.0%} (goal: under {results['goal_s']:.0f} s for {' and '.join(GOAL_SCHEMES)})"]
    for run in results["time_to_target"]:
        reached = run["seconds_to_target"]
        verdict = "" if run["scheme"] not in GOAL_SCHEMES else (
            "  met" if reached is not None and reached < results["goal_s"] else "  MISSED")
        lines.append(f"  {run['scheme']:<13} " + (f"{reached:6.1f} s (step {run['step_at_target']:,})" if reached is not None
                                                 else "never reached") +
                     f"; the run {run['seconds']:.1f} s, {run['steps']:,} steps, {run['accuracy_at_window']:.1%} at the window"
                     + verdict)
    if "busy_page" in results:
        busy = results["busy_page"]
        lines.append(f"New sentence on Embeddings: idle {busy['idle_ms']['median']:,.0f} ms, with a run training "
                     f"{busy['busy_ms']['median']:,.0f} ms: {busy['ratio']:.2f}x (goal at most {busy['goal_ratio']}x)"
                     + ("" if busy["trained_throughout"] else " (the run ended before the last sentence)")
                     + ("  met" if busy["ratio"] <= busy["goal_ratio"] else "  over goal"))
    if "queued_memory" in results:
        queue = results["queued_memory"]
        lines.append(f"{queue['sessions']} sessions press Start one after another ({queue['steps']} steps each, "
                     f"{queue['shown_a_place']} shown a place in the queue, {queue['errors']} errors, "
                     f"{queue['finished']} finished, all done in "
                     f"{queue['seconds']:.0f} s): server peak {queue['peak_server_mb']:,.0f} MB, "
                     f"{queue['peak_with_workers_mb']:,.0f} MB with its worker")
    return lines
