"""Charts updated in place against st.plotly_chart (`python -m lpos bench --plotly-react`).

Two servers of the same code, one per variant of LPOS_PLOTLY_REACT (lpos.ui.plotly_react), both up for
the whole run. On Embeddings and Similarity, one tab per variant times a new sentence typed -> page drawn
as the app bench's new-sentence row does (measure.measure_page: the page opened with the learned model,
Tab.new_sentence, measure.sentence), `runs` times, the variants taking turns to go first, so that a busy
machine's drift falls on both. One sentence per tab before the clock starts (its first views and code).
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from lpos.bench.browser import Server, Tab, chromium
from lpos.bench.common import ROOT, spread
from lpos.bench.measure import sentence
from lpos.pages import url_paths
from lpos.settings import PLOTLY_REACT

PAGES = ("embeddings", "similarity")  # the pages whose charts are updated in place (lpos.pages names)
VARIANTS = {"st.plotly_chart": "0", "in place": "1"}  # what draws the charts -> LPOS_PLOTLY_REACT


def time_page(browser, servers: dict[str, Server], path: str, index: int, runs: int) -> dict:
    """{variant: {"ms", "cpu_ms"}} of `runs` new sentences on one page, the variants interleaved."""
    tabs, times, cpu = {}, {name: [] for name in servers}, {name: [] for name in servers}
    for name, server in servers.items():
        tabs[name] = Tab(browser)
        tabs[name].open(f"{server.url}/{path}?scheme=learned&model=learned")
        tabs[name].new_sentence(sentence(index, runs))  # not counted: a number no timed sentence has
    for run in range(runs):
        for name in (list(servers) if run % 2 == 0 else list(servers)[::-1]):
            measured = tabs[name].new_sentence(sentence(index, run), server=servers[name])
            times[name].append(measured["ms"])
            cpu[name].append(measured["cpu_ms"])
    for tab in tabs.values():
        tab.close()
    return {name: {"ms": spread(times[name]), "cpu_ms": spread(cpu[name])} for name in servers}


def plotly_react_side(*, runs: int = 5, progress=print) -> dict:
    """{page: {variant: {"ms", "cpu_ms", "ratio"}}}, the ratio against st.plotly_chart's median."""
    servers = {}
    with tempfile.TemporaryDirectory() as folder, chromium() as browser:
        try:
            for name, value in VARIANTS.items():
                servers[name] = Server(ROOT / "app.py", Path(folder) / f"app{value}.log", env={PLOTLY_REACT: value})
            paths = url_paths()
            results = {}
            for index, page in enumerate(PAGES):
                progress(f"measuring a new sentence on {page}, {runs} runs per variant")
                results[page] = time_page(browser, servers, paths[page], index, runs)
                base = results[page]["st.plotly_chart"]["ms"]["median"]
                for measured in results[page].values():
                    measured["ratio"] = measured["ms"]["median"] / base
        finally:
            for server in servers.values():
                server.stop()
    return results


def report(results: dict) -> list[str]:
    """The table: page, variant, median ms (range), its ratio to st.plotly_chart, server CPU."""
    lines = [f"{'page':<12} {'variant':<16} {'median ms':>10} {'(min-max)':>16} {'ratio':>6} {'server cpu ms':>14}"]
    for page, variants in results.items():
        for name, measured in variants.items():
            ms = measured["ms"]
            span = f"({ms['min']:.0f}-{ms['max']:.0f})"
            lines.append(f"{page:<12} {name:<16} {ms['median']:>10.0f} {span:>16} {measured['ratio']:>6.2f} "
                         f"{measured['cpu_ms']['median']:>14.0f}")
    n = next(iter(next(iter(results.values())).values()))["ms"]["n"]
    lines.append(f"(new sentence typed -> page drawn, {n} runs per page and variant, interleaved; ratio: the "
                 "variant's median over st.plotly_chart's; LPOS_PLOTLY_REACT=1 is 'in place')")
    return lines
