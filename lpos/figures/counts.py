"""Figures of contextual positions (CoPE): every earlier token's position as the last token counts
it (tokens × heads), and each head's running count along the text beside plain counts of tokens,
words and sentences."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from lpos.analysis.counts import ContextualCounts
from lpos.figures.common import SEQUENTIAL, finish, position_labels, safe
from lpos.figures.sinusoids import LINE_COLOURS

REFERENCE_DASHES = {"tokens": "dot", "words": "dash", "sentences": "dashdot"}


def count_heatmap(counts: ContextualCounts, *, tokens: list[str]) -> go.Figure:
    """Rows = heads, columns = tokens: key j's contextual position seen from the last token."""
    nh = counts.from_last.shape[0]
    heads = [f"head {h + 1}" for h in range(nh)]
    fig = go.Figure(go.Heatmap(z=counts.from_last, x=position_labels(tokens), y=heads, colorscale=SEQUENTIAL,
                               zmin=0.0, zmax=max(float(counts.from_last.max()), 1.0), colorbar=dict(title="count"),
                               hovertemplate="key %{x}<br>%{y}<br>position %{z:.2f}<extra></extra>"))
    fig.update_xaxes(title_text="key (earlier token)")
    fig.update_yaxes(title_text="head", autorange="reversed")
    last = safe(tokens[-1]) if tokens else ""
    return finish(fig, title=f"Each token's position as the last token “{last}” counts it (layer {counts.layer + 1})",
                  height=200 + 40 * nh)


def running_count_figure(counts: ContextualCounts, *, tokens: list[str], references: dict[str, np.ndarray]) -> go.Figure:
    """One line per head: the count of the whole text up to each token, as that token's query counts
    it; grey lines: how many tokens, words and sentences have begun or ended by then."""
    x = np.arange(len(tokens))
    labels = [safe(t) for t in tokens]
    fig = go.Figure()
    for head, running in enumerate(counts.running):
        fig.add_trace(go.Scatter(x=x, y=running, mode="lines+markers", name=f"head {head + 1}", customdata=labels,
                                 marker=dict(size=4), line=dict(color=LINE_COLOURS[head % len(LINE_COLOURS)]),
                                 hovertemplate=f"head {head + 1}<br>token %{{x}} “%{{customdata}}”<br>count %{{y:.2f}}"
                                               "<extra></extra>"))
    for unit, values in references.items():
        fig.add_trace(go.Scatter(x=x, y=values, mode="lines", name=f"{unit} so far", customdata=labels,
                                 line=dict(color="#7f7f7f", dash=REFERENCE_DASHES.get(unit, "dot"), width=1.5),
                                 hovertemplate=f"token %{{x}} “%{{customdata}}”<br>{unit} so far %{{y:.0f}}"
                                               "<extra></extra>"))
    fig.update_xaxes(title_text="token (the query that counts)")
    fig.update_yaxes(title_text="count from the first token")
    return finish(fig, title=f"How far each head has counted along the text (layer {counts.layer + 1})", height=400)
