"""Charts updated in place against st.plotly_chart (`python -m lpos bench --plotly-react`).

Two servers of the same code, one per variant of LPOS_PLOTLY_REACT (lpos.ui.plotly_react), both up for
the whole run. On every page that draws charts from the start (lpos.pages), one tab per variant times a
new sentence typed -> page drawn as the app bench's new-sentence row does (measure.measure_page: the page
opened with the learned model, Tab.new_sentence, measure.sentence), then the page's own control where it
has one (lpos.bench.interactions: the same control on the same view), `runs` times each, the variants
taking turns to go first, so that a busy machine's drift falls on both. One untimed use of each before the
clock starts (its first views and code).
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from lpos.bench.browser import Server, Tab, chromium
from lpos.bench.common import ROOT, spread
from lpos.bench.interactions import USE
from lpos.bench.measure import sentence
from lpos.pages import PAGES, Page
from lpos.settings import PLOTLY_REACT

VARIANTS = {"st.plotly_chart": "0", "in place": "1"}  # what draws the charts -> LPOS_PLOTLY_REACT


def _interleaved(tabs: dict[str, Tab], servers: dict[str, Server], act, runs: int) -> dict:
    """{variant: {"ms", "cpu_ms"}} of `runs` uses of `act(tab, run)` -> (prepare, trigger), the variants taking turns
    to go first; one untimed use first."""
    times, cpu = {name: [] for name in servers}, {name: [] for name in servers}
    for name, tab in tabs.items():
        tab.act(*act(tab, -1))
    for run in range(runs):
        for name in (list(servers) if run % 2 == 0 else list(servers)[::-1]):
            measured = tabs[name].act(*act(tabs[name], run), server=servers[name])
            times[name].append(measured["ms"])
            cpu[name].append(measured["cpu_ms"])
    return {name: {"ms": spread(times[name]), "cpu_ms": spread(cpu[name])} for name in servers}


def _with_ratio(measured: dict) -> dict:
    base = measured["st.plotly_chart"]["ms"]["median"]
    return {name: {**variant, "ratio": variant["ms"]["median"] / base} for name, variant in measured.items()}


def time_page(browser, servers: dict[str, Server], page: Page, index: int, runs: int) -> dict:
    """{"new sentence": {variant: ...}, <the page's control>: {variant: ...}} on one page."""
    def typed(tab: Tab, run: int) -> tuple:
        box = tab.page.locator('[data-testid="stSidebar"] textarea').first
        text = sentence(index, runs if run < 0 else run)  # the untimed one: a number no timed sentence has
        return (lambda: box.fill(text)), (lambda: box.press("Control+Enter"))

    results = {}
    uses = {"new sentence": ("scheme=learned&model=learned", typed)}
    if page.control is not None:
        control = page.control
        # run 0 first (untimed), as measure_controls uses it: a select's first option is the one not shown yet
        uses[control.what] = (control.query, lambda tab, run: USE[control.kind](tab, control, run + 1))
    for what, (query, act) in uses.items():
        tabs = {name: Tab(browser) for name in servers}
        try:
            for name, tab in tabs.items():
                tab.open(f"{servers[name].url}/{page.url_path}?{query}", timeout=300)
            results[what] = _with_ratio(_interleaved(tabs, servers, act, runs))
        except TimeoutError as timeout:  # said in the table, and the other pages are still measured
            results[what] = {"error": str(timeout)}
        finally:
            for tab in tabs.values():
                tab.close()
    return results


def plotly_react_side(*, runs: int = 5, progress=print) -> dict:
    """{page: {what: {variant: {"ms", "cpu_ms", "ratio"}}}}, the ratio against st.plotly_chart's median."""
    servers = {}
    with tempfile.TemporaryDirectory() as folder, chromium() as browser:
        try:
            for name, value in VARIANTS.items():
                servers[name] = Server(ROOT / "app.py", Path(folder) / f"app{value}.log", env={PLOTLY_REACT: value})
            results = {}
            for index, page in enumerate(p for p in PAGES if p.charts_on_open):
                progress(f"{page.name}: a new sentence and its own control, {runs} runs per variant")
                results[page.name] = time_page(browser, servers, page, index, runs)
        finally:
            for server in servers.values():
                server.stop()
    return results


def report(results: dict) -> list[str]:
    """The table: page, what was used, variant, median ms (range), its ratio to st.plotly_chart, server CPU."""
    lines = [f"{'page':<12} {'what':<40} {'variant':<16} {'median ms':>10} {'(min-max)':>14} {'ratio':>6} {'cpu ms':>7}"]
    n = None
    for page, uses in results.items():
        for what, variants in uses.items():
            if "error" in variants:
                lines.append(f"{page:<12} {what[:40]:<40} not measured: {variants['error']}")
                continue
            for name, measured in variants.items():
                ms, n = measured["ms"], measured["ms"]["n"]
                span = f"({ms['min']:.0f}-{ms['max']:.0f})"
                lines.append(f"{page:<12} {what[:40]:<40} {name:<16} {ms['median']:>10.0f} {span:>14} "
                             f"{measured['ratio']:>6.2f} {measured['cpu_ms']['median']:>7.0f}")
    lines.append(f"(used -> page drawn, {n} runs per page, use and variant, interleaved; ratio: the variant's median "
                 "over st.plotly_chart's; LPOS_PLOTLY_REACT=1 is 'in place')")
    return lines
