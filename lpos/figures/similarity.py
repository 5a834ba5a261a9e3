"""Figures of similarity: cosine maps side by side, the rope kernel against distance, and the
PCA path of the position rows."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from lpos.analysis.similarity import Projection, SimilarityMap
from lpos.figures.common import DIVERGING, SEQUENTIAL, finish, position_labels, subplots


def similarity_heatmaps(maps: list[SimilarityMap], *, axis_title: str, tokens: list[str] | None = None) -> go.Figure:
    """One cosine map per panel, shared colour scale -1..1. At full resolution `tokens` label the axes;
    a block-averaged map says so in its panel title and hover."""
    fig = subplots(rows=1, cols=len(maps), horizontal_spacing=0.08,
                   subplot_titles=[m.title + (f" — {m.block}×{m.block} blocks averaged" if m.block > 1 else "")
                                   for m in maps])
    for col, similarity in enumerate(maps, start=1):
        if similarity.block == 1:
            axis = position_labels(tokens) if tokens is not None else np.arange(similarity.size)
            hover = "%{y}<br>%{x}<br>cosine %{z:.4f}"
        else:
            axis = np.arange(0, similarity.size, similarity.block)
            hover = f"from %{{y}} and %{{x}} (blocks of {similarity.block})<br>mean cosine %{{z:.4f}}"
        fig.add_trace(go.Heatmap(z=similarity.values, x=axis, y=axis, zmin=-1, zmax=1, colorscale=DIVERGING,
                                 showscale=col == len(maps), colorbar=dict(title="cosine"),
                                 hovertemplate=hover + "<extra></extra>"), row=1, col=col)
        # constrain="domain": a square map shrinks its panel, never pads its axes past the data (-200..300)
        fig.update_xaxes(title_text=axis_title, constrain="domain", row=1, col=col)
        fig.update_yaxes(title_text=axis_title, autorange="reversed", scaleanchor=f"x{col if col > 1 else ''}",
                         constrain="domain", row=1, col=col)
    side = 560 if len(maps) == 1 else 520
    return finish(fig, title=f"Cosine similarity, {axis_title} × {axis_title}", height=side)


def similarity_panels(maps: list[SimilarityMap], *, axis_title: str) -> list[go.Figure]:
    """similarity_heatmaps as one figure per map, each titled by its map, for a page to set in
    columns that a phone stacks (two maps in one figure cannot reflow; at 400 px their titles overprint)."""
    figures = []
    for similarity in maps:
        fig = similarity_heatmaps([similarity], axis_title=axis_title)
        title = fig.layout.annotations[0].text  # the panel's own title, block note included
        fig.layout.annotations = ()
        figures.append(finish(fig, title=title, height=520))
    return figures


def kernel_line_figure(kernel: pd.DataFrame, *, head_dim: int) -> go.Figure:
    """The rope kernel against distance: mean_i cos(k w_i), 1 at distance 0 (what it does after
    that depends on the head size and base: lpos.analysis.similarity.rope_kernel_sentence says it)."""
    fig = go.Figure(go.Scatter(x=kernel["offset"], y=kernel["similarity"], mode="lines", name="kernel",
                               hovertemplate="m − n = %{x}<br>mean cos %{y:.4f}<extra></extra>"))
    fig.update_xaxes(title_text="distance m − n")
    fig.update_yaxes(title_text="mean of cos(k·ωᵢ) over pairs", range=[-1.05, 1.05])
    return finish(fig, title=f"RoPE kernel for a head of {head_dim} columns: a function of distance only", height=340)


def pca_figure(projection: Projection, *, dimensions: int, title: str) -> go.Figure:
    """Position rows on their first principal components, joined in order and coloured by position."""
    n, k = projection.coordinates.shape
    if k < dimensions:
        raise ValueError(f"{dimensions}-D needs {dimensions} components; only {k} are available")
    positions = np.arange(n)
    c = projection.coordinates
    share = [f"PC{i + 1} ({projection.explained[i]:.0%})" for i in range(dimensions)]
    marker = dict(color=positions, colorscale=SEQUENTIAL, size=5 if dimensions == 3 else 7,
                  colorbar=dict(title="position"))
    line = dict(color="rgba(120,120,120,0.5)", width=2)
    hover = "position %{marker.color}<extra></extra>"
    if dimensions == 2:
        trace = go.Scatter(x=c[:, 0], y=c[:, 1], mode="markers+lines", marker=marker, line=line, hovertemplate=hover)
    else:
        trace = go.Scatter3d(x=c[:, 0], y=c[:, 1], z=c[:, 2], mode="markers+lines", marker=marker, line=line,
                             hovertemplate=hover)
    fig = go.Figure(trace)
    if dimensions == 2:
        fig.update_xaxes(title_text=share[0])
        fig.update_yaxes(title_text=share[1])
    else:
        fig.update_layout(scene=dict(xaxis_title=share[0], yaxis_title=share[1], zaxis_title=share[2]))
    return finish(fig, title=title, height=480)
