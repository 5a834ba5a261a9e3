"""The one browser harness, for the tests (tests/conftest.py's fixtures), the bench and the load scripts:
`streamlit run` on a free loopback port, waited for until it answers its health check; a sampler of its
memory; Chromium launched with the project's flags; and a Playwright tab that counts the server's
`script_finished` messages and knows when the page is drawn.

Drawn, on Streamlit's own signals: a `script_finished` message (a run that was not cut short by a rerun)
has arrived since the action, and then in the page (DRAWN) the stApp element's data-test-script-state is
"notRunning", no element is stale or a placeholder for code still loading, every chart has drawn its
title (the last thing Plotly draws; every lpos figure has one), and every chart updated in place
(lpos.ui.plotly_react) shows the figure the server last sent it.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from lpos.bench.common import CHROMIUM, CHROMIUM_ARGS, ROOT

APP = ROOT / "app.py"
VIEWPORT = {"width": 1400, "height": 1000}
CHECK_MS = 10  # between two checks of the drawn condition (Playwright delivers the websocket's frames meanwhile)
# A chart on the page: st.plotly_chart's element, or the div of a chart updated in place (lpos.ui.plotly_react).
CHARTS = "[data-testid='stPlotlyChart'], .lpos-plotly"
# `sent` is {key: digest} of the figures sent to charts updated in place since the action (Tab.charts_sent): each
# chart still on the page shows the last one sent to it (a run that followed may have removed a chart an earlier
# run sent, as the Lesson's Next does with the step's figure; a chart sent and not yet mounted has no title yet).
DRAWN = """(sent = {}) => document.querySelector('[data-testid="stApp"]')?.getAttribute('data-test-script-state') === 'notRunning'
  && !document.querySelector('[data-testid="stSkeleton"], [data-stale="true"], .lpos-plotly[data-drawing]')
  && [...document.querySelectorAll('[data-testid="stPlotlyChart"], [data-testid="stBidiComponentRegular"]')]
    .every(c => c.querySelector('.main-svg .gtitle'))
  && Object.entries(sent).every(([key, digest]) => {
    const div = document.querySelector(`.lpos-plotly[data-key="${CSS.escape(key)}"]`);
    return !div || div.dataset.drawn === digest;
  })"""
# Before an action: listens (once per document) for the first press or key after it, and returns the page's clock.
# Playwright waits for an element to hold still over two animation frames before its click presses the mouse
# (26-45 ms here; 4-5 ms before a key press): a learner's click has no such wait, so an action is timed from
# the first pointerdown or keydown the page receives.
INPUT_CLOCK = """() => {
  if (!window.lposInputClock) {
    window.lposInputClock = true;
    for (const type of ['pointerdown', 'keydown'])
      document.addEventListener(type, () => { window.lposInputAt ??= performance.now(); }, true);
  }
  window.lposInputAt = null;
  return performance.now();
}"""


def free_port() -> int:
    """A TCP port no process listens on now, on the loopback address."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_browser() -> None:
    """Raise RuntimeError with what to install when Playwright or Chromium is missing."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        raise RuntimeError("Playwright is not installed: pip install -r requirements-dev.txt") from None
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"Chromium not found at {CHROMIUM}: apt-get install -y chromium, or set LPOS_CHROMIUM")


def launch(playwright):
    """Headless Chromium (Debian's, not Playwright's download) from a sync or async Playwright."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


@contextmanager
def chromium():
    """A headless Chromium for the length of a `with` block (sync Playwright)."""
    from playwright.sync_api import sync_playwright

    check_browser()
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            yield browser
        finally:
            browser.close()


class Server:
    """`streamlit run SCRIPT` (app.py unless told) on a free loopback port, started when constructed and
    healthy when the constructor returns; `.started` is the perf_counter time the command was issued, `.log`
    its output. A context manager that stops it."""

    def __init__(self, script: Path = APP, log: Path | None = None, *, env: dict | None = None,
                 timeout: float = 120):
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log = log if log is not None else Path(os.devnull)
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(script), "--server.headless=true", f"--server.port={port}",
             "--server.address=127.0.0.1", "--browser.gatherUsageStats=false", "--server.fileWatcherType=none"],
            cwd=ROOT, stdout=self.log.open("w"), stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        said = self.log.read_text()[-2000:] if log is not None else ""
        raise RuntimeError(f"streamlit did not start within {timeout:.0f} s: {said}")

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _tree(self):
        import psutil

        process = psutil.Process(self.process.pid)
        return [process, *process.children(recursive=True)]

    def rss_mb(self) -> float:
        import psutil

        try:
            return sum(p.memory_info().rss for p in self._tree()) / 2**20
        except psutil.Error:
            return 0.0

    def cpu_s(self) -> float:
        """CPU seconds (user + system) the server process tree has used so far."""
        import psutil

        try:
            return sum(sum(p.cpu_times()[:2]) for p in self._tree())
        except psutil.Error:
            return 0.0

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()


@contextmanager
def peak_memory(server: Server, *, every: float = 0.05, measures: dict | None = None):
    """Sample the server's RSS in a thread; yields a dict whose "peak_mb" grows as it runs (or, with `measures`,
    {name: function giving MB}, the peak of each under its name)."""
    measures = measures or {"peak_mb": server.rss_mb}
    record = dict.fromkeys(measures, 0.0)
    done = threading.Event()

    def sample():
        while not done.is_set():
            for name, measure in measures.items():
                record[name] = max(record[name], measure())
            done.wait(every)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield record
    finally:
        done.set()
        thread.join()


class Runs:
    """What a page's websocket has brought so far: finished script runs, bytes, and the figures sent to charts
    updated in place. `watch(page)` works on a sync or an async Playwright page, before it opens the app."""

    def __init__(self):
        self.finished, self.finished_at, self.ws_bytes, self.largest_frame = 0, 0.0, 0, 0
        self.charts_sent = {}  # {key: digest} since the last action (the caller empties it)

    def watch(self, page) -> None:
        page.on("websocket", lambda ws: ws.on("framereceived", self.on_frame))

    def mark(self) -> int:
        """Before an action: forget the figures sent so far; returns the runs finished so far."""
        self.charts_sent = {}
        return self.finished

    def on_frame(self, payload) -> None:
        from lpos.ui.harness import charts_sent, script_finished  # here: importing lpos.ui loads Streamlit

        data = payload if isinstance(payload, bytes) else payload.encode()
        self.charts_sent.update(charts_sent(data))
        self.ws_bytes += len(data)
        self.largest_frame = max(self.largest_frame, len(data))
        if script_finished(data):
            self.finished += 1
            self.finished_at = time.perf_counter()


class Tab(Runs):
    """One browser page on the app, in a context of its own (`browser`) or an existing page (`page`):
    counts finished script runs as they arrive, and waits until the page is drawn."""

    def __init__(self, browser=None, *, page=None, viewport: dict | None = None):
        super().__init__()
        self.owns_context = page is None
        self.page = page if page is not None else browser.new_context(viewport=viewport or VIEWPORT).new_page()
        self.context = self.page.context
        self.finished_requests, self.http_counted = [], 0  # not sized yet; the bytes of those sized
        self.watch(self.page)
        self.page.on("requestfinished", lambda request: self.finished_requests.append(request))
        self.page.lpos_tab = self  # tab_of(page) finds it

    def http_bytes(self) -> int:
        """The HTTP bytes (bodies and headers) of every request the tab has finished. Each request is sized once,
        at the first call after it finished: Playwright lets go of a long-lived page's oldest request objects, so
        none is kept to be sized later."""
        while self.finished_requests:
            sizes = self.finished_requests.pop().sizes()
            self.http_counted += sizes["responseBodySize"] + sizes["responseHeadersSize"]
        return self.http_counted

    def wait_drawn(self, runs_before: int | None = None, began: float | None = None, *, timeout: float = 120,
                   also: str | None = None) -> dict:
        """Wait for a run finished after `runs_before` runs (None: no run to wait for), then for the page drawn
        and `also` (a JavaScript function of no argument) true with it. Returns ms from `began` to drawn and
        to the run's end, and how many exceptions the page shows."""
        began = time.perf_counter() if began is None else began
        deadline = time.time() + timeout
        while runs_before is not None and self.finished == runs_before:
            if time.time() > deadline:
                raise TimeoutError(f"no script run finished within {timeout:.0f} s ({self.page.url})")
            self.page.wait_for_timeout(2)  # lets Playwright deliver the websocket's frames
        condition = DRAWN if also is None else f"sent => ({DRAWN})(sent) && ({also})()"
        # checked against the figures sent so far at each try: a run that follows sends newer ones, which an
        # argument handed to wait_for_function once would never see (the page would never match it)
        while not self.page.evaluate(condition, self.charts_sent):
            if time.time() > deadline:
                raise TimeoutError(f"the page was not drawn within {timeout:.0f} s ({self.page.url})")
            self.page.wait_for_timeout(CHECK_MS)  # lets Playwright deliver the websocket's frames
        drawn = time.perf_counter()
        errors = self.page.locator('[data-testid="stException"]').count()
        return {"ms": (drawn - began) * 1000, "script_ms": (self.finished_at - began) * 1000, "errors": errors}

    def open(self, url: str, *, began: float | None = None, timeout: float = 120) -> dict:
        """Go to `url` and wait until its first run through app.py is drawn."""
        before, start = self.mark(), time.perf_counter()
        self.page.goto(url, timeout=timeout * 1000)  # a cold server serves its first page slowly
        return {**self.wait_drawn(before, start if began is None else began, timeout=timeout),
                "ws_bytes": self.ws_bytes, "http_bytes": self.http_bytes()}

    def act(self, prepare, trigger, *, server: Server | None = None, timeout: float = 120) -> dict:
        """One interaction: `prepare()` is the user's typing (not timed); `trigger()` commits it and starts a
        run; returns once it is drawn. Timed from the trigger's first input event in the page (INPUT_CLOCK),
        so Playwright's own wait before it presses ("input_lag_ms") is not counted. With `server`, also the
        CPU seconds the server spent on it."""
        prepare()
        cpu = server.cpu_s() if server else 0.0
        before, bytes_before = self.mark(), self.ws_bytes
        page_start = self.page.evaluate(INPUT_CLOCK)
        start = time.perf_counter()
        trigger()
        drawn = self.wait_drawn(before, start, timeout=timeout)
        pressed = self.page.evaluate("() => window.lposInputAt")  # None: no input event (a call, not a press)
        lag = max(pressed - page_start, 0.0) if pressed is not None else 0.0
        return {**drawn, "ms": drawn["ms"] - lag, "script_ms": drawn["script_ms"] - lag, "input_lag_ms": lag,
                "ws_bytes": self.ws_bytes - bytes_before, "cpu_ms": (server.cpu_s() - cpu) * 1000 if server else None}

    def new_sentence(self, text: str, *, server: Server | None = None) -> dict:
        box = self.page.locator('[data-testid="stSidebar"] textarea').first
        return self.act(lambda: box.fill(text), lambda: box.press("Control+Enter"), server=server)

    def pick_scheme(self, scheme: str) -> dict:
        select = self.page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').filter(has_text="Position scheme")
        option = self.page.get_by_role("option", name=scheme, exact=True)  # the box shows the bare names
        return self.act(select.click, option.first.click)

    def step_slider(self, label: str, key: str = "ArrowRight") -> dict:
        """Move a slider one step with the keyboard (as reliable as a person's key press; a drag is not)."""
        thumb = self.page.locator('[data-testid="stSlider"]').filter(has_text=label).get_by_role("slider").first
        return self.act(thumb.focus, lambda: thumb.press(key))

    def screenshot(self, path: Path, *, full_page: bool = True) -> Path:
        self.page.screenshot(path=str(path), full_page=full_page)
        return path

    def close(self) -> None:
        if self.owns_context:
            self.context.close()


async def wait_drawn_async(page, runs: Runs, runs_before: int, *, timeout: float = 120) -> None:
    """Tab.wait_drawn for an async Playwright page that `runs` watches."""
    deadline = time.time() + timeout
    while runs.finished == runs_before and time.time() < deadline:
        await page.wait_for_timeout(2)  # lets Playwright deliver the websocket's frames
    if runs.finished == runs_before:
        raise TimeoutError(f"no script run finished within {timeout:.0f} s ({page.url})")
    while not await page.evaluate(DRAWN, runs.charts_sent):  # the figures sent so far, at each try
        if time.time() > deadline:
            raise TimeoutError(f"the page was not drawn within {timeout:.0f} s ({page.url})")
        await page.wait_for_timeout(CHECK_MS)


def tab_of(page) -> Tab:
    """The Tab watching a Playwright page (one made for it now if none is: before the page opens the app)."""
    return getattr(page, "lpos_tab", None) or Tab(page=page)
