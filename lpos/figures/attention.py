"""Figures of attention: weight maps per head, ALiBi's slopes and bias, and RoPE's rotating
query, its angles per pair and the flat score lines that prove q·k depends on m − n only."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from lpos.analysis.sinusoids import block_average
from lpos.analysis.similarity import FULL_RESOLUTION
from lpos.figures.common import SEQUENTIAL, finish, position_labels, safe, subplots
from lpos.figures.sinusoids import LINE_COLOURS

BIAS_COLOURS = [[0.0, "#08306b"], [1.0, "#f7fbff"]]  # most negative dark blue, zero white


def matrix_panels(panels: list[tuple[str, np.ndarray]], *, tokens: list[str], title: str, value_name: str,
                  zmin: float, zmax: float, colorscale=SEQUENTIAL) -> go.Figure:
    """Query × key matrices side by side (rows = query position, columns = key position).

    Above FULL_RESOLUTION positions each panel is block-averaged and its title says so.
    """
    T = len(tokens)
    drawn, block = [], 1
    for name, matrix in panels:
        values, block, _ = block_average(matrix, max_rows=FULL_RESOLUTION, max_columns=FULL_RESOLUTION)
        drawn.append((name, values))
    note = f" — {block}×{block} blocks averaged" if block > 1 else ""
    fig = subplots(rows=1, cols=len(panels), horizontal_spacing=0.1, subplot_titles=[n + note for n, _ in drawn])
    axis = position_labels(tokens) if block == 1 else np.arange(0, T, block)
    for col, (name, values) in enumerate(drawn, start=1):
        hover = (f"query %{{y}}<br>key %{{x}}<br>{value_name} %{{z:.4f}}" if block == 1 else
                 f"queries from %{{y}}, keys from %{{x}} (blocks of {block})<br>mean {value_name} %{{z:.4f}}")
        fig.add_trace(go.Heatmap(z=values, x=axis, y=axis, zmin=zmin, zmax=zmax, colorscale=colorscale,
                                 showscale=col == len(drawn), colorbar=dict(title=value_name),
                                 hovertemplate=hover + "<extra></extra>"), row=1, col=col)
        fig.update_xaxes(title_text="key (attended to)", row=1, col=col)
        # one y title, on the first panel: on the others it sat over the previous panel's map
        fig.update_yaxes(title_text="query (attending)" if col == 1 else None, autorange="reversed", row=1, col=col)
    height = 320 + 14 * min(T, 30)
    return finish(fig, title=title, height=height)


def alibi_slopes_figure(slopes: np.ndarray) -> go.Figure:
    """One bar per head: the penalty per token of distance."""
    heads = np.arange(1, len(slopes) + 1)  # heads count from 1, as layers do
    fig = go.Figure(go.Bar(x=heads, y=slopes, text=[f"{s:.3g}" for s in slopes], textposition="outside",
                           hovertemplate="head %{x}<br>slope %{y:.5f} per token of distance<extra></extra>"))
    fig.update_xaxes(title_text="head", tickmode="array", tickvals=heads)
    fig.update_yaxes(title_text="slope (score penalty per token)", type="log")
    return finish(fig, title=f"ALiBi slopes for {len(slopes)} heads: a geometric sequence", height=340)


def rope_arrow_figure(frame: pd.DataFrame, *, pair: int, token: str) -> go.Figure:
    """The chosen pair of a query as an arrow from the origin, one arrow per position.

    The arrows are lines with an arrowhead marker at the tip and the labels are one text trace that
    hovers: an annotation and a label trace per arrow made the browser redraw ~50 ms slower.
    """
    radius = float(np.hypot(frame["x"], frame["y"]).max()) or 1.0
    circle = np.linspace(0, 2 * np.pi, 200)
    fig = go.Figure(go.Scatter(x=radius * np.cos(circle), y=radius * np.sin(circle), mode="lines", hoverinfo="skip",
                               line=dict(color="lightgrey", dash="dot"), showlegend=False))
    for x, y, shade in zip(frame["x"], frame["y"], np.linspace(0, 1, len(frame))):
        colour = f"rgba({int(40 + 200 * shade)}, {int(90 + 40 * (1 - shade))}, {int(200 - 150 * shade)}, 0.9)"
        fig.add_trace(go.Scatter(x=[0.0, x], y=[0.0, y], mode="lines+markers", hoverinfo="skip", showlegend=False,
                                 line=dict(color=colour, width=2),
                                 marker=dict(symbol="arrow", angleref="previous", size=[0, 12], color=colour)))
    fig.add_trace(go.Scatter(x=frame["x"], y=frame["y"], mode="text", text=[f"t={int(p)}" for p in frame["position"]],
                             textposition="top center", showlegend=False,
                             customdata=np.column_stack([frame["position"], frame["angle"]]),
                             hovertemplate="position %{customdata[0]:.0f}<br>angle %{customdata[1]:.3f} rad"
                                           "<br>(%{x:.3f}, %{y:.3f})<extra></extra>"))
    limit = radius * 1.3
    fig.update_xaxes(title_text=f"column {2 * pair}", range=[-limit, limit], zeroline=True)
    fig.update_yaxes(title_text=f"column {2 * pair + 1}", range=[-limit, limit], zeroline=True, scaleanchor="x")
    return finish(fig, title=f"Query of “{safe(token)}”, pair {pair}: same length, turned by position", height=480)


def rope_angle_figure(frame: pd.DataFrame) -> go.Figure:
    """The angle every pair turns per position, log scale."""
    fig = go.Figure(go.Bar(x=frame["pair"], y=frame["radians"], customdata=np.stack([frame["degrees"], frame["wavelength"]], -1),
                           hovertemplate="pair %{x}<br>%{y:.4g} rad = %{customdata[0]:.3g}° per position"
                                         "<br>full turn every %{customdata[1]:,.1f} positions<extra></extra>"))
    fig.update_xaxes(title_text="pair i of the head's columns")
    fig.update_yaxes(title_text="angle per position (radians)", type="log")
    return finish(fig, title="RoPE: angle per position, pair by pair (fast pairs first)", height=340)


def rotation_map_figure(frame: pd.DataFrame, *, label: str) -> go.Figure:
    """One row per layer, one cell per pair of a head: the angle it turns per position (log colour), grey where it
    never turns or the layer rotates nothing (rows: lpos.analysis.attention.rotation_map)."""
    table = frame.pivot(index="layer", columns="pair", values="radians")
    turning = table.to_numpy() > 0
    z = np.where(turning, np.log10(np.where(turning, table.to_numpy(), 1.0)), np.nan)
    said = np.where(turning, np.vectorize(lambda r: f"{r:.3g} rad per position")(table.to_numpy()), "never turns")
    rows = [f"layer {layer + 1}" + ("" if frame[frame["layer"] == layer]["rotates"].iloc[0] else " (no position)")
            for layer in table.index]
    fig = go.Figure(go.Heatmap(
        z=z, x=table.columns, y=rows, colorscale="Viridis", customdata=said, xgap=1, ygap=1,
        colorbar=dict(title=dict(text="log10 radians per position", side="right"), thickness=12),
        hovertemplate="%{y}, pair %{x}: %{customdata}<extra></extra>"))
    fig.update_layout(plot_bgcolor="rgba(127,127,127,0.25)")  # a cell that never turns shows this grey
    fig.update_xaxes(title_text="pair i (columns 2i, 2i+1 of each query and key head)", dtick=1)
    fig.update_yaxes(autorange="reversed")
    return finish(fig, title=f"{safe(label)}: which pairs turn, layer by layer (grey: never)", height=120 + 45 * len(rows))


def offset_scores_figure(frame: pd.DataFrame) -> go.Figure:
    """q·k after rotation against the query position m, one line per fixed offset m − n: flat lines."""
    fig = go.Figure()
    for index, (offset, part) in enumerate(frame.groupby("offset", sort=True)):
        fig.add_trace(go.Scatter(x=part["m"], y=part["score"], mode="lines+markers", name=f"m − n = {offset}",
                                 marker=dict(size=4), line=dict(color=LINE_COLOURS[index % len(LINE_COLOURS)]),
                                 hovertemplate=f"m − n = {offset}<br>m = %{{x}}<br>q·k = %{{y:.6f}}<extra></extra>"))
    fig.update_xaxes(title_text="query position m (key at n = m − offset)")
    fig.update_yaxes(title_text="q·k after rotation")
    return finish(fig, title="After RoPE, q·k depends only on m − n: each offset is a flat line", height=380)
