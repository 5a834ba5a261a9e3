"""The browser side's tools: `streamlit run` on a local port, a sampler of its memory, and a Playwright
tab that counts finished script runs and knows when the page is drawn."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from lpos.bench.common import CHROMIUM, ROOT

# The status widget fades out for 200 ms after a run; once it is fading, the run is over. A skeleton
# stands in for an element whose code is still loading (the chart component, on first use). A chart
# updated in place (lpos.ui.plotly_react, the app's only component) redraws after React has put its new
# data in the page: drawn once its div shows the digest of the last figure the server sent it (`sent`).
DRAWN = """sent => !document.querySelector('[data-testid="stStatusWidget"]:not(.StatusWidget-exit)')
  && !document.querySelector('[data-stale="true"], [data-testid="stSkeleton"], .lpos-plotly[data-drawing]')
  && document.querySelector('[data-testid="stMain"]') !== null
  && [...document.querySelectorAll('[data-testid="stPlotlyChart"], [data-testid="stBidiComponentRegular"]')]
    .every(c => c.querySelector('.main-svg'))
  && Object.entries(sent).every(([key, digest]) =>
    document.querySelector(`.lpos-plotly[data-key="${CSS.escape(key)}"]`)?.dataset.drawn === digest)"""


def check_browser() -> None:
    """Raise RuntimeError with what to install when Playwright or Chromium is missing."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        raise RuntimeError("Playwright is not installed: pip install -r requirements-dev.txt") from None
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"Chromium not found at {CHROMIUM}: apt-get install -y chromium, or set LPOS_CHROMIUM")


class Server:
    """`streamlit run SCRIPT` on a free local port, started when constructed; `.started` is the
    perf_counter time the command was issued."""

    def __init__(self, script: Path, log: Path, *, env: dict | None = None):
        import os
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(script), "--server.headless=true", f"--server.port={port}",
             "--server.address=127.0.0.1", "--browser.gatherUsageStats=false", "--server.fileWatcherType=none"],
            cwd=ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"streamlit did not start: {log.read_text()[-2000:]}")

    def rss_mb(self) -> float:
        import psutil

        try:
            process = psutil.Process(self.process.pid)
            return sum(p.memory_info().rss for p in [process, *process.children(recursive=True)]) / 2**20
        except psutil.Error:
            return 0.0

    def cpu_s(self) -> float:
        """CPU seconds (user + system) the server process tree has used so far."""
        import psutil

        try:
            process = psutil.Process(self.process.pid)
            return sum(sum(p.cpu_times()[:2]) for p in [process, *process.children(recursive=True)])
        except psutil.Error:
            return 0.0

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()


@contextmanager
def peak_memory(server: Server, *, every: float = 0.05):
    """Sample the server's RSS in a thread; yields a dict whose "peak_mb" grows as it runs."""
    record = {"peak_mb": 0.0}
    done = threading.Event()

    def sample():
        while not done.is_set():
            record["peak_mb"] = max(record["peak_mb"], server.rss_mb())
            done.wait(every)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield record
    finally:
        done.set()
        thread.join()


class Tab:
    """One browser page on an app; counts finished script runs and bytes received as they arrive."""

    def __init__(self, browser):
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000})
        self.page = self.context.new_page()
        self.finished, self.finished_at, self.ws_bytes, self.largest_frame = 0, 0.0, 0, 0
        self.requests, self.charts_sent = [], {}  # charts_sent: {key: digest} since the action began
        self.page.on("websocket", lambda ws: ws.on("framereceived", self._on_frame))
        self.page.on("requestfinished", lambda request: self.requests.append(request))

    def _on_frame(self, payload) -> None:
        from lpos.ui.harness import charts_sent, script_finished  # here: importing lpos.ui loads Streamlit

        data = payload if isinstance(payload, bytes) else payload.encode()
        self.charts_sent.update(charts_sent(data))
        self.ws_bytes += len(data)
        self.largest_frame = max(self.largest_frame, len(data))
        if script_finished(data):
            self.finished += 1
            self.finished_at = time.perf_counter()

    def http_bytes(self) -> int:
        return sum(r.sizes()["responseBodySize"] + r.sizes()["responseHeadersSize"] for r in self.requests)

    def wait_drawn(self, runs_before: int, began: float, *, timeout: float = 120) -> dict:
        deadline = time.time() + timeout
        while self.finished == runs_before:
            if time.time() > deadline:
                raise TimeoutError("the script did not finish")
            self.page.wait_for_timeout(2)
        self.page.wait_for_function(DRAWN, arg=self.charts_sent, polling="raf", timeout=timeout * 1000)
        drawn = time.perf_counter()
        errors = self.page.locator('[data-testid="stException"]').count()
        return {"ms": (drawn - began) * 1000, "script_ms": (self.finished_at - began) * 1000, "errors": errors}

    def open(self, url: str, *, began: float | None = None) -> dict:
        before, start, self.charts_sent = self.finished, time.perf_counter(), {}
        self.page.goto(url)
        return {**self.wait_drawn(before, start if began is None else began), "ws_bytes": self.ws_bytes,
                "http_bytes": self.http_bytes()}

    def act(self, prepare, trigger, *, server: "Server | None" = None) -> dict:
        """Measure one interaction: `prepare()` is the user's typing (not timed); `trigger()` commits it.
        With `server`, also the CPU seconds the server spent on it (its runs are over once drawn)."""
        prepare()
        cpu = server.cpu_s() if server else 0.0
        before, bytes_before, start, self.charts_sent = self.finished, self.ws_bytes, time.perf_counter(), {}
        trigger()
        drawn = self.wait_drawn(before, start)
        return {**drawn, "ws_bytes": self.ws_bytes - bytes_before, "cpu_ms": (server.cpu_s() - cpu) * 1000 if server else None}

    def new_sentence(self, text: str, *, server: "Server | None" = None) -> dict:
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

    def close(self) -> None:
        self.context.close()


def page_paths(browser, server: Server) -> dict[str, str]:
    """{page file stem: URL path} for every page in the app's navigation."""
    tab = Tab(browser)
    tab.open(server.url)
    links = tab.page.locator('[data-testid="stSidebarNav"] a').evaluate_all("links => links.map(a => a.href)")
    tab.close()
    stems = {p.stem for p in (ROOT / "pages").glob("*.py")}
    paths = {}
    for href in links:
        path = href.removeprefix(server.url).strip("/").split("?")[0]
        paths[path or "/"] = path
    default = sorted(stems - set(paths))  # the default page is served at "/"
    if "/" in paths and len(default) == 1:
        paths[default[0]] = paths.pop("/")
    return paths
