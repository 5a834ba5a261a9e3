"""The slow paths a learner hits, each beside its goal (docs/PERFORMANCE.md's table), measured in headless Chromium:

- Stretching's Write: 256 tokens from each shipped writer, from the click to the first words shown
  and to the last cursor gone, and how many script runs it took.
- Stretching with a learner's model, a copy of the shipped RoPE model under another name (so no
  precomputed views: everything is computed as for any learner's file), opened from a shared folder
  and uploaded in the sidebar: time to the first chart and to the whole page.
- Inside's sink test moved to its largest window, and the Training timeline's step slider moved to
  step 0: key press to page drawn.
- The first page on a cold server against a bare page importing the same libraries: `streamlit run`
  to page drawn.

With `measure.sentence_ratios` (a new sentence on each page against the bare page, and the server's
CPU for it) and `first_visit.measure_cold_visits` (each page's first visit on a fresh server, server
CPU beyond a bare page), `slow_paths_side` measures every row of the table; `python -m lpos bench
--slow-paths` prints it.
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path

from lpos.bench.browser import Server, Tab, chromium
from lpos.bench.common import ROOT, spread
from lpos.bench.common import CPU_GOAL_MS, GOAL_RATIO
from lpos.bench.first_visit import COLD_EXTRA_CPU_S, FLOOR_APP, measure_cold_visits
from lpos.bench.measure import FLOOR_APP as SIDEBAR_FLOOR_APP
from lpos.bench.measure import sentence_ratios
from lpos.pages import url_paths

WRITE_GOALS_S = {"first_words": 0.5, "done": 3.0}
LEARNER_GOALS_S = {"first_chart": 3.0, "page": 10.0}
SINK_GOAL_S = 2.0
TIMELINE_GOAL_S = 1.0
COLD_EXTRA_S = 1.0  # the first page may take at most the bare page's time plus this
LEARNER_FILE = "my-rope.pt"
CURSOR = "▌"  # shown after a text while its model is still writing (lpos.ui.stretch.draw)
# a chart drawn by the current run: one left from an earlier run is marked stale while the page reruns
CHARTS_DRAWN = """n => [...document.querySelectorAll('[data-testid="stPlotlyChart"], .lpos-plotly')]
  .filter(c => c.querySelector('.main-svg') && !c.closest('[data-stale="true"]')).length >= n"""


def _seconds(since: float) -> float:
    return time.perf_counter() - since


BOXES = "[...document.querySelectorAll('[data-testid=\"stMarkdownContainer\"]')]"
# a writer's box: the prompt, its words, the cursor while it writes
WRITING = (f"() => {BOXES}.some(e => e.innerText.length > 'Once upon a time'.length + 2 "
           f"&& e.innerText.startsWith('Once upon a time') && e.innerText.endsWith({CURSOR!r}))")
NO_CURSOR = f"() => !{BOXES}.some(e => e.innerText.endsWith({CURSOR!r}))"  # every writer is done


def measure_write(browser, server: Server, path: str, runs: int) -> dict:
    """Click Write on Stretching (its default prompt, 256 tokens) and time the first words shown and the
    end: no box ends with the cursor and the app has stopped running."""
    first, done = [], []
    for _ in range(runs):
        tab = Tab(browser)
        try:
            tab.open(f"{server.url}/{path}")
            began = time.perf_counter()
            tab.page.get_by_role("button", name="Write").click()
            tab.page.wait_for_function(WRITING, polling="raf", timeout=120_000)
            first.append(_seconds(began))
            tab.wait_drawn(timeout=600, also=NO_CURSOR)
            done.append(_seconds(began))
        finally:
            tab.close()
    return {"first_words_s": spread(first), "done_s": spread(done), "goals_s": WRITE_GOALS_S}


def _learner_visit(tab: Tab, began: float) -> dict:
    tab.page.wait_for_function(CHARTS_DRAWN, arg=1, polling="raf", timeout=600_000)
    first_chart = _seconds(began)
    tab.wait_drawn(0, began, timeout=600)
    return {"first_chart_s": first_chart, "page_s": _seconds(began),
            "errors": tab.page.locator('[data-testid="stException"]').count()}


def measure_learner_stretch(browser, folder: Path) -> dict:
    """Stretching first opened with a learner's RoPE model: from a shared folder, then uploaded."""
    shared = folder / "learner"
    shared.mkdir()
    shutil.copy(ROOT / "checkpoints" / "rope.pt", shared / LEARNER_FILE)
    env = {"LPOS_CHECKPOINT_DIR": str(shared), "LPOS_VIEW_CACHE": str(folder / "learner-views")}
    server = Server(ROOT / "app.py", folder / "learner.log", env=env)
    try:
        path = url_paths()["stretch"]
        tab = Tab(browser)
        try:
            began = time.perf_counter()
            tab.page.goto(f"{server.url}/{path}?model=dir:{LEARNER_FILE}&scheme=rope")
            shared_visit = _learner_visit(tab, began)
        finally:
            tab.close()
        tab = Tab(browser)
        try:
            tab.open(f"{server.url}/{path}")
            before, began = tab.finished, time.perf_counter()
            tab.page.locator("[data-testid='stSidebar'] input[type=file]").set_input_files(str(shared / LEARNER_FILE))
            tab.page.get_by_text(f"Loaded {LEARNER_FILE}").wait_for(timeout=600_000)
            tab.finished = before  # count from the upload: the charts of the shipped model are already there
            upload_visit = _learner_visit(tab, began)
        finally:
            tab.close()
    finally:
        server.stop()
    return {"shared_folder": shared_visit, "upload": upload_visit, "goals_s": LEARNER_GOALS_S}


def _key_press(tab: Tab, slider: str, key: str) -> float:
    thumb = tab.page.locator('[data-testid="stSlider"]').filter(has_text=slider).get_by_role("slider").first
    return tab.act(thumb.focus, lambda: thumb.press(key))["ms"] / 1000


def measure_sink_window(browser, server: Server, path: str, runs: int) -> dict:
    """Inside, "The sink, tested": the window slider from its default to its largest (End), a fresh
    session each time so nothing of an earlier run is kept in the session."""
    times = []
    for run in range(runs):
        tab = Tab(browser)
        try:
            tab.open(f"{server.url}/{path}?scheme=rope&model=rope&text=The+sink+run+{run}")
            tab.page.get_by_role("tab", name="The sink, tested").click()
            times.append(_key_press(tab, "Window W", "End"))
        finally:
            tab.close()
    return {"seconds": spread(times), "goal_s": SINK_GOAL_S, "window": "largest offered", "scheme": "rope"}


def measure_timeline_step(browser, server: Server, path: str, runs: int) -> dict:
    """Training timeline: the step slider from the last snapshot to step 0 (Home), then back (End)."""
    to_zero = []
    for _ in range(runs):
        tab = Tab(browser)
        try:
            tab.open(f"{server.url}/{path}?scheme=rope&model=rope")
            to_zero.append(_key_press(tab, "Training step", "Home"))
        finally:
            tab.close()
    return {"seconds": spread(to_zero), "goal_s": TIMELINE_GOAL_S, "scheme": "rope"}


def measure_cold_first_page(browser, folder: Path, runs: int) -> dict:
    """`streamlit run` to the first page drawn: the app's default page against a bare page that
    imports the same libraries, alternated so that a drift of the machine touches both."""
    (folder / "bare.py").write_text(FLOOR_APP)
    times = {"app": [], "bare": []}
    for run in range(runs):
        for name, script in (("bare", folder / "bare.py"), ("app", ROOT / "app.py")):
            server = Server(script, folder / f"cold-first-{name}-{run}.log")
            try:
                tab = Tab(browser)
                times[name].append(tab.open(server.url, began=server.started)["ms"] / 1000)
                tab.close()
            finally:
                server.stop()
    return {"app_s": spread(times["app"]), "bare_s": spread(times["bare"]), "goal_extra_s": COLD_EXTRA_S}


def measure_on_one_server(browser, folder: Path, runs: int, progress=print) -> dict:
    """Write, the sink window and the timeline step on one server with the shipped models."""
    server = Server(ROOT / "app.py", folder / "slow.log")
    try:
        paths = url_paths()
        warm = Tab(browser)  # the shipped models loaded once: the figures exclude first loads
        for name in ("stretch", "inside", "timeline"):
            warm.open(f"{server.url}/{paths[name]}?scheme=rope&model=rope")
        warm.close()
        progress("Stretching: Write")
        write = measure_write(browser, server, paths["stretch"], runs)
        progress("Inside: the sink test's largest window")
        sink = measure_sink_window(browser, server, paths["inside"], runs)
        progress("Training timeline: step 0")
        timeline = measure_timeline_step(browser, server, paths["timeline"], runs)
    finally:
        server.stop()
    return {"write": write, "sink_window": sink, "timeline_step": timeline}


def report(results: dict) -> list[str]:
    """Lines for the bench table: each slow path against its goal."""
    if not results:
        return []

    def verdict(value: float, goal: float) -> str:
        return "within goal" if value <= goal else f"over goal by {value - goal:.1f} s"

    lines = ["", "Slow paths, medians"]
    if results.get("pages"):
        floor = results["floor"]["sentence_ms"]["median"]
        lines.append(f"  A new sentence, page drawn, against the bare page's {floor:,.0f} ms (goal at most {GOAL_RATIO}x, "
                     f"server CPU at most {CPU_GOAL_MS} ms):")
        for name, page in results["pages"].items():
            ratio, cpu = page["sentence_ratio"], page["sentence_cpu_ms"]["median"]
            over = [what for what, bad in (("ratio", ratio > GOAL_RATIO), ("CPU", cpu > CPU_GOAL_MS)) if bad]
            lines.append(f"    {name:<16} {page['sentence_ms']['median']:>6,.0f} ms  {ratio:.2f}x  CPU {cpu:,.0f} ms"
                         + (f"  over goal: {', '.join(over)}" if over else "")
                         + (f"  {page['errors']} error(s)!" if page["errors"] else ""))
    if results.get("cold_visits"):
        cold = results["cold_visits"]
        lines.append(f"  First visit of each page on a fresh server, server CPU beyond the bare page's "
                     f"{cold['bare']['server_cpu_s']:.2f} s (goal at most +{COLD_EXTRA_CPU_S:.1f} s):")
        for name, page in cold["pages"].items():
            extra = page["extra_cpu_s"]
            lines.append(f"    {name:<16} +{extra:.2f} s" + ("" if extra <= COLD_EXTRA_CPU_S
                                                          else f"  over goal by {extra - COLD_EXTRA_CPU_S:.2f} s"))
    write = results.get("write")
    if write:
        first, done = write["first_words_s"]["median"], write["done_s"]["median"]
        lines.append(f"  Stretching, Write 256 tokens per model: first words {first:.2f} s "
                     f"({verdict(first, write['goals_s']['first_words'])}), done {done:.2f} s "
                     f"({verdict(done, write['goals_s']['done'])})")
    learner = results.get("learner_stretch")
    if learner:
        for how in ("shared_folder", "upload"):
            visit = learner[how]
            lines.append(f"  Stretching with a learner's RoPE model ({how.replace('_', ' ')}): first chart "
                         f"{visit['first_chart_s']:.1f} s ({verdict(visit['first_chart_s'], learner['goals_s']['first_chart'])}), "
                         f"whole page {visit['page_s']:.1f} s ({verdict(visit['page_s'], learner['goals_s']['page'])})"
                         + (f", {visit['errors']} error(s)!" if visit["errors"] else ""))
    for key, what in (("sink_window", "Inside, the sink test at its largest window"),
                      ("timeline_step", "Training timeline, step slider to 0")):
        if results.get(key):
            value = results[key]["seconds"]["median"]
            lines.append(f"  {what}: {value:.2f} s ({verdict(value, results[key]['goal_s'])})")
    cold = results.get("cold_first_page")
    if cold:
        app, bare = cold["app_s"]["median"], cold["bare_s"]["median"]
        lines.append(f"  First page on a cold server: {app:.2f} s against the bare page's {bare:.2f} s "
                     f"({verdict(app - bare, cold['goal_extra_s'])} of at most +{cold['goal_extra_s']:.1f} s)")
    return lines


def slow_paths_side(*, runs: int = 3, progress=print) -> dict:
    """Every slow path in its own browser and temporary folder; needs Playwright and Chromium."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder, chromium() as browser:
        folder = Path(folder)
        results = {}
        (folder / "floor.py").write_text(SIDEBAR_FLOOR_APP)
        server, floor_server = Server(ROOT / "app.py", folder / "app.log"), Server(folder / "floor.py", folder / "floor.log")
        try:
            results["floor"], results["pages"] = sentence_ratios(browser, server, floor_server, url_paths(), runs,
                                                                 progress=progress)
        finally:
            server.stop()
            floor_server.stop()
        results["cold_visits"] = measure_cold_visits(browser, folder, quick=False, progress=progress)
        results |= measure_on_one_server(browser, folder, runs, progress=progress)
        progress("Stretching with a learner's model")
        results["learner_stretch"] = measure_learner_stretch(browser, folder)
        progress("cold first page against a bare page")
        results["cold_first_page"] = measure_cold_first_page(browser, folder, runs)
        return results
