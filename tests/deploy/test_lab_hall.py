"""The lecture hall with the lab: HAProxy, two replicas and Redis, and one separate `rq worker` process that trains
every run. A learner's run, started through the proxy, is trained by that worker and comes back to the learner's
session: the length chart drawn and the sidebar offering its model."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from conftest import ROOT, new_page
from test_browser_lab import RESULTS, TRAINING_TIMEOUT, no_exception, start_run
from test_classroom import redis_url  # noqa: F401 - the real redis-server fixture

sys.path.insert(0, str(ROOT / "deploy"))
from hall import Hall  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow]
WORKER = "lab-worker-1"


def test_a_separate_rq_worker_trains_the_halls_runs(tmp_path, browser, redis_url):  # noqa: F811
    from redis import Redis
    from rq import Queue
    from rq.job import Job

    from lpos.lab.runs import QUEUE_NAME

    log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen([sys.executable, "-m", "rq.cli", "worker", QUEUE_NAME, "--url", redis_url,
                               "--name", WORKER], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        with Hall(replicas=2, port=0, folder=tmp_path / "hall", env={"LPOS_REDIS_URL": redis_url}) as hall:
            page = new_page(browser)
            start_run(page, hall.url, steps=150)
            page.get_by_text(RESULTS).wait_for(timeout=TRAINING_TIMEOUT)
            no_exception(page)
            page.get_by_text("learned · 32 on Copy: use it or download it").click()
            assert page.get_by_role("button", name="Show it on every page").count() == 1  # in this session's Model box
            queue = Queue(QUEUE_NAME, connection=Redis.from_url(redis_url))
            finished = queue.finished_job_registry.get_job_ids()
            assert len(finished) == 1
            assert Job.fetch(finished[0], connection=queue.connection).worker_name == WORKER
            page.context.close()
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        time.sleep(0.1)
    assert "Job OK" in (tmp_path / "worker.log").read_text() or "Successfully completed" in (tmp_path / "worker.log").read_text()
