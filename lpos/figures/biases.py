"""Figures of the bias schemes (ALiBi, T5, FIRE): each head's bias against distance, one panel per
head on one distance axis, ALiBi's fixed lines dashed beside a learned bias."""
from __future__ import annotations

import math

import plotly.graph_objects as go

from lpos.analysis.biases import MAX_DISTANCE, BiasCurves
from lpos.analysis.counts import listed
from lpos.figures.common import finish, safe, subplots
from lpos.figures.sinusoids import LINE_COLOURS

PANELS_PER_ROW = 4
ALIBI_LINE = dict(color="#7f7f7f", dash="dash", width=1.5)


def bias_curves_figure(curves: BiasCurves, *, label: str, colour: str) -> go.Figure:
    """One panel per head: the model's bias against distance (a step per distance, so T5's buckets
    show as flat runs), one line per group of query positions that get the same line, and ALiBi's line
    for the same head dashed unless the bias is ALiBi's. The y range is the model's own bias: an
    ALiBi line steeper than it leaves the panel."""
    nh = curves.heads
    cols = min(nh, PANELS_PER_ROW)
    rows = math.ceil(nh / cols)
    fig = subplots(rows=rows, cols=cols, shared_yaxes=True, horizontal_spacing=0.03,
                   vertical_spacing=0.18 / rows, subplot_titles=[f"head {h + 1}" for h in range(nh)])
    frame = curves.frame
    groups = curves.same_line
    for head in range(nh):
        row, col = head // cols + 1, head % cols + 1
        for index, group in enumerate(groups):  # one line per group of query positions that get the same one
            part = frame[(frame["head"] == head) & (frame["query"] == max(group))]
            name = (safe(label) if len(groups) == 1 else
                    f"quer{'y' if len(group) == 1 else 'ies'} at {listed([str(q) for q in group])}")
            line_colour = colour if len(groups) == 1 else LINE_COLOURS[index % len(LINE_COLOURS)]
            fig.add_trace(go.Scatter(x=part["distance"], y=part["bias"], mode="lines", line_shape="hv", name=name,
                                     legendgroup=name, showlegend=head == 0, line=dict(color=line_colour, width=2),
                                     hovertemplate=f"head {head + 1}, {name}<br>distance %{{x}}<br>bias %{{y:.4f}}"
                                                   "<extra></extra>"), row=row, col=col)
        if not curves.is_alibi:
            part = curves.alibi[curves.alibi["head"] == head]
            fig.add_trace(go.Scatter(x=part["distance"], y=part["bias"], mode="lines", name="ALiBi's line (fixed)",
                                     legendgroup="comparison", showlegend=head == 0, line=ALIBI_LINE,
                                     hovertemplate=f"ALiBi, head {head + 1}<br>distance %{{x}}<br>bias %{{y:.4f}}"
                                                   "<extra></extra>"), row=row, col=col)
        fig.update_xaxes(title_text="distance i − j" if row == rows else None, range=[0, MAX_DISTANCE],
                         row=row, col=col)
    low, high = float(frame["bias"].min()), float(frame["bias"].max())
    pad = max(0.1 * (high - low), 0.05)
    fig.update_yaxes(range=[low - pad, high + pad])
    for row in range(1, rows + 1):
        fig.update_yaxes(title_text="bias added to the score", row=row, col=1)
    where = "the same in every layer" if curves.same_in_every_layer else f"layer {curves.layer + 1}"
    title = f"{safe(label)}: each head's bias against distance ({where})"
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.12 / rows * 2, x=0))
    return finish(fig, title=title, height=120 + 260 * rows)
