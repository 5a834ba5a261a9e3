"""Figures of the sinusoidal table: the table itself, its frequency bands, their wavelengths, and
the dot product of two rows against their distance."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from lpos.analysis.sinusoids import TableView
from lpos.figures.common import DIVERGING, finish

LINE_COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]


def block_note(row_block: int, column_block: int) -> str:
    """'' at full resolution, else what one cell stands for."""
    if row_block == column_block == 1:
        return ""
    return (f" (each cell averages {row_block} position{'s' if row_block != 1 else ''} × {column_block} "
            f"column{'s' if column_block != 1 else ''})")


def table_heatmap(view: TableView, *, title: str, highlight_rows: int | None = None) -> go.Figure:
    """The table with positions down and columns across; optionally a box around the first rows."""
    rows = np.arange(0, view.length, view.row_block)
    columns = np.arange(0, view.width, view.column_block)
    full = view.row_block == view.column_block == 1
    hover = ("position %{y}<br>column %{x}<br>value %{z:.4f}" if full else
             f"positions from %{{y}} (+{view.row_block})<br>columns from %{{x}} (+{view.column_block})"
             "<br>mean value %{z:.4f}")
    fig = go.Figure(go.Heatmap(z=view.values, x=columns, y=rows, zmin=-1, zmax=1, colorscale=DIVERGING,
                               colorbar=dict(title="value"), hovertemplate=hover + "<extra></extra>"))
    fig.update_xaxes(title_text="column (pair i = columns 2i, 2i+1)")
    fig.update_yaxes(title_text="position", autorange="reversed")
    if highlight_rows is not None:
        fig.add_shape(type="rect", xref="x domain", x0=0, x1=1, yref="y", y0=-0.5, y1=highlight_rows - 0.5,
                      line=dict(color="black", width=3), fillcolor="rgba(0,0,0,0)")
        boxed = "position 0" if highlight_rows == 1 else f"positions 0–{highlight_rows - 1}"
        fig.add_annotation(text=f"your sentence: {boxed}", xref="x domain", x=1.0,
                           y=highlight_rows - 0.5, yanchor="top", xanchor="right", showarrow=False,
                           bgcolor="white", font=dict(size=12))
    height = 300 + 3 * min(len(rows), 120)
    return finish(fig, title=title + block_note(view.row_block, view.column_block), height=height)


def band_figure(bands: pd.DataFrame) -> go.Figure:
    """The sin (solid) and cos (dotted) columns of each chosen pair against position."""
    fig = go.Figure()
    for index, (pair, frame) in enumerate(bands.groupby("pair", sort=True)):
        colour = LINE_COLOURS[index % len(LINE_COLOURS)]
        for part, dash in (("sin", "solid"), ("cos", "dot")):
            part_frame = frame[frame["part"] == part]
            column = int(part_frame["column"].iloc[0])
            fig.add_trace(go.Scatter(
                x=part_frame["position"], y=part_frame["value"], mode="lines", name=f"pair {pair} {part} (column {column})",
                line=dict(color=colour, dash=dash),
                hovertemplate=f"pair {pair} {part}<br>position %{{x}}<br>value %{{y:.4f}}<extra></extra>"))
    fig.update_xaxes(title_text="position t")
    fig.update_yaxes(title_text="value", range=[-1.1, 1.1])
    return finish(fig, title="Frequency bands: low pairs turn fast, high pairs slowly", height=380)


def wavelength_figure(frame: pd.DataFrame, *, base: float) -> go.Figure:
    """Wavelength (positions per full turn) of every pair, log scale, with 2π and 2π·base marked."""
    fig = go.Figure(go.Scatter(
        x=frame["pair"], y=frame["wavelength"], mode="markers+lines", name="wavelength",
        customdata=np.stack([frame["frequency"], frame["columns"]], axis=-1),
        hovertemplate="pair %{x} (columns %{customdata[1]})<br>wavelength %{y:,.1f} positions"
                      "<br>%{customdata[0]:.3g} radians per position<extra></extra>"))
    for value, text in ((2 * math.pi, "2π ≈ 6.28"), (2 * math.pi * base, f"2π·base ≈ {2 * math.pi * base:,.0f}")):
        fig.add_hline(y=value, line=dict(color="grey", dash="dash"), annotation_text=text,
                      annotation_position="bottom right" if value < 10 else "top left")
    fig.update_xaxes(title_text="pair i")
    fig.update_yaxes(title_text="wavelength (positions per turn)", type="log")
    slowest = float(frame["wavelength"].max()) if len(frame) else 2 * math.pi
    return finish(fig, title=f"Wavelength of every pair: from 2π to {slowest:,.0f} ({slowest / (2 * math.pi * base):.0%} "
                             "of 2π·base), evenly on a log scale", height=380)


def offset_dot_figure(frame: pd.DataFrame) -> go.Figure:
    """Dot product of rows t and t+k against k, one line per start t: the lines coincide."""
    fig = go.Figure()
    dashes = ["solid", "dash", "dot", "dashdot"]
    for index, (start, part) in enumerate(frame.groupby("start", sort=True)):
        fig.add_trace(go.Scatter(
            x=part["offset"], y=part["dot"], mode="lines", name=f"t = {start}",
            line=dict(color=LINE_COLOURS[index % len(LINE_COLOURS)], dash=dashes[index % len(dashes)], width=3 - index % 3 * 0.7),
            hovertemplate=f"t = {start}<br>k = %{{x}}<br>row t · row t+k = %{{y:.4f}}<extra></extra>"))
    fig.update_xaxes(title_text="distance k")
    fig.update_yaxes(title_text="row t · row t+k")
    return finish(fig, title="Only the distance matters: the same curve whatever t is", height=380)
