"""The Lab page's figures: a run's curves while it trains, the scheme's own picture, and the session's
length-generalization chart (accuracy by evaluation length, one line per run, each length a scheme cannot read
marked as such rather than given a number)."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from lpos.analysis.lab import accuracies, run_label
from lpos.figures.common import DIVERGING, colour_of, finish, safe, subplots
from lpos.figures.sinusoids import LINE_COLOURS


def curves_figure(curve: list[dict], *, title: str) -> go.Figure:
    """Loss and accuracy on the training batches against the step, side by side."""
    steps = [point["step"] for point in curve]
    fig = subplots(rows=1, cols=2, subplot_titles=["loss", "accuracy"],
                   horizontal_spacing=0.12)
    fig.add_trace(go.Scatter(x=steps, y=[p["loss"] for p in curve], mode="lines", name="loss",
                             hovertemplate="step %{x}<br>loss %{y:.3f}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Scatter(x=steps, y=[p["accuracy"] for p in curve], mode="lines", name="accuracy",
                             hovertemplate="step %{x}<br>accuracy %{y:.1%}<extra></extra>"), row=1, col=2)
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(range=[0, 1.02], tickformat=".0%", row=1, col=2)
    fig.update_layout(showlegend=False)
    return finish(fig, title=title, height=300)


def picture_figure(picture: dict) -> go.Figure:
    """The scheme's picture (lpos.lab.measure.Picture as plain data): a map of position rows' cosines or of
    attention weights, or each head's bias against distance."""
    values = np.asarray(picture["values"], dtype=np.float32)
    if picture["kind"] == "bias":
        fig = go.Figure([go.Scatter(x=np.arange(values.shape[1]), y=values[head], mode="lines", name=f"head {head + 1}",
                                    line=dict(color=LINE_COLOURS[head % len(LINE_COLOURS)]),
                                    hovertemplate=f"head {head + 1}<br>distance %{{x}}<br>bias %{{y:.3f}}<extra></extra>")
                         for head in range(values.shape[0])])
        fig.update_xaxes(title_text="distance i − j")
        fig.update_yaxes(title_text="bias added to the score")
    else:
        rows = picture["kind"] == "rows"
        fig = go.Figure(go.Heatmap(z=values, colorscale=DIVERGING if rows else "Blues", zmid=0 if rows else None,
                                   zmin=-1 if rows else 0, zmax=1,
                                   hovertemplate=("row %{y} · row %{x}<br>cosine %{z:.2f}" if rows else
                                                  "query %{y} · key %{x}<br>weight %{z:.2f}") + "<extra></extra>"))
        fig.update_yaxes(autorange="reversed", title_text="position" if rows else "query position")
        fig.update_xaxes(title_text="position" if rows else "key position")
    return finish(fig, title=safe(picture["title"]), height=340)


def lengths_figure(runs: list[dict], *, task: str, whose: str = "your runs") -> go.Figure:
    """Accuracy by evaluation length, a line per run; a length a run cannot read is an ✕ on the axis with
    "cannot read" in its hover text; a dotted line marks each window."""
    fig = go.Figure()
    for run in runs:
        found, name, colour = accuracies(run), run_label(run), colour_of(run["scheme"])
        lengths = sorted(found)
        fig.add_trace(go.Scatter(x=lengths, y=[found[k] for k in lengths], mode="lines+markers", name=safe(name),
                                 line=dict(color=colour), legendgroup=name,
                                 hovertemplate=f"{safe(name)}<br>%{{x}} tokens: %{{y:.1%}}<extra></extra>"))
        unread = [k for k in lengths if found[k] is None]
        if unread:
            fig.add_trace(go.Scatter(x=unread, y=[0] * len(unread), mode="markers", legendgroup=name, showlegend=False,
                                     marker=dict(symbol="x", size=11, color=colour),
                                     hovertemplate=f"{safe(name)}<br>%{{x}} tokens: cannot read past its table"
                                                   "<extra></extra>"))
    for window in sorted({run["window"] for run in runs}):
        fig.add_vline(x=window, line=dict(dash="dot", color="#888"), annotation_text=f"window {window}")
    fig.update_xaxes(title_text="evaluation length (tokens)")
    fig.update_yaxes(title_text="accuracy", range=[0, 1.05], tickformat=".0%")
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.25, x=0))
    return finish(fig, title=f"Accuracy by evaluation length on {safe(task)}: {whose} (✕: cannot read that far)",
                  height=420)
