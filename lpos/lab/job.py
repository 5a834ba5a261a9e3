"""What a lab worker process runs: one training run, its progress reported as plain data, its answer the run's
summary and checkpoint bytes. Two entry points: `python -m lpos.lab.job` for a process the server started itself
(lpos.lab.runs.LocalRuns: the request a JSON line on stdin, progress and the answer JSON lines on stdout, the
checkpoint written to the file the request names, Stop a SIGTERM), and `rq_job` for an `rq worker` on any machine
that reaches the Redis (progress and Stop through Redis keys named after the job).
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch

from lpos.lab import checkpoint_bytes, summary
from lpos.lab.training import Caps, LabArgs, Progress, train

PROGRESS_TTL = 3600  # seconds a run's progress stays in Redis
STOP_POLL_SECONDS = 0.25  # the longest a Stop waits to be seen
NICENESS = 10  # a server-started worker yields the CPU to the pages served beside it


def progress_key(run_id: str) -> str:
    return f"lpos:lab:{run_id}:progress"


def stop_key(run_id: str) -> str:
    return f"lpos:lab:{run_id}:stop"


def progress_message(progress: Progress) -> dict:
    """A progress report as plain data (JSON for Redis, pickle for a process queue)."""
    picture = progress.picture
    return {"step": progress.step, "steps": progress.steps, "seconds": round(progress.seconds, 2),
            "curve": progress.curve,
            "picture": None if picture is None else {"kind": picture.kind, "title": picture.title,
                                                     "values": picture.values.round(4).tolist()}}


def run(args: dict, caps: dict, *, report: Callable[[dict], None], should_stop: Callable[[], bool]) -> dict:
    """Train the run `args` asks for under `caps`, on one torch thread; its summary and checkpoint bytes."""
    torch.set_num_threads(1)  # one run per core: a worker never takes the cores the pages are served from
    model, meta = train(LabArgs(**args), caps=Caps(**caps), on_progress=lambda p: report(progress_message(p)),
                        should_stop=should_stop)
    return {"summary": summary(meta), "checkpoint": checkpoint_bytes(model, meta)}


def main() -> None:
    """A server-started worker, at a lower priority than the server: {"args", "caps", "out"} on stdin;
    {"progress": ...} lines, then {"finished": summary} (the checkpoint in `out`) or {"failed": why} on stdout.
    SIGTERM stops the run after its step."""
    request = json.loads(sys.stdin.readline())
    os.nice(NICENESS)  # the server's pages and the learners' browsers first, training with what is left
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    say = lambda message: print(json.dumps(message), flush=True)  # noqa: E731
    try:
        answer = run(request["args"], request["caps"], report=lambda m: say({"progress": m}), should_stop=stopping.is_set)
    except Exception as e:  # the server says why; the process ends either way
        say({"failed": f"{type(e).__name__}: {e}"})
        return
    Path(request["out"]).write_bytes(answer["checkpoint"])
    say({"finished": answer["summary"]})


def rq_job(args: dict, caps: dict) -> dict:
    """An RQ job: progress written to Redis as it trains, Stop read from Redis; the answer is RQ's result."""
    from rq import get_current_job

    job = get_current_job()
    redis, checked = job.connection, [0.0, False]

    def should_stop() -> bool:
        now = time.monotonic()
        if now - checked[0] >= STOP_POLL_SECONDS:
            checked[:] = [now, bool(redis.exists(stop_key(job.id)))]
        return checked[1]

    return run(args, caps, should_stop=should_stop,
               report=lambda message: redis.set(progress_key(job.id), json.dumps(message), ex=PROGRESS_TTL))


if __name__ == "__main__":
    main()
