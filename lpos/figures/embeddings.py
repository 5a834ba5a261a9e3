"""Figures of the embedding layer: token chips and the token + position = sum heatmaps."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lpos.analysis.embeddings import EmbeddingView
from lpos.figures.common import DIVERGING, finish, position_labels, safe

CHIPS_PER_ROW = 10
EMPTY_PANEL_REASONS = {
    "rope": "RoPE adds nothing here:<br>it rotates queries and keys<br>inside attention.",
    "alibi": "ALiBi adds nothing here:<br>it subtracts a distance penalty<br>from attention scores.",
    "none": "No position rows:<br>the model gets no<br>position information.",
}


def token_chips(view: EmbeddingView) -> go.Figure:
    """One chip per token: its text (whitespace visible), GPT-2 id and training count."""
    n = len(view.ids)
    rows = max(1, -(-n // CHIPS_PER_ROW))
    x = [i % CHIPS_PER_ROW for i in range(n)]
    y = [-(i // CHIPS_PER_ROW) for i in range(n)]
    never = [c == 0 for c in view.counts]
    colours = ["#f8d7da" if unseen else "#dbe9f6" for unseen in never]

    def count_line(count: int | None) -> str:
        if count is None:
            return "no training counts"
        return "never seen" if count == 0 else f"seen {count:,}×"

    text = [f"<b>{safe(t)}</b><br>id {i}<br>{count_line(c)}" for t, i, c in zip(view.tokens, view.ids, view.counts)]
    hover = [
        f"position {p}<br>token {safe(t)!s}<br>id {i}<br>"
        + ("never seen in training: this row is still its random initial value" if c == 0 else count_line(c))
        for p, (t, i, c) in enumerate(zip(view.tokens, view.ids, view.counts))
    ]
    fig = go.Figure(
        go.Scatter(x=x, y=y, mode="markers+text", text=text, hovertext=hover, hoverinfo="text",
                   marker=dict(symbol="square", size=78, color=colours, line=dict(color="#4a6fa5", width=1)),
                   textfont=dict(size=12))
    )
    fig.update_xaxes(visible=False, range=[-0.6, CHIPS_PER_ROW - 0.4])
    fig.update_yaxes(visible=False, range=[-rows + 0.4, 0.6])
    return finish(fig, title=f"{n} tokens (GPT-2 ids; red = never seen in training)", height=80 + 95 * rows)


def embedding_heatmaps(view: EmbeddingView, *, scheme: str) -> go.Figure:
    """Token rows, position rows and summed rows side by side, one shared colour scale."""
    labels = position_labels(view.tokens)
    panels = [("token rows", view.token_rows), ("position rows", view.position_rows), ("token + position", view.summed_rows)]
    drawn = [rows for _, rows in panels if rows is not None]
    limit = float(max(np.abs(rows).max() for rows in drawn)) if drawn and drawn[0].size else 1.0
    fig = make_subplots(rows=1, cols=3, shared_yaxes=True, horizontal_spacing=0.03,
                        subplot_titles=[f"{name}" for name, _ in panels[:2]] + ["= summed rows (input to block 1)"])
    for col, (name, rows) in enumerate(panels, start=1):
        if rows is None:
            fig.add_annotation(text=EMPTY_PANEL_REASONS.get(scheme, "nothing added"), xref=f"x{col} domain",
                               yref=f"y{col} domain", x=0.5, y=0.5, showarrow=False, font=dict(size=13))
            fig.add_trace(go.Heatmap(z=np.zeros_like(view.token_rows), y=labels, showscale=False, hoverinfo="skip",
                                     colorscale=[[0, "#f4f4f4"], [1, "#f4f4f4"]]), row=1, col=col)
            continue
        fig.add_trace(
            go.Heatmap(z=rows, y=labels, zmin=-limit, zmax=limit, colorscale=DIVERGING, showscale=col == 3,
                       colorbar=dict(title="value"), name=name,
                       hovertemplate=f"{name}<br>%{{y}}<br>dimension %{{x}}<br>value %{{z:.4f}}<extra></extra>"),
            row=1, col=col,
        )
        fig.update_xaxes(title_text="embedding dimension", row=1, col=col)
    fig.update_yaxes(autorange="reversed", title_text="position and token", row=1, col=1)
    height = 220 + 22 * min(len(labels), 40)
    return finish(fig, title="Token row + position row = what the model reads", height=height)
