"""Figures of the embedding layer: token chips and the token + position = sum heatmaps."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lpos.analysis.embeddings import EmbeddingView
from lpos.figures.common import DIVERGING, finish, position_labels, safe, tick_step

CHIPS_PER_ROW = 10
CHIP_LIMIT = 200  # more chips than this is a wall, not a picture; the table has every token
CHIP_TEXT_CHARS = 8  # what fits on a chip at 11 px; the hover has the whole token
CHIP_ROW_PIXELS = 70
CHIP_COLOURS = {"seen": "#dbe9f6", "never": "#f8d7da", "no counts": "#ececec"}
NEVER_SEEN = "never seen in training: this row is still its random initial value"
EMPTY_PANEL_REASONS = {
    "rope": "RoPE adds nothing here:<br>it rotates queries and keys<br>inside attention.",
    "alibi": "ALiBi adds nothing here:<br>it subtracts a distance penalty<br>from attention scores.",
    "none": "No position rows:<br>the model gets no<br>position information.",
}
PANEL_NAMES = ("token rows", "position rows", "summed rows")


def chip_text(token: str) -> str:
    """A token cut to what fits on a chip: "␣elephant" -> "␣elepha…"."""
    return token if len(token) <= CHIP_TEXT_CHARS else token[: CHIP_TEXT_CHARS - 1] + "…"


def short_count(count: int) -> str:
    """Training count in at most six characters: 907×, 2,907×, 38.8k×, 1.2M×."""
    if count < 10_000:
        return f"{count:,}×"
    if count < 1_000_000:
        return f"{count / 1000:.1f}k×"
    return f"{count / 1_000_000:.1f}M×"


def count_sentence(count: int | None) -> str:
    if count is None:
        return "no training counts for this model"
    if count == 0:
        return NEVER_SEEN
    return f"occurs {count:,} times in the training text"


def token_chips(view: EmbeddingView) -> go.Figure:
    """One chip per token: its text (whitespace visible), GPT-2 id and training count.

    Chips are rectangles in data units, so they widen with the page; the token text is cut to
    CHIP_TEXT_CHARS and given whole in the hover. At most CHIP_LIMIT chips are drawn.
    """
    n = len(view.ids)
    shown = min(n, CHIP_LIMIT)
    trained = any(c is not None for c in view.counts)
    rows = max(1, -(-shown // CHIPS_PER_ROW))
    x = [i % CHIPS_PER_ROW for i in range(shown)]
    y = [-(i // CHIPS_PER_ROW) for i in range(shown)]
    text, hover, shapes = [], [], []
    for p in range(shown):
        token, token_id, count = view.tokens[p], view.ids[p], view.counts[p]
        lines = [f"<b>{safe(chip_text(token))}</b>", f"id {token_id}"]
        if count is not None:
            lines.append("never seen" if count == 0 else short_count(count))
        text.append("<br>".join(lines))
        length = f"{len(token)} character" + ("" if len(token) == 1 else "s")
        split = "<br>(part of a character split across tokens)" if "\ufffd" in token else ""
        hover.append(f"position {p}<br>token “{safe(token)}” ({length}){split}<br>id {token_id}<br>{count_sentence(count)}")
        colour = CHIP_COLOURS["no counts" if count is None else "never" if count == 0 else "seen"]
        shapes.append(dict(type="rect", x0=x[p] - 0.45, x1=x[p] + 0.45, y0=y[p] - 0.42, y1=y[p] + 0.42,
                           fillcolor=colour, line=dict(color="#4a6fa5", width=1), layer="below"))
    fig = go.Figure(go.Scatter(x=x, y=y, mode="text", text=text, hovertext=hover, hoverinfo="text",
                               textfont=dict(size=12, color="#1f2a44"), showlegend=False))
    fig.update_layout(shapes=shapes, hovermode="closest")
    fig.update_xaxes(visible=False, range=[-0.5, CHIPS_PER_ROW - 0.5], fixedrange=True)
    fig.update_yaxes(visible=False, range=[-rows + 0.5, 0.5], fixedrange=True)
    cut = f" (the first {shown} of {n})" if shown < n else ""
    legend = ("text (␣ = space), GPT-2 id, occurrences in the training text; red = never seen" if trained else
              "text (␣ = space) and GPT-2 id; no training counts for this model")
    return finish(fig, title=f"{n} tokens{cut}: {legend}", height=70 + CHIP_ROW_PIXELS * rows)


def embedding_heatmaps(view: EmbeddingView, *, scheme: str) -> go.Figure:
    """Token rows, position rows and summed rows side by side, one shared colour scale.

    Rows are positions (labelled "3 ␣the"), columns embedding dimensions. For rope, alibi and
    none the middle panel is empty and says why.
    """
    T, C = view.token_rows.shape
    labels = position_labels(view.tokens)
    panels = dict(zip(PANEL_NAMES, (view.token_rows, view.position_rows, view.summed_rows)))
    limit = max(float(np.abs(rows).max()) for rows in panels.values() if rows is not None) if T else 1.0
    fig = make_subplots(rows=1, cols=3, shared_yaxes=True, horizontal_spacing=0.03,
                        subplot_titles=["token rows", "+ position rows", "= summed rows (input to block 1)"])
    for col, (name, rows) in enumerate(panels.items(), start=1):
        fig.update_xaxes(title_text="embedding dimension", range=[-0.5, C - 0.5], row=1, col=col)
        if rows is None:  # paper coordinates: an axis with no trace has no domain to refer to
            left, right = fig.layout[f"xaxis{col}"].domain
            fig.add_shape(type="rect", xref="paper", yref="paper", x0=left, x1=right, y0=0, y1=1,
                          fillcolor="#f4f4f4", line=dict(width=0), layer="below")
            fig.add_annotation(text=EMPTY_PANEL_REASONS.get(scheme, "nothing added"), xref="paper", yref="paper",
                               x=(left + right) / 2, y=0.5, showarrow=False, font=dict(size=13))
            continue
        fig.add_trace(
            go.Heatmap(z=rows, y=labels, zmin=-limit, zmax=limit, colorscale=DIVERGING, showscale=col == 3,
                       colorbar=dict(title="value"), name=name,
                       hovertemplate=f"{name}<br>position %{{y}}<br>dimension %{{x}}<br>"
                                     "value %{z:.4f}<extra></extra>"),
            row=1, col=col,
        )
    plot_height = min(max(28 * T, 140), 720)  # 28 px a row while it fits, then rows shrink
    step = tick_step(T, pixels=plot_height)
    fig.update_yaxes(autorange="reversed", tickmode="array", tickvals=labels[::step], ticktext=labels[::step],
                     tickfont=dict(size=11 if T <= 40 else 10))
    fig.update_yaxes(title_text="position and token" + (f" (a label every {step} rows)" if step > 1 else ""),
                     row=1, col=1)
    return finish(fig, title=f"Token rows + position rows = summed rows ({scheme}, {T} tokens, {C} dimensions)",
                  height=plot_height + 170)
