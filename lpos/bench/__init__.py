"""Performance benchmark: model throughput, and the real app measured in headless Chromium.

Model side (no browser): tokens/s of training (`lpos.train.train` for a few steps on a synthetic
corpus at the shipped size) and of evaluation (`lpos.analysis.lengths.length_losses`).

App side: `streamlit run app.py` on a local port, driven by Playwright + Chromium. For every page,
the time from a sidebar change (a new sentence committed with Ctrl+Enter; another scheme picked)
until the page is fully drawn (browser.py: the server's `script_finished` message has arrived,
Streamlit says no script is running, no element is stale and every Plotly chart has drawn). Each is compared with
the same interaction on a bare page (a text area and a select box) served on the same machine in
the same run; the goal is at most GOAL_RATIO times that floor. Also: cold start, the first page
after a model switch, peak server memory (RSS of the streamlit process tree), bytes sent to the
browser, and the 1024 x 1024 similarity map.

Also (interactions.py): the server's CPU per change (psutil), each page's own control
(a key press on a slider, a click on a button), one session walking every page with every scheme,
and an idle server holding every model, each against its goal in common.py.

first_visit.py: each page first opened on a fresh server against a bare page importing the
same libraries (with the shipped models, and with twenty in a copy of the app), every page with a
seed-size (45M) model from a shared folder, and every page with every shipped model then that model
uploaded, peak RSS included.

throughput.py measures the model; browser.py is the one browser harness (the server, Chromium, a tab that
knows when the page is drawn), also the tests' and the load scripts'; the pages measured are lpos.pages's;
report.py prints the table; common.py holds what they share.
plotly_react.py (`--plotly-react`) times every page's new sentence and own control with charts updated in
place against st.plotly_chart; floors.py (`--floors`) bare pages of the app's shapes that compute nothing.
cloud.py (`--cloud`) runs the app's own image in a container limited like Community Cloud's smallest app
(docker.py: the engine, images and containers; cgroup.py: its memory and CPU).
"""
from __future__ import annotations

import os
import platform

import torch

from lpos.bench.browser import check_browser
from lpos.bench.first_visit import first_visit_side
from lpos.bench.common import CHROMIUM, CHROMIUM_ARGS, GOAL_RATIO, MEMORY_LIMIT_MB, spread
from lpos.bench.measure import app_side
from lpos.bench.throughput import evaluation_speed, model_side, synthetic_corpus
from lpos.bench.report import table

__all__ = [
    "CHROMIUM", "CHROMIUM_ARGS", "GOAL_RATIO", "MEMORY_LIMIT_MB", "app_side", "check_browser", "evaluation_speed",
    "machine", "run", "spread", "synthetic_corpus", "table",
]


def machine() -> dict:
    return {"cpu_cores": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
            "torch": torch.__version__}


def run(*, runs: int = 5, quick: bool = False, browser: bool = True, first_visit_only: bool = False,
        progress=print) -> dict:
    """The whole benchmark as one JSON-ready dict (`first_visit_only`: the first-visit sections alone)."""
    runs = 1 if quick else runs
    results = {"machine": machine(), "runs": runs, "quick": quick, "goal_ratio": GOAL_RATIO}
    if not first_visit_only:
        progress("measuring training and evaluation speed")
        results["model"] = model_side(quick=quick)
    if browser and not first_visit_only:
        results["app"] = app_side(runs=runs, quick=quick, progress=progress)
    if browser:
        results["first_visit"] = first_visit_side(quick=quick, progress=progress)
    return results
