"""What every part of the benchmark shares: the repository root, the goals, the browser and `spread`."""
from __future__ import annotations

import os
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
GOAL_RATIO = 2.5  # a new sentence may take at most this many times the bare page's
CPU_GOAL_MS = 80  # server CPU per sentence change on any page
CONTROL_GOAL_RATIO = 2.5  # a page-local control, against the bare page's sentence change
COLD_START_GOAL_MS = 4000
MEMORY_LIMIT_MB = 690  # Streamlit Community Cloud's smallest documented app memory (docs/DEPLOY.md)
IDLE_LIMIT_MB = 500  # an idle server holding every shipped model
CHROMIUM = os.environ.get("LPOS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-dev-shm-usage"]


def spread(values: list[float]) -> dict:
    """Median and range of repeated measurements."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}
