"""What following a live class costs the server: N students follow one teacher through the Lesson.

    python load/live_class_load.py --followers 30 --steps 8
    python load/live_class_load.py --followers 90 --steps 8 --replicas 3
    python load/live_class_load.py --followers 90 --steps 8 --url http://127.0.0.1:8080 --pids 11 12 13

The teacher is headless Chromium (it clicks "Start a live class", then Next every --gap seconds);
students are protocol-level clients (load/protocol_load.py's Session: Streamlit's own
websocket protocol), each opening `/lesson?class=CODE` and then doing what the browser does for a
`st.fragment(run_every=...)`: rerunning the follow fragment at the interval the server's auto_rerun
message gives. Without --url the script starts --replicas `streamlit run app.py` processes on free
local ports (with more than one, a `redis-server` on a free port and LPOS_REDIS_URL for all) and
spreads students over them round-robin; with --url (the proxy in deploy/) every student
connects there and --pids names the replica processes to measure.

Measured: each server process's CPU seconds (psutil) over an idle stretch of --idle seconds where
students only follow, divided by students and seconds (the cost of following itself); and for every
teacher click, the seconds from the click to each student's run that shows the new step finishing
(p50/p95). Prints a JSON summary; exits 1 if any student missed a step or hit an error.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from load_test import Report  # noqa: E402
from protocol_load import Session  # noqa: E402
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402

from lpos.bench.browser import Server, free_port, launch  # noqa: E402

LESSON = "Lesson: the story of positions"


class Follower(Session):
    """A student's page: joins by link, then reruns the follow fragment as the browser's timer would."""

    def __init__(self, index: int, url: str, report: Report):
        super().__init__(index, index, [index], url, report)
        self.seen_steps: dict[int, float] = {}  # step -> when a run showing it finished
        self.auto: tuple[float, str] | None = None  # (interval, fragment id) from the server

    async def receive(self):
        run = await super().receive()
        for element in run.elements:
            if element.WhichOneof("type") == "heading" and element.heading.body[:1].isdigit():
                self.seen_steps.setdefault(int(element.heading.body.split(".")[0]), time.perf_counter())
        return run

    async def join(self, code: str) -> None:
        self.ws = await connect(self.stream, subprotocols=["streamlit", "PLACEHOLDER_AUTH_TOKEN"], origin=self.origin,
                                max_size=None, ping_interval=None, open_timeout=120)
        self.ws.recv = self._spy(self.ws.recv)
        query = urllib.parse.urlencode({"class": code})
        await self.rerun(query=query, page_hash="", widgets=[])
        await self.rerun(query=query, page_hash=self.pages[LESSON], widgets=self.widget_states())
        if self.auto is None:
            raise RuntimeError("the Lesson did not start a follow fragment (is the class running?)")

    def _spy(self, recv):
        async def spied():
            data = await recv()
            msg = ForwardMsg.FromString(data)
            if msg.WhichOneof("type") == "auto_rerun":
                self.auto = (msg.auto_rerun.interval, msg.auto_rerun.fragment_id)
            return data
        return spied

    async def follow(self, deadline: float) -> None:
        while time.perf_counter() < deadline and not self.broken:
            interval, fragment = self.auto
            await asyncio.sleep(interval)
            await self.timed("poll", self.rerun(query=self.query, page_hash=self.page_hash,
                                                widgets=self.widget_states(), fragment=fragment))


def start_redis(folder: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen([shutil.which("redis-server"), "--bind", "127.0.0.1", "--port", str(port), "--dir",
                                str(folder), "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
    time.sleep(0.5)  # a script, not a test: redis answers within this on any machine we run it on
    return process, f"redis://127.0.0.1:{port}/0"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


async def measure(args, urls: list[str], pids: list[int]) -> dict:
    from playwright.async_api import async_playwright

    report = Report()
    async with async_playwright() as playwright:
        browser = await launch(playwright)
        teacher = await browser.new_page()
        await teacher.goto(f"{urls[0]}/lesson?presenter=1")
        await teacher.get_by_role("button", name="Start a live class").click()
        code_text = await teacher.locator(".st-key-live_class_code h1").inner_text(timeout=120_000)
        code = code_text.strip().replace("-", "")
        followers = [Follower(i, urls[i % len(urls)], report) for i in range(args.followers)]
        await asyncio.gather(*(f.join(code) for f in followers))
        deadline = time.perf_counter() + args.idle + args.steps * args.gap + 30
        polling = asyncio.gather(*(f.follow(deadline) for f in followers))
        processes = [psutil.Process(pid) for pid in pids]
        await asyncio.sleep(2 * followers[0].auto[0])  # every follower is polling
        before, start = [p.cpu_times() for p in processes], time.perf_counter()
        await asyncio.sleep(args.idle)
        idle_s = time.perf_counter() - start
        idle_cpu = sum(p.cpu_times().user + p.cpu_times().system - b.user - b.system for p, b in zip(processes, before))
        clicks = {}
        for step in range(2, 2 + args.steps):
            clicks[step] = time.perf_counter()
            await teacher.get_by_role("button", name="Next").click()
            await asyncio.sleep(args.gap)
        for f in followers:
            f.broken = True  # stop polling
        await polling
        await browser.close()
    latencies = [f.seen_steps[s] - t for f in followers for s, t in clicks.items() if s in f.seen_steps]
    missed = sum(1 for f in followers for s in clicks if s not in f.seen_steps)
    return {"followers": args.followers, "replicas": len(pids), "idle_s": round(idle_s, 1),
            "cpu_ms_per_student_per_s": round(1000 * idle_cpu / idle_s / args.followers, 3),
            "step_latency_p50_s": round(percentile(latencies, 0.5), 3),
            "step_latency_p95_s": round(percentile(latencies, 0.95), 3),
            "missed_steps": missed, "errors": report.errors[:20]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--followers", type=int, default=30)
    parser.add_argument("--steps", type=int, default=8, help="teacher clicks on Next (at most 9)")
    parser.add_argument("--gap", type=float, default=4.0, help="seconds between the teacher's clicks")
    parser.add_argument("--idle", type=float, default=20.0, help="seconds of following only, for the CPU figure")
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--url", help="a running app or proxy (students and teacher connect here)")
    parser.add_argument("--pids", type=int, nargs="*", default=[], help="with --url: the replicas' process ids")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    args.steps = min(args.steps, 9)
    started, folder = [], Path(tempfile.mkdtemp(prefix="lpos-live-"))
    try:
        if args.url:
            urls, pids = [args.url.rstrip("/")], args.pids
        else:
            env = {}
            if args.replicas > 1:
                redis, env["LPOS_REDIS_URL"] = start_redis(folder)
                started.append(redis)
            apps = []
            for i in range(args.replicas):
                (folder / f"r{i}").mkdir()
                apps.append(Server(log=folder / f"r{i}" / "streamlit.log", env=env, timeout=90))
                started.append(apps[-1].process)
            urls, pids = [a.url for a in apps], [a.process.pid for a in apps]
        result = asyncio.run(measure(args, urls, pids))
    finally:
        for process in reversed(started):
            process.terminate()
            process.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 1 if result["missed_steps"] or result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
