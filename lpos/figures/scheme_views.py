"""Figures that set several schemes side by side by what they do: the bias schemes' lines, one panel
per scheme, a line per head (the Lesson's step on relative positions)."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from lpos.figures.common import finish, safe, subplots
from lpos.figures.sinusoids import LINE_COLOURS


def bias_lines_figure(curves: dict[str, np.ndarray], *, title: str) -> go.Figure:
    """One panel per scheme (keyed by its label), each head's bias (nh, D + 1, distance 0 first)
    against distance as a step line, so a bucketed bias shows its flat runs. Each panel has its own
    y range: a fixed line and a learned bias near zero both stay readable."""
    fig = subplots(rows=1, cols=len(curves), subplot_titles=[safe(label) for label in curves],
                   horizontal_spacing=0.08)
    for col, (label, curve) in enumerate(curves.items(), start=1):
        distance = np.arange(curve.shape[1])
        for head in range(curve.shape[0]):
            fig.add_trace(go.Scatter(x=distance, y=curve[head], mode="lines", line_shape="hv", name=f"head {head + 1}",
                                     legendgroup=f"head {head + 1}", showlegend=col == 1,
                                     line=dict(color=LINE_COLOURS[head % len(LINE_COLOURS)], width=2),
                                     hovertemplate=f"{safe(label)}, head {head + 1}<br>distance %{{x}}<br>bias %{{y:.4f}}"
                                                   "<extra></extra>"), row=1, col=col)
        fig.update_xaxes(title_text="distance i − j", row=1, col=col)
    fig.update_yaxes(title_text="bias added to the score", row=1, col=1)
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.25, x=0))
    return finish(fig, title=title, height=380)
