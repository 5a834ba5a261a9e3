"""Charts updated in place: a Plotly figure drawn by a small Streamlit component (v2) that keeps one
Plotly div per chart and hands each new figure to `Plotly.react`.

Why: st.plotly_chart names its element after the figure, so a new sentence makes every changed chart a
new element, and the browser builds it again from nothing; on Embeddings that is most of the browser's
time for a new sentence (docs/PERFORMANCE.md). A keyed component v2 element keeps its frontend element when
its data changes, and Plotly.react redraws what changed in the div already there. Every chart of the app is
drawn here (lpos.ui.export.chart) and LPOS_PLOTLY_REACT switches it (lpos.settings), so
`python -m lpos bench --plotly-react` can time both on the same code.

Served the same from a checkout and from `pip install .`:
- the component's script (lpos/assets/plotly_react.js, package data) is passed inline: Streamlit loads
  it once per page from a Blob URL of its text. A file in an `asset_dir` would need lpos installed as a
  distribution, which `streamlit run app.py` in a checkout is not.
- plotly.js is the plotly package's own copy (the plotly.min.js plotly.py writes into offline HTML),
  served by Streamlit's component file route (a folder declared with components.v1) and loaded by a
  <script> once per page. Inlined, it would travel with every chart of every run (4.8 MB).

The script applies Streamlit's Plotly theme as st.plotly_chart does (the template's placeholder colours
and layout defaults, from the page's theme variables), and the camera button downloads the SVG that
`config` names. AppTest renders no component: under lpos.ui.harness the charts stay st.plotly_chart
elements, which the page tests read.
"""
from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

import plotly
import plotly.graph_objects as go
import plotly.io as pio
import streamlit as st
from streamlit.components import v1 as components_v1

from lpos import settings

NAME = "lpos.plotly_react"
SCRIPT = Path(__file__).resolve().parent.parent / "assets" / "plotly_react.js"
PLOTLY_FOLDER = Path(plotly.__file__).resolve().parent / "package_data"  # plotly.min.js
AS_ELEMENTS = "lpos_charts_as_plotly_elements"  # a session_state key lpos.ui.harness sets for AppTest

# isolate_styles=False: in a shadow root, plotly.js's stylesheet (the modebar, the hover labels) would not apply
_component = st.components.v2.component(NAME, js=SCRIPT.read_text(encoding="utf-8"), isolate_styles=False)


def in_place() -> bool:
    """Whether charts that opt in are drawn here (LPOS_PLOTLY_REACT), rather than by st.plotly_chart."""
    return settings.plotly_react() and not st.session_state.get(AS_ELEMENTS, False)


@cache
def plotly_url() -> str:
    """Where the browser gets plotly.min.js: Streamlit's route for the files of a component declared on the
    plotly package's folder, registered once, in the first script run that asks (one server per process)."""
    files = components_v1.declare_component("plotly_js", path=str(PLOTLY_FOLDER))
    base = st.get_option("server.baseUrlPath").strip("/")
    return f"{'/' + base if base else ''}/component/{files.name}/plotly.min.js"


def plotly_react_chart(fig: go.Figure, *, config: dict, key: str) -> None:
    """Draw `fig` where Streamlit writes next (a `with` block picks the column); the next run's figure
    under the same `key` is drawn into the same div. `config` is Plotly's (the SVG download's name)."""
    figure = pio.to_json(fig, validate=False)  # as st.plotly_chart sends it
    digest = hashlib.blake2b(f"{figure}{config}".encode(), digest_size=8).hexdigest()
    # the digest names the figure: the script skips a figure it shows already, the bench waits for it
    # (lpos.ui.harness.charts_sent)
    _component(key=key, data={"key": key, "digest": digest, "plotly": plotly_url(), "config": config,
                              "figure": figure})
