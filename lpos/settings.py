"""Every setting lpos reads from the environment, in one place. Each is read when asked (a server or a
test sets it first), and a value that does not parse reads as the default, never as a crash.

| variable | what it sets | default |
|---|---|---|
| `LPOS_MAX_UPLOAD_MB` | the largest model a user may open, in MB (the upload box also stays under Streamlit's `server.maxUploadSize`) | 1024 |
| `LPOS_CHECKPOINT_DIR` | a shared folder of models every session is offered | none |
| `LPOS_VIEW_CACHE` | where a shared-folder model's computed views are kept; `off` keeps none | `~/.cache/lpos/views` |
| `LPOS_TORCH_THREADS` | torch threads of an app process (each session's run uses them in turn) | 1 |
| `LPOS_REDIS_URL` | the live class's Redis, shared by every replica | none: classes live in the process |
| `LPOS_PROFILE` | a folder for one pyinstrument report per page run | none |
| `LPOS_FULL_GC_SECONDS` | seconds between the app's full garbage collections | 30 |
| `LPOS_MODEL_MEMORY_MB` | above this resident size, in MB, an app process lets go of the shipped and shared-folder models no run has asked for in the last 30 s (a page that needs one again loads it again) | 480 |
| `LPOS_DATA_DIR` | the training corpus | `shared/data` beside the checkout |
| `LPOS_PLOTLY_REACT` | `1`: every chart is updated in place (lpos/ui/plotly_react.py); `0`: st.plotly_chart | `PLOTLY_REACT_DEFAULT` below |
| `LPOS_LAB_WORKERS` | lab runs trained at once by worker processes the server starts (more wait in a queue); with `LPOS_REDIS_URL`, `rq worker` processes train them instead | 1 |
| `LPOS_LAB_MAX_STEPS` | the most steps a lab run trains | 5000 |
| `LPOS_LAB_MAX_SECONDS` | the longest a lab run trains, in seconds | 300 |
| `LPOS_LAB_MAX_MB` | the most memory a lab run may take, in MB: what its process holds beyond what it held when the run began (the server also ends a worker process holding 1.25 times this in all) | 2048 |
"""
from __future__ import annotations

import os
from pathlib import Path

MAX_UPLOAD_MB = "LPOS_MAX_UPLOAD_MB"
CHECKPOINT_DIR = "LPOS_CHECKPOINT_DIR"
VIEW_CACHE = "LPOS_VIEW_CACHE"
TORCH_THREADS = "LPOS_TORCH_THREADS"
REDIS_URL = "LPOS_REDIS_URL"
PROFILE = "LPOS_PROFILE"
FULL_GC_SECONDS = "LPOS_FULL_GC_SECONDS"
MODEL_MEMORY_MB = "LPOS_MODEL_MEMORY_MB"
DATA_DIR = "LPOS_DATA_DIR"
PLOTLY_REACT = "LPOS_PLOTLY_REACT"
LAB_WORKERS = "LPOS_LAB_WORKERS"
LAB_MAX_STEPS = "LPOS_LAB_MAX_STEPS"
LAB_MAX_SECONDS = "LPOS_LAB_MAX_SECONDS"
LAB_MAX_MB = "LPOS_LAB_MAX_MB"
PLOTLY_REACT_DEFAULT = True  # in place wins: `python -m lpos bench --plotly-react` (docs/PERFORMANCE.md)
DEFAULT_UPLOAD_MB = 1024  # the same number as server.maxUploadSize in .streamlit/config.toml


def _number(name: str, default: float, kind: type = int) -> float:
    """The variable as a positive number, else `default`."""
    try:
        value = kind(os.environ.get(name, "").strip() or default)
    except ValueError:
        return default
    return value if value > 0 else default


def _folder(name: str) -> Path | None:
    value = os.environ.get(name, "").strip()
    return Path(value) if value else None


def max_upload_mb() -> int:
    return _number(MAX_UPLOAD_MB, DEFAULT_UPLOAD_MB)


def checkpoint_dir() -> Path | None:
    return _folder(CHECKPOINT_DIR)


def view_cache() -> Path | None:
    """The views cache folder; None when LPOS_VIEW_CACHE is `off`."""
    if os.environ.get(VIEW_CACHE, "").strip() == "off":
        return None
    return _folder(VIEW_CACHE) or Path.home() / ".cache" / "lpos" / "views"


def torch_threads() -> int:
    return _number(TORCH_THREADS, 1)


def redis_url() -> str:
    return os.environ.get(REDIS_URL, "").strip()


def profile_dir() -> Path | None:
    return _folder(PROFILE)


def full_gc_seconds() -> float:
    return _number(FULL_GC_SECONDS, 30.0, float)


def model_memory_mb() -> int:
    return _number(MODEL_MEMORY_MB, 480)


def data_dir(default: Path) -> Path:
    return _folder(DATA_DIR) or default


def plotly_react() -> bool:
    """Whether pages that opt in draw their charts with lpos.ui.plotly_react (`1`) or st.plotly_chart (`0`)."""
    value = os.environ.get(PLOTLY_REACT, "").strip()
    return value == "1" if value in ("0", "1") else PLOTLY_REACT_DEFAULT


def lab_workers() -> int:
    return _number(LAB_WORKERS, 1)


def lab_caps() -> tuple[int, float, int]:
    """(steps, seconds, MB): where a lab run is stopped."""
    return _number(LAB_MAX_STEPS, 5000), _number(LAB_MAX_SECONDS, 300.0, float), _number(LAB_MAX_MB, 2048)
