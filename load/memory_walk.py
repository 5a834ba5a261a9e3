"""The bench's two memory measurements alone, in headless Chromium (about 4 minutes): an idle server
after one session loaded every shipped and untrained model, and one session walking every page.
Run: python load/memory_walk.py [idle] [walk]   (docs/PERFORMANCE.md; `python -m lpos bench`
measures the same inside the full run)."""
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lpos.bench.browser import chromium  # noqa: E402
from lpos.bench.interactions import measure_idle, measure_walk  # noqa: E402

MEASURES = {"idle": measure_idle, "walk": measure_walk}

if __name__ == "__main__":
    chosen = sys.argv[1:] or list(MEASURES)
    with tempfile.TemporaryDirectory() as folder, chromium() as browser:
        for name in chosen:
            print(name, json.dumps(MEASURES[name](browser, Path(folder))), flush=True)
