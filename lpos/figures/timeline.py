"""Figures of the training timeline: the loss curve with the current step marked, the position map
at a step (and all steps as a Plotly animation with its own play button), the band by distance,
the repeated word's similarity over training, and the first layer's attention at a step."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from lpos.analysis.sinusoids import block_average
from lpos.analysis.timeline import Timeline
from lpos.figures.attention import matrix_panels
from lpos.figures.common import DIVERGING, finish, safe
from lpos.figures.sinusoids import LINE_COLOURS

MAP_TITLES = {"table": "cosine of the learned position rows",
              "block1": "cosine of what block 1 writes at each position"}


def loss_curve_figure(timeline: Timeline, index: int) -> go.Figure:
    """Validation loss at every snapshot, the chosen one ringed."""
    fig = go.Figure(go.Scatter(x=timeline.steps, y=timeline.val_loss, mode="lines+markers", name="validation loss",
                               hovertemplate="step %{x}<br>loss %{y:.3f} nats<extra></extra>"))
    fig.add_trace(go.Scatter(x=[timeline.steps[index]], y=[timeline.val_loss[index]], mode="markers", name="this step",
                             marker=dict(size=16, symbol="circle-open", line=dict(width=3), color="#d62728"),
                             hovertemplate="step %{x}<br>loss %{y:.3f} nats<extra></extra>"))
    fig.update_xaxes(title_text="training step")
    fig.update_yaxes(title_text=f"loss on {timeline.eval_tokens:,} held-out tokens (nats)")
    return finish(fig, title=f"Validation loss, step {timeline.steps[index]}: {timeline.val_loss[index]:.3f}", height=360)


ANIMATION_CELLS = 64  # each animation frame is block-averaged to at most 64 x 64 cells (~16 kB a frame)


def _map_trace(values: np.ndarray, *, block: int = 1) -> go.Heatmap:
    axis = np.arange(values.shape[0]) * block
    hover = ("position %{y} and %{x}" if block == 1 else f"positions from %{{y}} and %{{x}} (blocks of {block})")
    return go.Heatmap(z=values.astype(np.float32), x=axis, y=axis, zmin=-1, zmax=1, colorscale=DIVERGING,
                      colorbar=dict(title="cosine"), hovertemplate=hover + "<br>cosine %{z:.3f}<extra></extra>")


def _square(fig: go.Figure, size: int) -> None:
    # constrain="domain": the square shrinks its plot area instead of padding the axes past the data
    fig.update_xaxes(title_text="position", range=[-0.5, size - 0.5], constrain="domain")
    fig.update_yaxes(title_text="position", range=[size - 0.5, -0.5], scaleanchor="x", constrain="domain")


def position_map_figure(maps: np.ndarray, timeline: Timeline, index: int) -> go.Figure:
    """The position x position cosine map at snapshot `index`."""
    fig = go.Figure(_map_trace(maps[index]))
    _square(fig, maps.shape[-1])
    # two lines: one is cut off at a phone's 400 px
    return finish(fig, title=f"Step {timeline.steps[index]}: <br>{MAP_TITLES[timeline.position_kind]}", height=520)


def position_map_animation(maps: np.ndarray, timeline: Timeline) -> go.Figure:
    """Every snapshot's map as an animation frame, with a play button and a step slider that run
    in the browser (no server work while it plays)."""
    drawn = [block_average(m, max_rows=ANIMATION_CELLS, max_columns=ANIMATION_CELLS) for m in maps]
    block = drawn[0][1]
    frames = [go.Frame(data=[_map_trace(values, block=block)], name=str(step),
                       layout=go.Layout(title_text=f"Step {step}: <br>{MAP_TITLES[timeline.position_kind]}"))
              for step, (values, _, _) in zip(timeline.steps, drawn)]
    fig = go.Figure(data=[frames[0].data[0]], frames=frames)
    _square(fig, maps.shape[-1])
    play = dict(frame=dict(duration=700, redraw=True), transition=dict(duration=0), fromcurrent=True)
    fig.update_layout(
        updatemenus=[dict(type="buttons", x=0.0, y=-0.08, xanchor="left", yanchor="top", direction="left",
                          buttons=[dict(label="▶ Play", method="animate", args=[None, play]),
                                   dict(label="❚❚ Pause", method="animate",
                                        args=[[None], dict(frame=dict(duration=0, redraw=False), mode="immediate")])])],
        sliders=[dict(x=0.18, y=-0.05, len=0.82, currentvalue=dict(prefix="step "),
                      steps=[dict(label=str(s), method="animate",
                                  args=[[str(s)], dict(mode="immediate", frame=dict(duration=0, redraw=True))])
                             for s in timeline.steps])],
    )
    return finish(fig, title=f"Step {timeline.steps[0]}: {MAP_TITLES[timeline.position_kind]}", height=600)


def band_figure(bands: dict[str, pd.DataFrame], *, title: str, of: str = "the rows") -> go.Figure:
    """Mean cosine against distance, one line per labelled table (columns distance, cosine); `of`
    names what was compared (a table's rows, or what a block adds at each position)."""
    fig = go.Figure()
    lowest = min(float(band["cosine"].min()) for band in bands.values())
    for i, (name, band) in enumerate(bands.items()):
        fig.add_trace(go.Scatter(x=band["distance"], y=band["cosine"], mode="lines", name=name,
                                 line=dict(color=LINE_COLOURS[i % len(LINE_COLOURS)]),
                                 hovertemplate=f"{name}<br>distance %{{x}}<br>mean cosine %{{y:.3f}}<extra></extra>"))
    fig.add_hline(y=0, line=dict(color="grey", width=1, dash="dot"))
    fig.update_xaxes(title_text="distance between positions |i − j|")
    fig.update_yaxes(title_text=f"mean cosine of {of}", range=[min(-0.3, lowest - 0.05), 1.05])
    return finish(fig, title=title, height=360)


def repeated_figure(frame: pd.DataFrame, *, word: str, index: int) -> go.Figure:
    """Cosine of the repeated word's summed rows over training, the chosen step ringed."""
    fig = go.Figure(go.Scatter(x=frame["step"], y=frame["cosine"], mode="lines+markers", name="cosine",
                               hovertemplate="step %{x}<br>cosine %{y:.3f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=[frame["step"][index]], y=[frame["cosine"][index]], mode="markers", name="this step",
                             marker=dict(size=16, symbol="circle-open", line=dict(width=3), color="#d62728")))
    fig.update_xaxes(title_text="training step")
    fig.update_yaxes(title_text="mean cosine between the copies", range=[-0.05, 1.05])
    return finish(fig, title=f"“{word}” at its different positions:<br>summed rows (token + position)", height=340)


def attention_figures(timeline: Timeline, index: int) -> list[go.Figure]:
    """First-layer attention on the probe sentence at snapshot `index`, one figure per head, for a page to
    set in columns that a phone stacks:
    four maps in one figure cannot reflow, and at 400 px they are unreadable."""
    weights = timeline.attention[index]  # (nh, T, T)
    step = timeline.steps[index]
    figures = []
    for h in range(len(weights)):
        fig = matrix_panels([(f"head {h + 1}", weights[h])], tokens=timeline.probe_tokens, value_name="weight",
                            zmin=0.0, zmax=1.0, title="")
        name = fig.layout.annotations[0].text  # "head h", with the block note when averaged
        fig.layout.annotations = ()
        figures.append(finish(fig, title=f"Step {step}, {name}"))
    return figures


QUERY_DASHES = ("dot", "dash", "solid")  # the kept queries, nearest the start first


def bias_figure(frame: pd.DataFrame, *, step: int, label: str) -> go.Figure:
    """The first layer's learned bias against distance at one snapshot (lpos.analysis.timeline.bias_over_distance):
    a colour per head, a dash per query position."""
    fig = go.Figure()
    queries = sorted(frame["query"].unique())
    for head, per_head in frame.groupby("head"):
        for i, (query, rows) in enumerate(per_head.groupby("query")):
            name = f"head {head + 1}, query at {query}"
            fig.add_trace(go.Scatter(
                x=rows["distance"], y=rows["bias"], mode="lines", line_shape="hv", name=name, legendgroup=f"head {head + 1}",
                line=dict(color=LINE_COLOURS[head % len(LINE_COLOURS)], dash=QUERY_DASHES[(i - len(queries)) % 3]),
                hovertemplate=f"{name}<br>distance %{{x}}<br>bias %{{y:.3f}}<extra></extra>"))
    fig.add_hline(y=0, line=dict(color="grey", width=1, dash="dot"))
    fig.update_xaxes(title_text="distance from the query i − j")
    fig.update_yaxes(title_text="bias added to the score")
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2))  # 12 entries: below, so a phone keeps the plot
    return finish(fig, title=f"Step {step}: the first layer's learned bias<br>({safe(label)}) by distance", height=540)
