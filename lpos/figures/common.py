"""Shared helpers for figure builders: safe labels and one look for every figure."""
from __future__ import annotations

import html
import textwrap
import threading
import zlib

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lpos.positions import REGISTRY, scheme_info

DIVERGING = "RdBu_r"  # negative blue, zero white, positive red
SEQUENTIAL = "Viridis"
# models that are not named after their scheme (learned-32, learned-rand, an upload): colours no scheme uses
OTHER_COLOURS = ("#bcbd22", "#8c564b", "#393b79", "#ad494a", "#637939")


def colour_of(name: str) -> str:
    """A model's line colour: its scheme's when it is named after one, else one of OTHER_COLOURS, the same for
    the same name every time."""
    scheme = REGISTRY.get(name)
    if scheme is not None:
        return scheme.colour
    return OTHER_COLOURS[zlib.crc32(name.encode("utf-8")) % len(OTHER_COLOURS)]


def nothing_added(scheme: str, *, width: int = 30) -> str:
    """Why a scheme's position panel is empty, in short lines for a panel ("<br>" between them)."""
    info = scheme_info(scheme)
    if info.in_attention:
        text = f"{info.label} adds nothing here: it {info.acts}."
    else:
        text = "No position rows: the model gets no position information."
    return "<br>".join(textwrap.wrap(safe(text), width))


def safe(text: str) -> str:
    """Token text for Plotly labels: Plotly renders a few HTML tags, so escape them all
    (`<script>` is shown as the characters it is, never as markup)."""
    return html.escape(text, quote=False)


def position_labels(tokens: list[str]) -> list[str]:
    """Unique, readable axis labels: "3 ␣the" (a repeated token still gets its own row)."""
    return [f"{i} {safe(t)}" for i, t in enumerate(tokens)]


def tick_step(count: int, *, pixels: int, spacing: int = 14) -> int:
    """Label every step-th of `count` rows drawn in `pixels` so labels sit `spacing` px apart."""
    return max(1, -(-count * spacing // max(pixels, 1)))


GRIDS = 64  # empty subplot grids kept, by the arguments that made them
_grids: dict[str, dict] = {}
_grids_lock = threading.Lock()


def subplots(**grid) -> go.Figure:
    """plotly's make_subplots(**grid), its empty grid built once per set of arguments and copied: a copy takes
    about 1 ms, make_subplots about 13 (it validates every axis and title it adds, which a copy of its own valid
    figure need not). What is added to the copy is validated as in any figure."""
    key = repr(sorted(grid.items()))
    with _grids_lock:
        spec = _grids.get(key)
    if spec is None:
        made = make_subplots(**grid)
        spec = {**made.to_dict(), "_grid_ref": made._grid_ref, "_grid_str": made._grid_str}
        with _grids_lock:
            if len(_grids) >= GRIDS:
                _grids.pop(next(iter(_grids)))
            _grids[key] = spec
    fig = go.Figure(spec, _validate=False)  # to_dict's copy: the figure's changes never reach the kept grid
    fig._validate = True
    return fig


def finish(fig: go.Figure, *, title: str, height: int | None = None) -> go.Figure:
    """Title and margins for every figure. No named template: assigning one costs ~0.1 s per figure
    (Plotly validates the whole template), and st.plotly_chart applies Streamlit's theme anyway."""
    top = 60 + 22 * title.count("<br>")  # a title broken over lines (for a phone's width) keeps clear of the plot
    fig.update_layout(title=dict(text=title, x=0.0, xanchor="left"), margin=dict(l=10, r=10, t=top, b=10))
    if height is not None:
        fig.update_layout(height=height)
    return fig
