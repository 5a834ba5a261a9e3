"""What a class costs the server: each page's own control, one session walking every page, and an
idle server holding every shipped model (`python -m lpos bench`).

A page-local control is the first control a learner reaches on the page, used the way a person
does (a key press on a slider, a click on a button or an option): with the control inside an
`st.fragment`, only that fragment reruns. Its time is compared with the bare page's new sentence.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from lpos.bench.browser import Server, Tab, peak_memory
from lpos.bench.common import ROOT, spread
from lpos.pages import PAGES, Control, url_paths
from lpos.positions import SCHEMES


def _slider(tab: Tab, control: Control, run: int) -> tuple:
    thumb = tab.page.locator('[data-testid="stSlider"]').filter(has_text=control.label).get_by_role("slider").first
    key = "ArrowRight" if run % 2 == 0 else "ArrowLeft"  # one step up, one back: the same two views
    return thumb.focus, lambda: thumb.press(key)  # the keyboard: a drag is not always taken


def _button(tab: Tab, control: Control, run: int) -> tuple:
    return (lambda: None), tab.page.get_by_role("button", name=control.label).first.click


def _select(tab: Tab, control: Control, run: int) -> tuple:
    box = tab.page.locator('[data-testid="stMain"] [data-testid="stSelectbox"]').filter(has_text=control.label).first
    option = tab.page.locator('[role="option"]').filter(has_text=control.options[run % len(control.options)]).first

    def open_list() -> None:  # before the clock starts: the list is drawn, so the click is only the choice
        box.click()
        option.wait_for(state="visible")

    return open_list, option.click


def _radio(tab: Tab, control: Control, run: int) -> tuple:
    radio = tab.page.locator('[data-testid="stRadio"]').filter(has_text=control.label)
    return (lambda: None), radio.get_by_text(control.options[run % len(control.options)]).first.click


USE = {"slider": _slider, "button": _button, "select": _select, "radio": _radio}  # Control.kind -> (prepare, trigger)


def measure_controls(browser, server: Server, runs: int) -> dict:
    """{page: {"control", "ms", "cpu_ms"}} for every page with a control of its own (lpos.pages)."""
    results = {}
    for page in PAGES:
        control = page.control
        if control is None:
            continue
        tab = Tab(browser)
        tab.open(f"{server.url}/{page.url_path}?{control.query}")
        times, cpu, errors = [], [], 0
        for run in range(runs + 1):  # the first use loads the fragment's views: not counted
            prepare, trigger = USE[control.kind](tab, control, run)
            measured = tab.act(prepare, trigger, server=server)
            if run:
                times.append(measured["ms"])
                cpu.append(measured["cpu_ms"])
            errors += measured["errors"]
        tab.close()
        results[page.name] = {"control": control.what, "ms": spread(times), "cpu_ms": spread(cpu), "errors": errors}
    return results


def measure_walk(browser, log_dir: Path, *, schemes: Sequence[str] = tuple(SCHEMES)) -> dict:
    """A fresh server, one session: every page with each of `schemes`' shipped model, then the
    Similarity map at 1,024 positions and the Length extrapolation page scoring 1,024 tokens."""
    server = Server(ROOT / "app.py", log_dir / "walk.log")
    try:
        with peak_memory(server) as sampler:
            paths = url_paths()
            tab = Tab(browser)
            began = time.perf_counter()
            for scheme in schemes:
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
    return {"pages": len(paths), "schemes": len(schemes), "seconds": seconds, "peak_rss_mb": sampler["peak_mb"],
            "end_rss_mb": end}


def open_every_model(browser, server: Server, *, schemes: Sequence[str] = tuple(SCHEMES)) -> list[str]:
    """One session opens each of `schemes`' shipped and untrained model, then leaves: the server holds them all.
    Returns the models opened, as the memory report names them."""
    tab = Tab(browser)
    for scheme in schemes:
        for model in (scheme, "untrained"):
            tab.open(f"{server.url}/?scheme={scheme}&model={model}")
    tab.close()
    return [*schemes, f"the untrained model of each of these {len(schemes)}"]


def measure_idle(browser, log_dir: Path, *, settle_s: float = 5.0, schemes: Sequence[str] = tuple(SCHEMES)) -> dict:
    """A fresh server after one session has loaded each of `schemes`' shipped and untrained model and left."""
    server = Server(ROOT / "app.py", log_dir / "idle.log")
    try:
        open_every_model(browser, server, schemes=schemes)
        time.sleep(settle_s)
        return {"rss_mb": server.rss_mb(), "settle_s": settle_s}
    finally:
        server.stop()
