"""Performance benchmark: model throughput, and the real app measured in headless Chromium.

Model side (no browser): tokens/s of training (`lpos.train.train` for a few steps on a synthetic
corpus at the shipped size) and of evaluation (`lpos.analysis.lengths.length_losses`).

App side: `streamlit run app.py` on a local port, driven by Playwright + Chromium. For every page,
the time from a sidebar change (a new sentence committed with Ctrl+Enter; another scheme picked)
until the page is fully drawn: the server's `script_finished` message has arrived, no element is
stale, the status widget is gone and every Plotly chart has drawn its SVG. Each is compared with
the same interaction on a bare page (a text area and a select box) served on the same machine in
the same run; the goal is at most GOAL_RATIO times that floor. Also: cold start, the first page
after a model switch, peak server memory (RSS of the streamlit process tree), bytes sent to the
browser, and the 1024 x 1024 similarity map.
"""
from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import torch

from lpos.positions import HINTS, SCHEMES

ROOT = Path(__file__).resolve().parent.parent
GOAL_RATIO = 1.5  # a page may take at most this many times the bare page's rerun
MEMORY_LIMIT_MB = 690  # Streamlit Community Cloud's smallest documented app memory (docs/DEPLOY.md)
CHROMIUM = os.environ.get("LPOS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-dev-shm-usage"]
SCHEME_LABELS = [f"{s} — {HINTS[s]}" for s in SCHEMES]  # the app's select box shows these

# The floor: the cheapest page that has the same two sidebar controls. Written to a temp dir at bench time.
FLOOR_APP = f'''import streamlit as st

with st.sidebar:
    text = st.text_area("Sentence", "The dog bit the man")
    scheme = st.selectbox("Position scheme", {SCHEME_LABELS!r})
st.write(text, scheme)
'''

# The status widget fades out for 200 ms after a run; once it is fading, the run is over.
DRAWN = """() => !document.querySelector('[data-testid="stStatusWidget"]:not(.StatusWidget-exit)')
  && !document.querySelector('[data-stale="true"]')
  && document.querySelector('[data-testid="stMain"]') !== null
  && [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].every(c => c.querySelector('.main-svg'))"""


def spread(values: list[float]) -> dict:
    """Median and range of repeated measurements."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


# ---------------------------------------------------------------------------------------------
# Model side


def synthetic_corpus(*, tokens: int, vocab: int, seed: int = 0):
    """A corpus of uniformly drawn ids over `vocab` distinct GPT-2 tokens: the softmax cost of
    training depends on the vocabulary size, not on the text."""
    from lpos.train import Corpus

    g = torch.Generator().manual_seed(seed)
    words = torch.randperm(50257, generator=g)[:vocab]  # (vocab,)
    stream = words[torch.randint(0, vocab, (tokens,), generator=g)]  # (tokens,)
    split = tokens * 9 // 10
    return Corpus(stream[:split], stream[split:], sha256="synthetic", n_stories=1, n_val_stories=1)


def shipped_vocab(default: int = 10_000) -> int:
    """How many distinct tokens the shipped learned model's softmax runs over."""
    from lpos import checkpoints

    if "learned" not in checkpoints.available():
        return default
    return checkpoints.load("learned")[1].get("vocab_trained", default)


def training_speed(*, scheme: str = "learned", steps: int = 20, vocab: int | None = None) -> dict:
    """Tokens/s of `lpos.train.train` at the shipped size (TrainArgs defaults) on a synthetic corpus."""
    from lpos.train import TrainArgs, train

    vocab = vocab or shipped_vocab()
    corpus = synthetic_corpus(tokens=30_000, vocab=vocab)
    with tempfile.TemporaryDirectory() as folder:
        args = TrainArgs(scheme=scheme, out=str(Path(folder) / "bench.pt"), steps=steps, warmup=1,
                         save_every=steps + 1, eval_lengths=(128,))
        _, meta = train(args, corpus, progress=False)
    seconds = max(meta["wall_seconds"], 0.05)  # wall_seconds is rounded to 0.1 s
    return {"scheme": scheme, "steps": steps, "tokens": meta["tokens_trained"], "seconds": seconds,
            "vocab": vocab, "tokens_per_s": meta["tokens_trained"] / seconds}


def evaluation_speed(*, scheme: str = "sinusoidal", lengths=(128, 1024), tokens: int = 16_384,
                     vocab: int | None = None) -> dict:
    """Tokens/s of `length_losses` at each evaluation length, shipped-size model, synthetic text."""
    from lpos.analysis.lengths import length_losses
    from lpos.model import GPT, GPTConfig

    vocab = vocab or shipped_vocab()
    corpus = synthetic_corpus(tokens=tokens * 10 // 9 + 2, vocab=vocab)
    torch.manual_seed(0)
    model = GPT(GPTConfig(position=scheme)).eval()
    model.output_vocab = torch.unique(corpus.train)
    speeds = {}
    for length in lengths:
        began = time.perf_counter()
        result = length_losses(model, corpus.train, lengths=[length])[length]
        seconds = time.perf_counter() - began
        speeds[length] = result.get("tokens", 0) / seconds if result["loss"] is not None else None
    return {"scheme": scheme, "tokens_per_s": speeds}


def model_side(*, quick: bool = False) -> dict:
    schemes = ["learned"] if quick else list(SCHEMES)
    vocab = shipped_vocab()
    return {"train": [training_speed(scheme=s, steps=3 if quick else 20, vocab=vocab) for s in schemes],
            "eval": evaluation_speed(tokens=4096 if quick else 16_384, vocab=vocab)}


# ---------------------------------------------------------------------------------------------
# App side: a server, a memory sampler, a browser tab that knows when the page is drawn


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

    def __init__(self, script: Path, log: Path):
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(script), "--server.headless=true", f"--server.port={port}",
             "--server.address=127.0.0.1", "--browser.gatherUsageStats=false", "--server.fileWatcherType=none"],
            cwd=ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT)
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
        self.requests = []
        self.page.on("websocket", lambda ws: ws.on("framereceived", self._on_frame))
        self.page.on("requestfinished", lambda request: self.requests.append(request))

    def _on_frame(self, payload) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        data = payload if isinstance(payload, bytes) else payload.encode()
        self.ws_bytes += len(data)
        self.largest_frame = max(self.largest_frame, len(data))
        message = ForwardMsg.FromString(data)
        if message.WhichOneof("type") == "script_finished" and message.script_finished != ForwardMsg.FINISHED_EARLY_FOR_RERUN:
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
        self.page.wait_for_function(DRAWN, polling="raf", timeout=timeout * 1000)
        drawn = time.perf_counter()
        errors = self.page.locator('[data-testid="stException"]').count()
        return {"ms": (drawn - began) * 1000, "script_ms": (self.finished_at - began) * 1000, "errors": errors}

    def open(self, url: str, *, began: float | None = None) -> dict:
        before, start = self.finished, time.perf_counter()
        self.page.goto(url)
        return {**self.wait_drawn(before, start if began is None else began), "ws_bytes": self.ws_bytes,
                "http_bytes": self.http_bytes()}

    def act(self, prepare, trigger) -> dict:
        """Measure one interaction: `prepare()` is the user's typing (not timed); `trigger()` commits it."""
        prepare()
        before, bytes_before, start = self.finished, self.ws_bytes, time.perf_counter()
        trigger()
        return {**self.wait_drawn(before, start), "ws_bytes": self.ws_bytes - bytes_before}

    def new_sentence(self, text: str) -> dict:
        box = self.page.locator('[data-testid="stSidebar"] textarea').first
        return self.act(lambda: box.fill(text), lambda: box.press("Control+Enter"))

    def pick_scheme(self, scheme: str) -> dict:
        select = self.page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').filter(has_text="Position scheme")
        option = self.page.locator('[role="option"]').filter(has_text=SCHEME_LABELS[SCHEMES.index(scheme)])
        return self.act(select.click, option.first.click)

    def slide_to_end(self, label: str) -> dict:
        """Drag a slider's thumb past the end of its track (to its maximum) and release."""
        slider = self.page.locator('[data-testid="stSlider"]').filter(has_text=label)
        thumb = slider.locator('[role="slider"]').first
        box = slider.bounding_box()

        def press():
            thumb.hover()
            self.page.mouse.down()
            self.page.mouse.move(box["x"] + box["width"] + 200, box["y"] + box["height"] / 2, steps=4)
        return self.act(press, self.page.mouse.up)

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


def sentence(page_index: int, run: int) -> str:
    return f"The little dog {page_index} bit the old man {run} and then the man bit the dog back"


# ---------------------------------------------------------------------------------------------
# The browser benchmark


def measure_floor(browser, server: Server, runs: int) -> dict:
    tab = Tab(browser)
    tab.open(server.url)
    sentences = [tab.new_sentence(sentence(99, run))["ms"] for run in range(runs)]
    schemes = [tab.pick_scheme(SCHEMES[(run + 1) % len(SCHEMES)])["ms"] for run in range(runs)]
    tab.close()
    return {"sentence_ms": sentences, "scheme_ms": schemes}


def measure_page(browser, server: Server, path: str, index: int, runs: int) -> dict:
    tab = Tab(browser)
    load = tab.open(f"{server.url}/{path}?scheme=learned&model=learned")
    sentences, schemes, interaction_bytes, errors, script = [], [], [], load["errors"], []
    for run in range(runs):
        for measured, into in ((tab.new_sentence(sentence(index, run)), sentences),
                               (tab.pick_scheme(SCHEMES[(run + 1) % len(SCHEMES)]), schemes)):
            into.append(measured["ms"])
            script.append(measured["script_ms"] / measured["ms"])
            interaction_bytes.append(measured["ws_bytes"])
            errors += measured["errors"]
    result = {"first_draw_ms": load["ms"], "load_ws_bytes": load["ws_bytes"], "load_http_bytes": load["http_bytes"],
              "sentence_ms": spread(sentences), "scheme_ms": spread(schemes),
              "interaction_ws_bytes": spread(interaction_bytes), "server_share": spread(script),
              "largest_frame_bytes": tab.largest_frame, "errors": errors}
    tab.close()
    return result


def measure_big_map(browser, server: Server, path: str, runs: int) -> dict:
    """The Similarity page's position map at its largest: 1024 positions (sinusoidal; a learned table stops at 128)."""
    times, sent = [], []
    for _ in range(runs):
        tab = Tab(browser)
        tab.open(f"{server.url}/{path}?scheme=sinusoidal&model=sinusoidal")
        measured = tab.slide_to_end("Positions")
        thumb = tab.page.locator('[data-testid="stSlider"]').filter(has_text="Positions").locator('[role="slider"]')
        value = thumb.first.get_attribute("aria-valuenow")
        times.append(measured["ms"])
        sent.append(measured["ws_bytes"])
        tab.close()
    return {"scheme": "sinusoidal", "positions": int(value), "ms": spread(times), "ws_bytes": spread(sent)}


def measure_sessions(browser, server: Server, paths: dict[str, str], sessions: int) -> int:
    """Open several sessions at once on the heaviest views; returns how many were drawn without error."""
    heavy = [(page, scheme) for page, scheme in (("extrapolation", "sinusoidal"), ("order_blindness", "learned"),
                                                 ("similarity", "sinusoidal"), ("rope_alibi", "rope")) if page in paths]
    tabs = [Tab(browser) for _ in heavy[:sessions]]
    for tab, (page, scheme) in zip(tabs, heavy):
        tab.page.goto(f"{server.url}/{paths[page]}?scheme={scheme}&model={scheme}")
    drawn = 0
    for tab in tabs:
        drawn += tab.wait_drawn(0, time.perf_counter())["errors"] == 0
        tab.close()
    return drawn


def measure_cold_start(browser, log_dir: Path, runs: int) -> dict:
    first, after_switch = [], []
    for run in range(runs):
        server = Server(ROOT / "app.py", log_dir / f"cold{run}.log")
        try:
            tab = Tab(browser)
            first.append(tab.open(f"{server.url}/?scheme=learned&model=learned", began=server.started)["ms"])
            after_switch.append(tab.pick_scheme("sinusoidal")["ms"])
            tab.close()
        finally:
            server.stop()
    return {"first_page_ms": spread(first), "after_model_switch_ms": spread(after_switch)}


def app_side(*, runs: int = 5, quick: bool = False, progress=print) -> dict:
    """Every browser measurement; needs Playwright and Chromium (check_browser)."""
    from playwright.sync_api import sync_playwright

    from lpos import checkpoints

    check_browser()
    with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
        folder = Path(folder)
        (folder / "floor.py").write_text(FLOOR_APP)
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        floor_server = Server(folder / "floor.py", folder / "floor.log")
        server = Server(ROOT / "app.py", folder / "app.log")
        try:
            with peak_memory(server) as sampler:
                paths = page_paths(browser, server)
                warm = Tab(browser)  # load every model once, so page timings exclude first loads
                for scheme in SCHEMES:
                    for model in (scheme, "untrained"):
                        warm.open(f"{server.url}/?scheme={scheme}&model={model}")
                warm.close()
                progress("measuring the floor page")
                floor = measure_floor(browser, floor_server, runs)
                pages = {}
                for index, (name, path) in enumerate(sorted(paths.items())):
                    progress(f"measuring page {name}")
                    pages[name] = measure_page(browser, server, path, index, runs)
                more = measure_floor(browser, floor_server, runs)  # the floor again: load may drift
                floor = {key: spread(values + more[key]) for key, values in floor.items()}
                for page in pages.values():
                    for kind in ("sentence", "scheme"):
                        page[f"{kind}_ratio"] = page[f"{kind}_ms"]["median"] / floor[f"{kind}_ms"]["median"]
                progress("measuring the 1024 x 1024 similarity map")
                big_map = measure_big_map(browser, server, paths["similarity"], 1 if quick else 3) if "similarity" in paths else None
                sessions = 2 if quick else 3
                progress(f"opening {sessions} sessions at once")
                drawn = measure_sessions(browser, server, paths, sessions)
                idle_mb = server.rss_mb()
            memory = {"peak_rss_mb": sampler["peak_mb"], "end_rss_mb": idle_mb, "limit_mb": MEMORY_LIMIT_MB,
                      "models_loaded": [*checkpoints.available(), "untrained x 5"], "sessions_at_once": sessions,
                      "sessions_drawn": drawn}
        finally:
            server.stop()
            floor_server.stop()
        progress("measuring cold starts")
        cold = measure_cold_start(browser, folder, 1 if quick else 3)
        browser.close()
    return {"floor": floor, "pages": pages, "similarity_1024": big_map, "memory": memory, "cold_start": cold}


def machine() -> dict:
    return {"cpu_cores": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
            "torch": torch.__version__}


def run(*, runs: int = 5, quick: bool = False, browser: bool = True, progress=print) -> dict:
    """The whole benchmark as one JSON-ready dict."""
    runs = 1 if quick else runs
    results = {"machine": machine(), "runs": runs, "quick": quick, "goal_ratio": GOAL_RATIO}
    progress("measuring training and evaluation speed")
    results["model"] = model_side(quick=quick)
    if browser:
        results["app"] = app_side(runs=runs, quick=quick, progress=progress)
    return results


# ---------------------------------------------------------------------------------------------
# The printed table


def _ms(stat: dict) -> str:
    return f"{stat['median']:,.0f} [{stat['min']:,.0f}–{stat['max']:,.0f}]"


def _kb(n: float) -> str:
    return f"{n / 1024:,.0f} KB"


def table(results: dict) -> str:
    """The results as the text `python -m lpos bench` prints."""
    m = results["machine"]
    lines = [f"lpos bench — {m['cpu_cores']} CPU cores, Python {m['python']}, torch {m['torch']}; "
             f"{results['runs']} run(s), medians [min–max]", ""]
    model = results["model"]
    for entry in model["train"]:
        lines.append(f"training  {entry['scheme']:<11} {entry['tokens_per_s']:>9,.0f} tokens/s  "
                     f"({entry['steps']} steps of 16 x 128 tokens, softmax over {entry['vocab']:,} tokens)")
    speeds = ", ".join(f"length {length}: {speed:,.0f} tokens/s" for length, speed in model["eval"]["tokens_per_s"].items()
                       if speed is not None)
    lines.append(f"evaluation {model['eval']['scheme']:<10} {speeds}")
    app = results.get("app")
    if app is None:
        return "\n".join(lines)
    floor, goal = app["floor"], results["goal_ratio"]
    header = ["page", "first draw", "new sentence", "ratio", "switch scheme", "ratio", "server", "ws/change", "load ws+HTTP"]
    rows = [["bare page", "", _ms(floor["sentence_ms"]), "1.00", _ms(floor["scheme_ms"]), "1.00", "", "", ""]]
    for name, page in app["pages"].items():
        note = "" if max(page["sentence_ratio"], page["scheme_ratio"]) <= goal else "over goal"
        note += f" {page['errors']} error(s)!" if page["errors"] else ""
        rows.append([name, f"{page['first_draw_ms']:,.0f}", _ms(page["sentence_ms"]), f"{page['sentence_ratio']:.2f}",
                     _ms(page["scheme_ms"]), f"{page['scheme_ratio']:.2f}", f"{page['server_share']['median']:.0%}",
                     _kb(page["interaction_ws_bytes"]["median"]),
                     f"{_kb(page['load_ws_bytes'])} + {_kb(page['load_http_bytes'])}", note])
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines += ["", f"Sidebar change -> page fully drawn, ms (goal: at most {goal}x the bare page)"]
    for row in [header, *rows]:
        cells = [row[0].ljust(widths[0])] + [cell.rjust(width) for cell, width in zip(row[1:], widths[1:])]
        lines.append("  ".join(cells + row[len(header):]).rstrip())
    lines.append("(server: share of the time until the script_finished message arrived; the rest is the browser drawing)")
    cold = app["cold_start"]
    lines += ["", f"cold start, command -> first page drawn: {_ms(cold['first_page_ms'])} ms; "
                  f"first page after a model switch: {_ms(cold['after_model_switch_ms'])} ms"]
    if app["similarity_1024"]:
        big = app["similarity_1024"]
        lines.append(f"similarity map {big['positions']} x {big['positions']} ({big['scheme']}): {_ms(big['ms'])} ms, "
                     f"{_kb(big['ws_bytes']['median'])} over the websocket")
    memory = app["memory"]
    verdict = "within" if memory["peak_rss_mb"] <= memory["limit_mb"] else "OVER"
    lines.append(f"server peak RSS {memory['peak_rss_mb']:,.0f} MB ({verdict} the {memory['limit_mb']} MB limit), "
                 f"end {memory['end_rss_mb']:,.0f} MB; models loaded: {', '.join(memory['models_loaded'])}; "
                 f"{memory['sessions_drawn']}/{memory['sessions_at_once']} sessions at once drawn")
    return "\n".join(lines)
