"""Figures of length extrapolation: loss against evaluation length, loss along one text."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from lpos.analysis.lengths import LossCurve
from lpos.figures.common import colour_of, finish, safe



def length_curves_figure(tables: dict[str, dict[int, dict]], *, train_length: int,
                         unigram: float | None = None) -> go.Figure:
    """Loss against evaluation length, one line per model; a line that stops ends in an × and says why in
    its legend entry, and the unigram baseline is a legend entry too, so no label sits on the lines."""
    fig = go.Figure()
    # every label is a legend entry or sits above the plot area, so no line crosses a label
    for name, table in tables.items():
        measured = [(length, entry["loss"]) for length, entry in table.items() if entry.get("loss") is not None]
        if not measured:
            continue
        colour = colour_of(name)
        lengths, losses = zip(*measured)
        missing = [entry.get("note", "n/a") for length, entry in table.items() if entry.get("loss") is None]
        label = safe(name) + (f": stops at {lengths[-1]}, {safe(missing[0].removeprefix('n/a: '))}" if missing else "")
        fig.add_trace(go.Scatter(x=lengths, y=losses, mode="lines+markers", name=label, line=dict(color=colour),
                                 marker=dict(symbol=["circle"] * (len(lengths) - 1) + ["x" if missing else "circle"],
                                             size=[6] * (len(lengths) - 1) + [11 if missing else 6]),
                                 hovertemplate=f"{safe(name)}<br>length %{{x}} tokens<br>loss %{{y:.3f}}<extra></extra>"))
    # on a log axis, annotations are placed in log10 units; traces and shapes take plain lengths
    fig.add_shape(type="line", x0=train_length, x1=train_length, y0=0, y1=1, yref="paper", layer="below",
                  line=dict(color="black", dash="dash"))  # below the lines: an × at the training length stays seen
    fig.add_annotation(x=math.log10(train_length), y=1, yref="paper", text=f"training length {train_length}",
                       showarrow=False, xanchor="center", yanchor="bottom")
    all_lengths = sorted({length for table in tables.values() for length in table} | {train_length})
    losses = [entry["loss"] for table in tables.values() for entry in table.values() if entry.get("loss") is not None]
    above = False  # a baseline far above the curves would squeeze them into a strip: the axis spans the curves then
    if losses:
        low, high = min(losses), max(losses)
        pad = max(high - low, 0.1) * 0.08
        above = unigram is not None and unigram > high + (high - low) / 2 + pad
        fig.update_yaxes(range=[low - pad, (high if unigram is None or above else max(high, unigram)) + pad])
    if unigram is not None:
        fig.add_trace(go.Scatter(x=[all_lengths[0], all_lengths[-1]], y=[unigram, unigram], mode="lines",
                                 name=f"unigram baseline {unigram:.2f}: word frequencies alone"
                                      + (" (above the plotted range)" if above else ""),
                                 line=dict(color="#999999", dash="dot"), hoverinfo="skip"))
    fig.update_xaxes(type="log", title_text="evaluation length (tokens, log scale)", tickvals=all_lengths,
                     ticktext=[str(length) for length in all_lengths],
                     range=[math.log10(all_lengths[0]) - 0.1, math.log10(all_lengths[-1]) + 0.1])
    fig.update_yaxes(title_text="mean loss on held-out stories (nats)")
    fig.update_layout(legend=dict(orientation="h", y=-0.2, yanchor="top"))
    return finish(fig, title="Loss by evaluation length", height=520)  # the training length is marked on the plot


def token_loss_figure(curve: LossCurve, *, tokens: list[str], train_length: int, label: str,
                      baseline: np.ndarray | None = None) -> go.Figure:
    """Per-token loss along the text (faint) and its rolling mean, with the training length and
    a learned table's wall marked. `tokens` are the predicted tokens, one per loss. `baseline`: the
    same tokens' losses each read with a sliding window of the training length (the tokens before it,
    never a position past the training length), drawn as a rolling mean too."""
    positions = np.arange(len(curve.losses))
    hover = [f"predicting {safe(t)} at position {p + 1}" for p, t in zip(positions, tokens)]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=positions, y=curve.losses, mode="lines", name="loss of each token",
                             line=dict(color="#9ecae1", width=1), text=hover,
                             hovertemplate="%{text}<br>loss %{y:.2f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=positions, y=curve.rolling, mode="lines", name=f"mean of the last {curve.window}",
                             line=dict(color="#08519c", width=3),
                             hovertemplate="position %{x}<br>rolling mean %{y:.2f}<extra></extra>"))
    # drawn wherever the curve goes past the training length, a learned table's wall included (learned-32 trains
    # on 32-token windows of its 128 rows): the caption and the reading compare the two lines there
    if baseline is not None and min(len(baseline), len(curve.losses)) > train_length:
        drawn = np.arange(train_length, min(len(baseline), len(curve.losses)))
        mean = pd.Series(baseline).rolling(curve.window, min_periods=1).mean().to_numpy()
        fig.add_trace(go.Scatter(x=drawn, y=mean[drawn], mode="lines", line=dict(color="#e6550d", width=2, dash="dot"),
                                 name=f"sliding {train_length}-token window: the same tokens, each read with only the "
                                      f"{train_length - 1} before it (mean of {curve.window})",
                                 hovertemplate=f"position %{{x}}<br>rolling mean, {train_length}-token sliding window "
                                               "%{y:.2f}<extra></extra>"))
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
