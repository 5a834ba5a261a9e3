"""Lab runs trained away from the threads that serve pages, in a bounded queue.

`lab_runs()` gives the process's one queue: with LPOS_REDIS_URL set, `RedisRuns` (an RQ queue on that Redis,
trained by `rq worker lpos-lab` processes on any machine; any replica reads any run by its id); else
`LocalRuns` (LPOS_LAB_WORKERS processes the server starts, one run each, the rest waiting in order). Both
answer the same `RunStatus` for a run id, so a session keeps only its runs' ids: it can leave the page and
come back, and the run goes on. Each run is capped in steps, seconds and memory (lpos.settings.lab_caps):
the run stops itself at a cap and says so; a local run whose process passes a cap anyway is ended by the server.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from lpos import settings
from lpos.lab import job
from lpos.lab.training import Caps, LabArgs

PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent  # where `python -m lpos.lab.job` finds lpos
QUEUE_NAME = "lpos-lab"  # the RQ queue: `rq worker lpos-lab --url $LPOS_REDIS_URL`
KEEP_FINISHED = 200  # finished runs a local queue remembers, oldest forgotten first
WATCH_SECONDS = 0.1
GRACE_SECONDS = 30.0  # past the time cap, before the server ends a run that did not stop itself


@dataclass
class RunStatus:
    id: str
    args: dict  # LabArgs.as_dict()
    state: str  # queued | running | finished | stopped (before it started) | failed
    place: int | None = None  # queued: 1 is next to start
    progress: dict | None = None  # the last report (lpos.lab.job.progress_message)
    summary: dict | None = None  # finished: lpos.lab.summary
    checkpoint: bytes | None = None  # finished: the lpos checkpoint
    message: str = ""  # stopped or failed: why

    @property
    def done(self) -> bool:
        return self.state in ("finished", "stopped", "failed")


def current_caps() -> Caps:
    steps, seconds, mb = settings.lab_caps()
    return Caps(max_steps=steps, max_seconds=seconds, max_memory_mb=mb)


def process_memory_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as status:
            return next((int(line.split()[1]) / 1024 for line in status if line.startswith("VmRSS:")), 0.0)
    except (OSError, ValueError):
        return 0.0


class LocalRuns:
    """Runs in processes this server starts (`python -m lpos.lab.job`): at most `workers` at once, the rest
    waiting in order. A fresh interpreter, not a fork of a server holding threads, nor multiprocessing's spawn
    (which runs the parent's main script again: under Streamlit, app.py)."""

    def __init__(self, workers: int = 1, caps: Caps | None = None):
        self.workers, self.caps = workers, caps or current_caps()
        self._lock = threading.Lock()
        self._runs: dict[str, RunStatus] = {}
        self._waiting: deque[str] = deque()
        self._active: dict[str, tuple] = {}  # id -> (process, started, stop asked)
        self._folder = tempfile.mkdtemp(prefix="lpos-lab-")
        threading.Thread(target=self._watch, daemon=True, name="lpos-lab-runs").start()

    def submit(self, args: LabArgs) -> str:
        run_id = uuid.uuid4().hex[:12]
        with self._lock:
            self._runs[run_id] = RunStatus(run_id, args.as_dict(), "queued")
            self._waiting.append(run_id)
            self._start_waiting()
        return run_id

    def status(self, run_id: str) -> RunStatus | None:
        with self._lock:
            found = self._runs.get(run_id)
            if found is None:
                return None
            place = self._waiting.index(run_id) + 1 if run_id in self._waiting else None
            return dataclasses.replace(found, place=place)

    def stop(self, run_id: str) -> None:
        with self._lock:
            if run_id in self._waiting:
                self._waiting.remove(run_id)
                self._runs[run_id].state, self._runs[run_id].message = "stopped", "stopped before it started"
            elif run_id in self._active:
                process, started, _ = self._active[run_id]
                self._active[run_id] = (process, started, True)
                process.send_signal(signal.SIGTERM)  # the run stops after its step and keeps what it learned

    def _start_waiting(self) -> None:
        while self._waiting and len(self._active) < self.workers:
            run_id = self._waiting.popleft()
            process = subprocess.Popen([sys.executable, "-m", "lpos.lab.job"], cwd=PACKAGE_ROOT, text=True,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            process.stdin.write(json.dumps({"args": self._runs[run_id].args, "caps": dataclasses.asdict(self.caps),
                                            "out": self._checkpoint_path(run_id)}) + "\n")
            process.stdin.close()
            self._active[run_id] = (process, time.monotonic(), False)
            self._runs[run_id].state = "running"
            threading.Thread(target=self._read, args=(run_id, process), daemon=True, name=f"lpos-lab-{run_id}").start()

    def _checkpoint_path(self, run_id: str) -> str:
        return os.path.join(self._folder, f"{run_id}.pt")

    def _read(self, run_id: str, process: subprocess.Popen) -> None:
        """The worker's reports, line by line, until it ends."""
        answer = None
        for line in process.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue  # not a report
            with self._lock:
                if "progress" in message:
                    self._runs[run_id].progress = message["progress"]
            answer = message if "progress" not in message else answer
        process.wait()
        with self._lock:
            self._end(run_id, answer, process.returncode)

    def _end(self, run_id: str, answer: dict | None, code: int) -> None:
        _, _, stop_asked = self._active.pop(run_id, (None, 0, False))
        run, path = self._runs[run_id], self._checkpoint_path(run_id)
        if answer is not None and "finished" in answer and os.path.exists(path):
            with open(path, "rb") as file:
                run.state, run.summary, run.checkpoint = "finished", answer["finished"], file.read()
            os.unlink(path)
            run.message = run.summary["stopped"] or ""
        elif stop_asked:
            run.state, run.message = "stopped", "stopped before it started training"
        elif run.state == "running":
            run.state = "failed"
            run.message = answer["failed"] if answer is not None and "failed" in answer else \
                f"the worker process ended without an answer (exit code {code})"
        self._start_waiting()

    def _watch(self) -> None:
        while True:
            time.sleep(WATCH_SECONDS)
            with self._lock:
                for run_id, (process, started, _) in list(self._active.items()):
                    over = self._over_cap(process.pid, time.monotonic() - started)
                    if over and process.poll() is None:
                        process.kill()
                        self._runs[run_id].state, self._runs[run_id].message = "failed", over
                self._forget_old()

    def _over_cap(self, pid: int, seconds: float) -> str:
        used = process_memory_mb(pid)
        if used > self.caps.max_memory_mb * 1.25:
            return f"ended at the memory cap of {self.caps.max_memory_mb:,} MB ({used:,.0f} MB in use)"
        if seconds > self.caps.max_seconds + GRACE_SECONDS:
            return f"ended at the cap of {self.caps.max_seconds:,.0f} seconds"
        return ""

    def _forget_old(self) -> None:
        finished = [run_id for run_id, run in self._runs.items() if run.done]
        for run_id in finished[: max(0, len(finished) - KEEP_FINISHED)]:
            del self._runs[run_id]


class RedisRuns:
    """Runs in an RQ queue on the live class's Redis, trained by `rq worker lpos-lab` processes."""

    def __init__(self, url: str, caps: Caps | None = None):
        import redis
        from rq import Queue

        self.caps = caps or current_caps()
        self._redis = redis.Redis.from_url(url)
        self._queue = Queue(QUEUE_NAME, connection=self._redis)

    def submit(self, args: LabArgs) -> str:
        enqueued = self._queue.enqueue(job.rq_job, args.as_dict(), dataclasses.asdict(self.caps),
                                       job_timeout=int(self.caps.max_seconds + GRACE_SECONDS),
                                       result_ttl=job.PROGRESS_TTL, failure_ttl=job.PROGRESS_TTL)
        return enqueued.id

    def status(self, run_id: str) -> RunStatus | None:
        import json

        from rq.exceptions import NoSuchJobError
        from rq.job import Job, JobStatus

        try:
            found = Job.fetch(run_id, connection=self._redis)
        except NoSuchJobError:
            return None
        state, args = found.get_status(), found.args[0]
        progress = self._redis.get(job.progress_key(run_id))
        run = RunStatus(run_id, args, "running", progress=json.loads(progress) if progress else None)
        if state in (JobStatus.QUEUED, JobStatus.DEFERRED, JobStatus.SCHEDULED):
            position = self._queue.get_job_position(run_id)
            run.state, run.place = "queued", (position + 1 if position is not None else None)
        elif state == JobStatus.FINISHED:
            answer = found.return_value()
            run.state, run.summary, run.checkpoint = "finished", answer["summary"], answer["checkpoint"]
            run.message = answer["summary"]["stopped"] or ""
        elif state in (JobStatus.CANCELED, JobStatus.STOPPED):
            run.state, run.message = "stopped", "stopped before it started"
        elif state == JobStatus.FAILED:
            result = found.latest_result()
            why = (result.exc_string or "").strip().splitlines()[-1:] if result is not None else []
            run.state, run.message = "failed", why[0] if why else "the worker failed"
        return run

    def stop(self, run_id: str) -> None:
        from rq.job import Job, JobStatus

        self._redis.set(job.stop_key(run_id), 1, ex=job.PROGRESS_TTL)
        found = Job.fetch(run_id, connection=self._redis)
        if found.get_status() == JobStatus.QUEUED:
            found.cancel()


@functools.cache
def lab_runs() -> LocalRuns | RedisRuns:
    """This process's queue of lab runs (the module docstring says which)."""
    url = settings.redis_url()
    return RedisRuns(url) if url else LocalRuns(settings.lab_workers())
