"""Where a cold start's time goes, one part at a time, each in a fresh process.

    python load/cold_start.py --runs 5

A server's cold start is Python starting, Streamlit's imports and its runtime start (which, since
Streamlit 1.5x's components v2, reads the metadata of every installed distribution looking for
component manifests), then app.py's first run: torch, Plotly, pandas, lpos, and the first model
load. Each part is timed in a new interpreter after the parts before it, so a part's figure is the
difference of two medians. Run it on an idle machine: the figures are wall-clock times.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Each step runs after all the steps above it in the same fresh interpreter.
STEPS = {
    "python alone": "",
    "import streamlit (+ its server modules)": "import streamlit, streamlit.web.bootstrap, streamlit.runtime",
    "scan installed distributions for components": (
        "from streamlit.components.v2.manifest_scanner import scan_component_manifests; scan_component_manifests()"),
    "import torch": "import torch",
    "import plotly, pandas": "import plotly.graph_objects, pandas",
    "import lpos's pages' modules": ("import lpos.ui.selection, lpos.ui.embeddings, lpos.ui.models, lpos.figures.embeddings,"
                                      " lpos.checkpoints"),
    "load the first model (learned)": "from lpos import checkpoints; checkpoints.load('learned')",
}


def time_prefix(code: str, runs: int) -> list[float]:
    """Wall seconds of `python -c code`, `runs` times."""
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
        seconds.append(time.perf_counter() - start)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    from importlib.metadata import distributions

    lines, code, before = [], "", 0.0
    results = {"distributions_installed": len(list(distributions())), "runs": args.runs, "parts": {}}
    for name, step in STEPS.items():
        code = f"{code}; {step}" if code and step else (step or code or "pass")
        median = statistics.median(time_prefix(code, args.runs))
        results["parts"][name] = {"cumulative_s": round(median, 3), "part_s": round(median - before, 3)}
        lines.append(f"{name:<48} {median - before:6.2f} s   (cumulative {median:5.2f} s)")
        before = median
    print(f"{results['distributions_installed']} distributions installed; median of {args.runs} fresh processes")
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
