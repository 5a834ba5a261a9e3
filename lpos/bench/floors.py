"""What a new sentence costs a page that computes nothing (`python -m lpos bench --floors --runs 5`).

The app bench compares each page's new sentence with a bare page (measure.FLOOR_APP: the sidebar's two
controls and one line of text). These are bare pages of the app's shapes: the same sidebar, `elements`
lines of text (one of them the sentence) and `charts` charts updated in place (lpos.ui.plotly_react, as
every chart of the app), each a 16 x 64 heatmap the sentence changes, and no model, no analysis. Each is
served on a fresh server of its own and timed as the app bench times a page (Tab.new_sentence, median of
`runs`), against FLOOR_APP timed on its own server in the same run before and after them. What is over
2.5x here is over before any page computes a number: the browser applying the run and redrawing.
"""
from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from lpos.bench.browser import Server, Tab, chromium
from lpos.bench.common import GOAL_RATIO, spread
from lpos.bench.measure import FLOOR_APP, measure_floor, sentence

# (lines of text, charts): the bare page, then the app's range (Attention shows 14 elements, Stretching 44;
# a new sentence redraws up to 3 charts)
SHAPES = ((10, 0), (20, 0), (40, 0), (10, 1), (20, 3), (40, 3))

SHAPE_APP = '''import hashlib

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from lpos.ui.plotly_react import plotly_react_chart

with st.sidebar:
    text = st.text_area("Sentence", "The dog bit the man")
    scheme = st.selectbox("Position scheme", {schemes!r})
st.title("A page of {elements} lines and {charts} charts")
st.write(text, scheme)
for line in range({elements} - 2):  # with the title and the sentence: {elements} lines
    st.caption(f"Line {{line}}: what the chart below shows, and how to read it.")
seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=4).digest(), "little")
for chart in range({charts}):
    values = np.random.default_rng(seed + chart).normal(size=(16, 64)).round(4)
    figure = go.Figure(go.Heatmap(z=values))
    figure.update_layout(title=f"Chart {{chart}}")
    plotly_react_chart(figure, config={{}}, key=f"chart{{chart}}")
'''


def shape_app(folder: Path, elements: int, charts: int) -> Path:
    from lpos.positions import SCHEMES

    path = folder / f"shape_{elements}_{charts}.py"
    path.write_text(SHAPE_APP.format(schemes=list(SCHEMES), elements=elements, charts=charts))
    return path


def time_sentences(browser, server: Server, runs: int) -> dict:
    tab = Tab(browser)
    tab.open(server.url, timeout=300)
    tab.new_sentence(sentence(98, runs), server=server)  # untimed: the first chart's plotly.js load
    times = [tab.new_sentence(sentence(98, run), server=server)["ms"] for run in range(runs)]
    tab.close()
    return spread(times)


def floors_side(*, runs: int = 5, progress=print) -> dict:
    """{"bare": ms spread, "shapes": [{"elements", "charts", "ms", "ratio"}]}: the ratio against the bare page's
    median, timed before and after the shapes."""
    with tempfile.TemporaryDirectory() as name, chromium() as browser:
        folder = Path(name)
        (folder / "floor.py").write_text(FLOOR_APP)
        with Server(folder / "floor.py", folder / "floor.log") as bare:
            progress("the bare page")
            floor = measure_floor(browser, bare, runs)["sentence_ms"]
            shapes = []
            for elements, charts in SHAPES:
                progress(f"a page of {elements} lines and {charts} charts")
                with Server(shape_app(folder, elements, charts), folder / f"shape_{elements}_{charts}.log") as server:
                    shapes.append({"elements": elements, "charts": charts, "ms": time_sentences(browser, server, runs)})
            floor += measure_floor(browser, bare, runs)["sentence_ms"]
    base = statistics.median(floor)
    return {"bare": spread(floor), "goal_ratio": GOAL_RATIO,
            "shapes": [{**shape, "ratio": shape["ms"]["median"] / base} for shape in shapes]}


def report(results: dict) -> list[str]:
    bare = results["bare"]
    lines = [f"A new sentence on pages that compute nothing, against the bare page's {bare['median']:.0f} ms "
             f"(median of {bare['n']}, before and after):",
             f"{'lines':>6} {'charts':>7} {'median ms':>10} {'(min-max)':>14} {'ratio':>6}"]
    for shape in results["shapes"]:
        ms = shape["ms"]
        over = "  over the pages' goal" if shape["ratio"] > results["goal_ratio"] else ""
        lines.append(f"{shape['elements']:>6} {shape['charts']:>7} {ms['median']:>10.0f} "
                     f"{'(%.0f-%.0f)' % (ms['min'], ms['max']):>14} {shape['ratio']:>6.2f}{over}")
    return lines
