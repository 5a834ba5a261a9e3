"""App side of the benchmark: each page against a bare floor page, the 1024 x 1024 similarity map,
sessions at once, cold starts and peak memory, all in headless Chromium (`app_side` runs them all)."""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

from lpos.bench.browser import Server, Tab, chromium, peak_memory
from lpos.bench.common import MEMORY_LIMIT_MB, ROOT, spread
from lpos.bench.interactions import measure_controls, measure_idle, measure_walk, open_every_model
from lpos.pages import PAGES, url_paths
from lpos.positions import DEFAULT_SCHEME, SCHEMES

BIG_MAP_SCHEME = "sinusoidal"  # the Similarity map at 1024 positions: a table that reads that far

# The floor: the cheapest page that has the same two sidebar controls. Written to a temp dir at bench time.
FLOOR_APP = f'''import streamlit as st

with st.sidebar:
    text = st.text_area("Sentence", "The dog bit the man")
    scheme = st.selectbox("Position scheme", {list(SCHEMES)!r})
st.write(text, scheme)
'''


def sentence(page_index: int, run: int) -> str:
    return f"The little dog {page_index} bit the old man {run} and then the man bit the dog back"


def measure_floor(browser, server: Server, runs: int) -> dict:
    tab = Tab(browser)
    tab.open(server.url)
    changes = [tab.new_sentence(sentence(99, run), server=server) for run in range(runs)]
    schemes = [tab.pick_scheme(SCHEMES[(run + 1) % len(SCHEMES)])["ms"] for run in range(runs)]
    tab.close()
    return {"sentence_ms": [c["ms"] for c in changes], "scheme_ms": schemes,
            "sentence_cpu_ms": [c["cpu_ms"] for c in changes]}


def measure_page(browser, server: Server, path: str, index: int, runs: int) -> dict:
    tab = Tab(browser)
    load = tab.open(f"{server.url}/{path}?scheme=learned&model=learned")
    sentences, schemes, interaction_bytes, errors, script, cpu = [], [], [], load["errors"], [], []
    for run in range(runs):
        changed = tab.new_sentence(sentence(index, run), server=server)
        cpu.append(changed["cpu_ms"])
        for measured, into in ((changed, sentences),
                               (tab.pick_scheme(SCHEMES[(run + 1) % len(SCHEMES)]), schemes)):
            into.append(measured["ms"])
            script.append(measured["script_ms"] / measured["ms"])
            interaction_bytes.append(measured["ws_bytes"])
            errors += measured["errors"]
    result = {"first_draw_ms": load["ms"], "load_ws_bytes": load["ws_bytes"], "load_http_bytes": load["http_bytes"],
              "sentence_ms": spread(sentences), "scheme_ms": spread(schemes), "sentence_cpu_ms": spread(cpu),
              "interaction_ws_bytes": spread(interaction_bytes), "server_share": spread(script),
              "largest_frame_bytes": tab.largest_frame, "errors": errors}
    tab.close()
    return result


def measure_big_map(browser, server: Server, path: str, runs: int) -> dict:
    """The Similarity page's position map at its largest: 1024 positions (BIG_MAP_SCHEME; a learned table stops at 128)."""
    times, sent = [], []
    for _ in range(runs):
        tab = Tab(browser)
        tab.open(f"{server.url}/{path}?scheme={BIG_MAP_SCHEME}&model={BIG_MAP_SCHEME}&positions=1023")
        measured = tab.step_slider("Positions")
        thumb = tab.page.locator('[data-testid="stSlider"]').filter(has_text="Positions").get_by_role("slider")
        # Streamlit 1.67's slider is an <input type="range">; 1.58's a div with aria-valuenow (bench before/after)
        value = thumb.first.get_attribute("aria-valuenow") or thumb.first.input_value()
        times.append(measured["ms"])
        sent.append(measured["ws_bytes"])
        tab.close()
    return {"scheme": BIG_MAP_SCHEME, "positions": int(value), "ms": spread(times), "ws_bytes": spread(sent)}


def measure_sessions(browser, server: Server, sessions: int) -> int:
    """Open several sessions at once, each on a page with a control of its own at the control's view, from the
    end of the menu (the experiments, the heaviest first visits); returns how many were drawn without error."""
    heavy = [page for page in PAGES if page.control][-sessions:]
    tabs = [Tab(browser) for _ in heavy]
    for tab, page in zip(tabs, heavy):
        tab.page.goto(f"{server.url}/{page.url_path}?{page.control.query}")
    drawn = 0
    for tab in tabs:
        drawn += tab.wait_drawn(0, time.perf_counter())["errors"] == 0
        tab.close()
    return drawn


def measure_cold_start(browser, log_dir: Path, runs: int) -> dict:
    first, after_switch = [], []
    for run in range(runs):
        server = Server(ROOT / "app.py", log_dir / f"cold{run}.log")
        try:
            tab = Tab(browser)
            first.append(tab.open(f"{server.url}/?scheme=learned&model=learned", began=server.started)["ms"])
            after_switch.append(tab.pick_scheme("sinusoidal")["ms"])
            tab.close()
        finally:
            server.stop()
    return {"first_page_ms": spread(first), "after_model_switch_ms": spread(after_switch)}


def sentence_ratios(browser, server: Server, floor_server: Server, paths: dict[str, str], runs: int,
                    progress=print) -> tuple[dict, dict]:
    """The bare page's new sentence and scheme switch (measured before and after the pages: load may
    drift), and each page's, with their ratios to it; the models the pages switch to loaded first
    (`opened_schemes`), so that no timing includes a first load."""
    progress("measuring the floor page")
    floor = measure_floor(browser, floor_server, runs)
    pages = {}
    for index, (name, path) in enumerate(sorted(paths.items())):
        progress(f"measuring page {name}")
        pages[name] = measure_page(browser, server, path, index, runs)
    more = measure_floor(browser, floor_server, runs)
    floor = {key: spread(values + more[key]) for key, values in floor.items()}
    for page in pages.values():
        for kind in ("sentence", "scheme"):
            page[f"{kind}_ratio"] = page[f"{kind}_ms"]["median"] / floor[f"{kind}_ms"]["median"]
    return floor, pages


def opened_schemes(runs: int, *, quick: bool) -> tuple[str, ...]:
    """The schemes whose models the server holds while pages are timed: every scheme, or with --quick the first
    ones the pages switch to (learned, then SCHEMES[run + 1]) and the big map's."""
    return tuple(SCHEMES) if not quick else tuple(dict.fromkeys([*SCHEMES[: runs + 1], BIG_MAP_SCHEME]))


def app_side(*, runs: int = 5, quick: bool = False, progress=print) -> dict:
    """Every browser measurement; needs Playwright and Chromium (check_browser)."""
    with tempfile.TemporaryDirectory() as folder, chromium() as browser:
        folder = Path(folder)
        (folder / "floor.py").write_text(FLOOR_APP)
        floor_server = Server(folder / "floor.py", folder / "floor.log")
        server = Server(ROOT / "app.py", folder / "app.log")
        try:
            with peak_memory(server) as sampler:
                paths = url_paths()
                loaded = open_every_model(browser, server, schemes=opened_schemes(runs, quick=quick))
                floor, pages = sentence_ratios(browser, server, floor_server, paths, runs, progress=progress)
                progress("measuring the 1024 x 1024 similarity map")
                big_map = measure_big_map(browser, server, paths["similarity"], 1 if quick else 3) if "similarity" in paths else None
                sessions = 2 if quick else 3
                progress(f"opening {sessions} sessions at once")
                drawn = measure_sessions(browser, server, sessions)
                progress("measuring each page's own control")
                controls = measure_controls(browser, server, runs)
                for name, control in controls.items():
                    control["ratio"] = control["ms"]["median"] / floor["sentence_ms"]["median"]
                idle_mb = server.rss_mb()
            memory = {"peak_rss_mb": sampler["peak_mb"], "end_rss_mb": idle_mb, "limit_mb": MEMORY_LIMIT_MB,
                      "models_loaded": loaded, "sessions_at_once": sessions,
                      "sessions_drawn": drawn}
        finally:
            server.stop()
            floor_server.stop()
        progress("measuring cold starts")
        cold = measure_cold_start(browser, folder, 1 if quick else 5)
        walked = (DEFAULT_SCHEME,) if quick else tuple(SCHEMES)  # --quick: one scheme's models, a smoke test
        progress(f"one session walking every page with {len(walked)} scheme(s); an idle server with their models")
        walk, idle = measure_walk(browser, folder, schemes=walked), measure_idle(browser, folder, schemes=walked)
    return {"floor": floor, "pages": pages, "similarity_1024": big_map, "memory": memory, "cold_start": cold,
            "controls": controls, "walk": walk, "idle": idle}
