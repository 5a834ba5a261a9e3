"""Figures of the learned table's second limit: how far each row moved from its step-0 row, and
the loss at each position of a window longer than the training windows, with the first row that
never trained marked."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from lpos.analysis.coverage import RowDrift
from lpos.figures.common import colour_of, finish, safe, subplots

TRAINED, UNTRAINED = "#1f77b4", "#d62728"


def _mark_limit(fig: go.Figure, limit: int, *, last: int, **where) -> None:
    fig.add_vrect(x0=limit - 0.5, x1=last + 0.5, fillcolor=UNTRAINED, opacity=0.07, line_width=0, **where)
    fig.add_vline(x=limit - 0.5, line=dict(color=UNTRAINED, dash="dash"), **where)


def row_drift_figure(drift: RowDrift, *, label: str, upto: int | None = None) -> go.Figure:
    """Per row (the first `upto`): cosine with its step-0 row (top) and its length over its step-0
    length (bottom); trained rows blue, never-trained rows red, the limit shaded."""
    rows = drift.rows if upto is None else drift.rows[drift.rows.position < upto]
    fig = subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                   subplot_titles=("cosine with its step-0 row", "length ÷ step-0 length (log scale)"))
    for trained, colour, name in ((True, TRAINED, "rows read in training"), (False, UNTRAINED, "rows never read")):
        part = rows[rows.trained == trained]
        if part.empty:
            continue
        for row, column, value in ((1, "cosine", "cosine %{y:.4f}"), (2, "norm_ratio", "×%{y:.4f}")):
            fig.add_trace(go.Scatter(x=part.position, y=part[column], mode="markers", name=name, legendgroup=name,
                                     showlegend=row == 1, marker=dict(color=colour, size=6),
                                     hovertemplate=f"row %{{x}}<br>{value}<extra></extra>"), row=row, col=1)
    if rows.position.max() >= drift.trained_rows:
        for row in (1, 2):
            _mark_limit(fig, drift.trained_rows, last=int(rows.position.max()), row=row, col=1)
    fig.add_hline(y=1.0, line=dict(color="#999999", dash="dot"), row=2, col=1)
    fig.update_yaxes(type="log", tickvals=[0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100], row=2, col=1)  # ×0.8 (decayed) and ×30 (trained) both readable
    fig.update_xaxes(title_text="position (row of the table)", row=2, col=1)
    fig.update_layout(legend=dict(orientation="h", y=-0.18))
    return finish(fig, title=f"{safe(label)}: each row against step 0", height=520)


def position_loss_figure(losses: dict[str, np.ndarray], *, limit: int, window: int) -> go.Figure:
    """Mean loss at each position of `window`-token windows, one line per model; positions from
    `limit` on (rows one model never trained) shaded."""
    fig = go.Figure()
    for name, curve in losses.items():
        colour = colour_of(name)
        fig.add_trace(go.Scatter(x=np.arange(len(curve)), y=curve, mode="lines", name=safe(name),
                                 line=dict(color=colour, width=2),
                                 hovertemplate=f"{safe(name)}<br>position %{{x}}<br>mean loss %{{y:.3f}}<extra></extra>"))
    last = max(len(curve) for curve in losses.values()) - 1
    _mark_limit(fig, limit, last=last)
    # above the plot area (yref paper > 1), so no line crosses the label
    fig.add_annotation(x=limit - 0.5, y=1, yref="paper", text=f"rows {limit}+ never trained", showarrow=False,
                       xanchor="left", yanchor="bottom", font=dict(color=UNTRAINED))
    fig.update_xaxes(title_text="position in the window (the row read last)", range=[-1, last + 1])
    fig.update_yaxes(title_text="mean next-token loss (nats)")
    fig.update_layout(legend=dict(orientation="h", y=-0.2))
    return finish(fig, title=f"Loss at each position of {window}-token windows", height=420)
