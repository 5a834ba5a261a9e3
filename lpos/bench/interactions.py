"""What a class costs the server: each page's own control, one session walking every page, and an
idle server holding every shipped model (`python -m lpos bench`).

A page-local control is the first control a learner reaches on the page, used the way a person
does (a key press on a slider, a click on a button or an option): with the control inside an
`st.fragment`, only that fragment reruns. Its time is compared with the bare page's new sentence.
"""
from __future__ import annotations

import time
from pathlib import Path

from lpos.bench.browser import Server, Tab, page_paths, peak_memory
from lpos.bench.common import ROOT, spread
from lpos.positions import SCHEMES


def _slider(tab: Tab, label: str, run: int) -> tuple:
    thumb = tab.page.locator('[data-testid="stSlider"]').filter(has_text=label).get_by_role("slider").first
    key = "ArrowRight" if run % 2 == 0 else "ArrowLeft"  # one step up, one back: the same two views
    return thumb.focus, lambda: thumb.press(key)  # the keyboard: a drag is not always taken


def _button(tab: Tab, name: str, run: int) -> tuple:
    return (lambda: None), tab.page.get_by_role("button", name=name).first.click


def _select(tab: Tab, label: str, options: list[str], run: int) -> tuple:
    box = tab.page.locator('[data-testid="stMain"] [data-testid="stSelectbox"]').filter(has_text=label).first
    option = tab.page.locator('[role="option"]').filter(has_text=options[run % len(options)]).first

    def open_list() -> None:  # before the clock starts: the list is drawn, so the click is only the choice
        box.click()
        option.wait_for(state="visible")

    return open_list, option.click


# page stem -> (what the control is, the query the page opens with, how to use it on run n)
CONTROLS = {
    "sinusoids": ("Width slider, one step", "scheme=sinusoidal&model=sinusoidal",
                  lambda tab, run: _slider(tab, "Width", run)),
    "similarity": ("Positions slider, one step", "scheme=learned&model=learned&positions=64",  # mid-range: 128 is its end
                   lambda tab, run: _slider(tab, "Positions", run)),
    "rope_alibi": ("Head box, another head", "scheme=rope&model=rope",
                   lambda tab, run: _select(tab, "Head", ["1", "0"], run)),
    "order_blindness": ("Shuffle button", "scheme=learned&model=learned",
                        lambda tab, run: _button(tab, "Shuffle earlier tokens", run)),
    "lesson": ("Next button", "scheme=learned&model=learned&step=1",
               lambda tab, run: _button(tab, "Next", run)),
    "extrapolation": ("Text radio: the story or your own text", "scheme=sinusoidal&model=sinusoidal",
                      lambda tab, run: ((lambda: None), tab.page.locator('[data-testid="stRadio"]').get_by_text(
                          "Your own text" if run % 2 == 0 else "The built-in story").first.click)),
}


def measure_controls(browser, server: Server, paths: dict[str, str], runs: int) -> dict:
    """{page: {"control", "ms", "cpu_ms"}} for every page that has a page-local control."""
    results = {}
    for name, (what, query, use) in CONTROLS.items():
        if name not in paths:
            continue
        tab = Tab(browser)
        tab.open(f"{server.url}/{paths[name]}?{query}")
        times, cpu, errors = [], [], 0
        for run in range(runs + 1):  # the first use loads the fragment's views: not counted
            prepare, trigger = use(tab, run)
            measured = tab.act(prepare, trigger, server=server)
            if run:
                times.append(measured["ms"])
                cpu.append(measured["cpu_ms"])
            errors += measured["errors"]
        tab.close()
        results[name] = {"control": what, "ms": spread(times), "cpu_ms": spread(cpu), "errors": errors}
    return results


def measure_walk(browser, log_dir: Path) -> dict:
    """A fresh server, one session: every page with every scheme's shipped model, then the
    Similarity map at 1,024 positions and the Length extrapolation page scoring 1,024 tokens."""
    server = Server(ROOT / "app.py", log_dir / "walk.log")
    try:
        with peak_memory(server) as sampler:
            paths = page_paths(browser, server)
            tab = Tab(browser)
            began = time.perf_counter()
            for scheme in SCHEMES:
                for path in paths.values():
                    tab.open(f"{server.url}/{path}?scheme={scheme}&model={scheme}")
            if "similarity" in paths:
                tab.open(f"{server.url}/{paths['similarity']}?scheme=sinusoidal&model=sinusoidal&positions=1023")
                tab.step_slider("Positions")
            seconds = time.perf_counter() - began
            tab.close()
            end = server.rss_mb()
    finally:
        server.stop()
    return {"pages": len(paths), "schemes": len(SCHEMES), "seconds": seconds, "peak_rss_mb": sampler["peak_mb"],
            "end_rss_mb": end}


def measure_idle(browser, log_dir: Path, *, settle_s: float = 5.0) -> dict:
    """A fresh server after one session has loaded every shipped and untrained model and left."""
    server = Server(ROOT / "app.py", log_dir / "idle.log")
    try:
        tab = Tab(browser)
        for scheme in SCHEMES:
            for model in (scheme, "untrained"):
                tab.open(f"{server.url}/?scheme={scheme}&model={model}")
        tab.close()
        time.sleep(settle_s)
        return {"rss_mb": server.rss_mb(), "settle_s": settle_s}
    finally:
        server.stop()
