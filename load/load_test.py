"""Many users at once: real websocket sessions (Playwright browser contexts in one Chromium)
against `streamlit run app.py` on a local port.

    python load/load_test.py --sessions 20 --seconds 60

Each session has its own sentence (marked by a number no other session uses) and loops, until
the time is up: type a new sentence, switch the position scheme, visit another page, come back.
Every action is timed from the change to the page redrawn and checked: the URL carries the new
state, no exception box, and on the Embeddings page the session's own tokens and no other
session's. Every fifth session uploads its own small model first; at the end every session opens
the model box and must see its own upload only. The streamlit process tree's memory is sampled
throughout. Prints a summary (and --json writes it); exits 1 on any error or leak.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from playwright.async_api import TimeoutError as PlaywrightTimeout

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lpos.bench.browser import Runs, Server, launch, peak_memory, wait_drawn_async  # noqa: E402
from lpos.pages import PAGES, default_page  # noqa: E402
from lpos.positions import SCHEMES  # noqa: E402
from lpos.tokenizer import encode  # noqa: E402

VARIANTS = ["tree", "house", "river", "hill", "road", "lake", "garden", "field"]  # one GPT-2 token each
OTHER_PAGES = [(page.title, f"/{page.url_path}") for page in PAGES if not page.default]  # (title, path)
HOME = (default_page().title, "/")
TIMEOUT_MS = 120_000
UPLOAD_EVERY = 5
UPLOAD_SUFFIX = "(your upload)"  # how the model box names an upload


def markers(count: int) -> list[int]:
    """Numbers that are one GPT-2 token each (" 731"), one per session: a chip "␣731" is unmistakable."""
    found = [n for n in range(101, 1000) if len(encode(f" {n}")) == 1]
    if len(found) < count:
        raise SystemExit(f"at most {len(found)} sessions")
    return found[:count]


@dataclass
class Report:
    timings: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)
    peak_rss: int = 0
    server_cpu_s: float = 0.0  # CPU time of the streamlit process tree during the run
    machine_cpu_s: float = 0.0  # CPU time of every process on the machine (server, browsers, driver)

    def time(self, action: str, seconds: float) -> None:
        self.timings.setdefault(action, []).append(seconds)


def busy_cpu_seconds() -> float:
    """CPU seconds every process on the machine has used so far."""
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


def small_model_file(path: Path) -> bytes:
    """A tiny lpos checkpoint (rope, width 32): a real upload, a few MB."""
    import torch

    from lpos.checkpoints import save
    from lpos.model import GPT, GPTConfig

    torch.manual_seed(0)
    save(GPT(GPTConfig(position="rope", n_layer=1, n_head=2, n_embd=32)), {}, path)
    return path.read_bytes()


class Session:
    def __init__(self, index: int, marker: int, all_markers: list[int], context, url: str, report: Report,
                 model_bytes: bytes | None):
        self.index, self.marker, self.context, self.url, self.report = index, marker, context, url, report
        self.foreign = [m for m in all_markers if m != marker]
        self.upload_name = f"ckpt-{index}.pt" if model_bytes is not None else None
        self.model_bytes = model_bytes
        self.step = 0
        self.runs = Runs()  # the server's finished runs in this session's page (the harness's signal)

    def sentence(self) -> str:
        variant = VARIANTS[self.step % len(VARIANTS)]
        return f"The {variant} and the {variant} near marker {self.marker}"

    async def redrawn(self, page, runs_before: int, *, url_has: str | None = None, path: str | None = None) -> None:
        """Wait until the run the action started is drawn (lpos.bench.browser) and the URL shows the new state."""
        await wait_drawn_async(page, self.runs, runs_before, timeout=TIMEOUT_MS / 1000)
        if url_has is not None:
            await page.wait_for_function("(s) => decodeURIComponent(location.href.replace(/\\+/g, ' ')).includes(s)",
                                         arg=url_has, timeout=TIMEOUT_MS)
        if path is not None:
            await page.wait_for_function("(p) => location.pathname === p", arg=path, timeout=TIMEOUT_MS)
        if await page.locator("[data-testid='stException']").count():
            raise RuntimeError(await page.locator("[data-testid='stException']").first.inner_text())

    async def check_own_view(self, page, variant: str | None = None) -> None:
        """The session's own tokens are drawn (Plotly draws after the run ends), and no one else's."""
        wanted = [f"␣{self.marker}", *([f"␣{variant}"] if variant else [])]
        await page.wait_for_function(
            "(wanted) => { const main = document.querySelector('[data-testid=\"stMain\"]');"
            " return main && wanted.every(w => main.textContent.includes(w)); }", arg=wanted, timeout=TIMEOUT_MS)
        text = await page.locator("[data-testid='stMain']").text_content()
        box = page.locator("[data-testid='stSidebar'] textarea")
        try:  # the box is sometimes filled a moment after the first draw (docs/RELIABILITY.md)
            await page.wait_for_function("([box, text]) => box.value === text",
                                         arg=[await box.element_handle(), self.sentence()], timeout=15_000)
        except PlaywrightTimeout:
            pass  # reported below with what the box holds
        own = await box.input_value()
        if own != self.sentence():
            raise RuntimeError(f"session {self.index}: the sentence box holds {own[:80]!r}")
        for other in self.foreign:
            if f"␣{other}" in text or f"marker {other}" in own:
                self.report.leaks.append(f"session {self.index} shows marker {other}")
        sidebar = await page.locator("[data-testid='stSidebar']").inner_text()
        for name in [f"ckpt-{i}.pt" for i in range(0, 1000, UPLOAD_EVERY)]:
            if name in sidebar and name != self.upload_name:
                self.report.leaks.append(f"session {self.index} shows the upload {name}")

    async def timed(self, action: str, coroutine) -> None:
        start = time.perf_counter()
        try:
            await coroutine
            self.report.time(action, time.perf_counter() - start)
        except Exception as e:  # every failure is counted and described, the session goes on
            self.report.errors.append(f"session {self.index}, {action}: {type(e).__name__}: {str(e)[:300]}")

    async def open(self, page) -> None:
        before = self.runs.mark()
        await page.goto(f"{self.url}/?{urllib.parse.urlencode({'text': self.sentence()})}")
        await self.redrawn(page, before)
        await self.check_own_view(page)

    async def upload(self, page) -> None:
        before = self.runs.mark()
        await page.locator("[data-testid='stSidebar'] input[type=file]").set_input_files(
            files=[{"name": self.upload_name, "mimeType": "application/octet-stream", "buffer": self.model_bytes}])
        await page.get_by_text(f"Loaded {self.upload_name}").wait_for(timeout=TIMEOUT_MS)
        await self.redrawn(page, before, url_has="scheme=rope")
        await self.check_own_view(page)

    async def type_sentence(self, page) -> None:
        self.step += 1
        box = page.locator("[data-testid='stSidebar'] textarea")
        await box.fill(self.sentence())
        before = self.runs.mark()
        await box.press("Control+Enter")
        await self.redrawn(page, before, url_has=f"text={self.sentence()}")
        await self.check_own_view(page, VARIANTS[self.step % len(VARIANTS)])

    async def switch_scheme(self, page, scheme: str) -> None:
        await page.locator("[data-testid='stSidebar'] [data-testid='stSelectbox']").first.click()
        before = self.runs.mark()
        await page.get_by_role("option", name=scheme, exact=True).click()  # the box shows bare names
        await self.redrawn(page, before, url_has=f"scheme={scheme}")
        await self.check_own_view(page)

    async def visit(self, page, title: str, path: str) -> None:
        before = self.runs.mark()
        await page.locator("[data-testid='stSidebarNav']").get_by_text(title, exact=True).click()
        await self.redrawn(page, before, path=path)

    async def own_uploads_only(self, page) -> None:
        """Open the model box filtered to uploads and read what it lists. Unfiltered, the box draws only
        the options near the chosen one (a virtual list), so an upload far down it was not in the page."""
        box = page.locator("[data-testid='stSidebar'] [data-testid='stSelectbox']").filter(
            has=page.get_by_text("Model", exact=True))
        await box.locator("input").click()
        await box.locator("input").press_sequentially(UPLOAD_SUFFIX)
        await page.wait_for_function(
            "(suffix) => [...document.querySelectorAll('[role=option], [role=listbox]')]"
            ".some(o => o.textContent.includes(suffix) || o.textContent.includes('No results'))",
            arg=UPLOAD_SUFFIX, timeout=TIMEOUT_MS)
        options = await page.get_by_role("option").all_inner_texts()
        await page.keyboard.press("Escape")
        uploads = [o for o in options if UPLOAD_SUFFIX in o]
        expected = [f"{self.upload_name} {UPLOAD_SUFFIX}"] if self.upload_name else []
        if uploads != expected:
            self.report.leaks.append(f"session {self.index} sees uploads {uploads}, expected {expected}")

    async def start(self) -> None:
        self.page = page = await self.context.new_page()
        self.runs.watch(page)
        page.set_default_timeout(TIMEOUT_MS)  # clicks and file inputs wait as long as redraws do
        page.on("pageerror", lambda error: self.report.errors.append(f"session {self.index}: page error {error}"))
        await self.timed("open", self.open(page))
        if self.upload_name:
            await self.timed("upload", self.upload(page))

    async def run(self, deadline: float) -> None:
        page, turn = self.page, self.index
        while time.time() < deadline:
            turn += 1
            await self.timed("type", self.type_sentence(page))
            await self.timed("scheme", self.switch_scheme(page, SCHEMES[turn % len(SCHEMES)]))
            await self.timed("page", self.visit(page, *OTHER_PAGES[turn % len(OTHER_PAGES)]))
            await self.timed("page", self.visit(page, *HOME))
            await self.timed("check", self.check_own_view(page))
        await self.timed("models", self.own_uploads_only(page))


async def drive(url: str, sessions: int, seconds: float, report: Report) -> None:
    from playwright.async_api import async_playwright

    numbers = markers(sessions)
    with tempfile.TemporaryDirectory() as folder:
        model_bytes = small_model_file(Path(folder) / "small.pt")
    async with async_playwright() as playwright:
        browser = await launch(playwright)
        contexts = [await browser.new_context(viewport={"width": 1280, "height": 900}) for _ in range(sessions)]
        users = [Session(i, numbers[i], numbers, contexts[i], url, report,
                         model_bytes if i % UPLOAD_EVERY == 0 else None) for i in range(sessions)]
        await asyncio.gather(*[user.start() for user in users])  # every session open before the clock starts
        deadline = time.time() + seconds
        await asyncio.gather(*[user.run(deadline) for user in users])
        await browser.close()


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def summary(report: Report, sessions: int, seconds: float, wall: float) -> dict:
    changes = [t for action, times in report.timings.items() if action in ("type", "scheme", "page") for t in times]
    result = {
        "sessions": sessions, "seconds": seconds, "wall_seconds": round(wall, 1),
        "actions": sum(len(times) for times in report.timings.values()),
        "errors": len(report.errors), "leaks": len(report.leaks),
        "response_p50_s": round(percentile(changes, 50), 2) if changes else None,
        "response_p95_s": round(percentile(changes, 95), 2) if changes else None,
        "by_action": {action: {"count": len(times), "p50_s": round(percentile(times, 50), 2),
                               "p95_s": round(percentile(times, 95), 2)} for action, times in report.timings.items()},
        "server_peak_rss_mb": round(report.peak_rss / 2**20),
        "server_cpu_s": round(report.server_cpu_s, 1), "machine_cpu_s": round(report.machine_cpu_s, 1),
        "cpu_count": psutil.cpu_count(), "error_messages": report.errors[:20], "leak_messages": report.leaks[:20],
    }
    return result


def main(argv: list[str] | None = None, drive=drive, description: str = __doc__.splitlines()[0]) -> int:
    """Start the app, run `drive(url, sessions, seconds, report)` against it (protocol_load.py passes
    its own), print the summary."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--json", type=Path, help="also write the summary here")
    args = parser.parse_args(argv)
    report = Report()
    with tempfile.TemporaryDirectory() as folder, Server(log=Path(folder) / "streamlit.log", timeout=90) as app:
        start, server_cpu, machine_cpu = time.time(), app.cpu_s(), busy_cpu_seconds()
        try:
            with peak_memory(app, every=0.25) as memory:
                asyncio.run(drive(app.url, args.sessions, args.seconds, report))
        finally:
            report.server_cpu_s = app.cpu_s() - server_cpu
            report.machine_cpu_s = busy_cpu_seconds() - machine_cpu
            report.peak_rss = round(memory["peak_mb"] * 2**20)
    result = summary(report, args.sessions, args.seconds, time.time() - start)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 1 if result["errors"] or result["leaks"] else 0


if __name__ == "__main__":
    sys.exit(main())
