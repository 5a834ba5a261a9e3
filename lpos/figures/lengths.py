"""Figures of length extrapolation: loss against evaluation length, loss along one text."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from lpos.analysis.lengths import LossCurve
from lpos.figures.common import finish, safe

SCHEME_COLOURS = {"learned": "#1f77b4", "sinusoidal": "#ff7f0e", "rope": "#2ca02c", "alibi": "#d62728",
                  "none": "#7f7f7f"}
OTHER_COLOUR = "#9467bd"


def length_curves_figure(tables: dict[str, dict[int, dict]], *, train_length: int,
                         unigram: float | None = None) -> go.Figure:
    """Loss against evaluation length, one line per model; a line that stops says why at its wall."""
    fig = go.Figure()
    walls = 0  # annotations of lines that stop, stacked so two at one length do not overlap
    for name, table in tables.items():
        measured = [(length, entry["loss"]) for length, entry in table.items() if entry.get("loss") is not None]
        if not measured:
            continue
        colour = SCHEME_COLOURS.get(name, OTHER_COLOUR)
        lengths, losses = zip(*measured)
        fig.add_trace(go.Scatter(x=lengths, y=losses, mode="lines+markers", name=safe(name), line=dict(color=colour),
                                 hovertemplate=f"{safe(name)}<br>length %{{x}} tokens<br>loss %{{y:.3f}}<extra></extra>"))
        missing = [entry.get("note", "n/a") for length, entry in table.items() if entry.get("loss") is None]
        if missing:
            fig.add_annotation(x=math.log10(lengths[-1]), y=losses[-1], text=f"{safe(name)} stops here:<br>{safe(missing[0])}",
                               showarrow=True, arrowhead=2, ax=80, ay=-90 - 50 * walls, font=dict(color=colour),
                               bgcolor="rgba(255,255,255,0.85)")
            walls += 1
    # on a log axis, annotations are placed in log10 units; traces and shapes take plain lengths
    fig.add_shape(type="line", x0=train_length, x1=train_length, y0=0, y1=1, yref="paper",
                  line=dict(color="black", dash="dash"))
    fig.add_annotation(x=math.log10(train_length), y=1, yref="paper", text=f"training length {train_length}",
                       showarrow=False, xanchor="right", yanchor="top")
    if unigram is not None:
        fig.add_hline(y=unigram, line=dict(color="#999999", dash="dot"),
                      annotation_text=f"unigram baseline {unigram:.2f}", annotation_position="bottom right")
    all_lengths = sorted({length for table in tables.values() for length in table} | {train_length})
    fig.update_xaxes(type="log", title_text="evaluation length (tokens, log scale)", tickvals=all_lengths,
                     ticktext=[str(length) for length in all_lengths],
                     range=[math.log10(all_lengths[0]) - 0.1, math.log10(all_lengths[-1]) + 0.1])
    fig.update_yaxes(title_text="mean next-token loss on held-out stories (nats)")
    return finish(fig, title="Held-out loss against evaluation length (trained at "
                             f"{train_length} tokens)", height=460)


def token_loss_figure(curve: LossCurve, *, tokens: list[str], train_length: int, label: str,
                      baseline: np.ndarray | None = None) -> go.Figure:
    """Per-token loss along the text (faint) and its rolling mean, with the training length and
    a learned table's wall marked. `tokens` are the predicted tokens, one per loss. `baseline`: the
    same tokens' losses read in fresh windows of the training length, drawn as a rolling mean too."""
    positions = np.arange(len(curve.losses))
    hover = [f"predicting {safe(t)} at position {p + 1}" for p, t in zip(positions, tokens)]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=positions, y=curve.losses, mode="lines", name="loss of each token",
                             line=dict(color="#9ecae1", width=1), text=hover,
                             hovertemplate="%{text}<br>loss %{y:.2f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=positions, y=curve.rolling, mode="lines", name=f"mean of the last {curve.window}",
                             line=dict(color="#08519c", width=3),
                             hovertemplate="position %{x}<br>rolling mean %{y:.2f}<extra></extra>"))
    if baseline is not None and len(baseline) > train_length and curve.wall is None:
        drawn = np.arange(train_length, min(len(baseline), len(curve.losses)))
        mean = pd.Series(baseline).rolling(curve.window, min_periods=1).mean().to_numpy()
        fig.add_trace(go.Scatter(x=drawn, y=mean[drawn], mode="lines", line=dict(color="#e6550d", width=2, dash="dot"),
                                 name=f"same tokens, fresh {train_length}-token windows (mean of {curve.window})",
                                 hovertemplate="position %{x}<br>rolling mean in fresh windows %{y:.2f}<extra></extra>"))
    if len(curve.losses) > train_length:
        # the label sits above the plot area (yref paper > 1), so no line crosses it
        fig.add_vline(x=train_length, line=dict(color="black", dash="dash"))
        fig.add_annotation(x=train_length, y=1.0, yref="paper", yanchor="bottom", xanchor="left", showarrow=False,
                           text=f"training length {train_length}")
    if curve.wall is not None:
        fig.add_vline(x=curve.wall, line=dict(color="#d62728", width=3),
                      annotation_text=f"the learned table ends: no row for position {curve.wall}",
                      annotation_position="top left", annotation_font_color="#d62728")
        fig.update_xaxes(range=[0, max(curve.wall * 1.6, curve.wall + 20)])
    fig.update_xaxes(title_text="position in the text (tokens of context read)")
    fig.update_yaxes(title_text="next-token loss (nats)")
    fig.update_layout(legend=dict(orientation="h", y=-0.2))
    return finish(fig, title=f"Loss along the text: {safe(label)}", height=420)
