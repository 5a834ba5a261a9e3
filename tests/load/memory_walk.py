"""The bench's two memory measurements alone, in headless Chromium (about 4 minutes): an idle server
after one session loaded every shipped and untrained model, and one session walking every page.
Run: python tests/load/memory_walk.py [idle] [walk]   (docs/PERFORMANCE.md; `python -m lpos bench`
measures the same inside the full run)."""
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from playwright.sync_api import sync_playwright  # noqa: E402

from lpos.bench.common import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from lpos.bench.interactions import measure_idle, measure_walk  # noqa: E402

MEASURES = {"idle": measure_idle, "walk": measure_walk}

if __name__ == "__main__":
    chosen = sys.argv[1:] or list(MEASURES)
    with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for name in chosen:
            print(name, json.dumps(MEASURES[name](browser, Path(folder))), flush=True)
        browser.close()
