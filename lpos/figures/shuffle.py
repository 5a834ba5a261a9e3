"""Figures of the order-blindness experiment: how much layer 1 moved per scheme, and the last
position's attention weights before and after the shuffle."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative

from lpos.analysis.shuffle import ORDER_BLIND_TOLERANCE, ShuffleResult, moved_from
from lpos.figures.common import colour_of, finish, safe, subplots
from lpos.tokenizer import GPT2, Tokenizer, visible

LOG_FLOOR = 1e-12  # an exact zero has no place on a log axis; it is drawn here and labelled as zero


def change_figure(table: pd.DataFrame) -> go.Figure:
    """Layer-1 change per scheme on a log axis, with the float-error line: `none` sits below it."""
    changes = table["layer-1 attention output, max |change|"].to_numpy(dtype=float)
    shown = np.maximum(changes, LOG_FLOOR)
    colours = [colour_of(s) for s in table["scheme"]]
    fig = go.Figure(go.Bar(x=list(table["scheme"]), y=shown, marker_color=colours, customdata=changes,
                           text=[f"{c:.1e}" for c in changes], textposition="outside", showlegend=False,
                           hovertemplate="%{x}<br>max |change| %{customdata:.3g}<extra></extra>"))
    fig.add_hline(y=ORDER_BLIND_TOLERANCE, line=dict(color="black", dash="dash"))
    # the line is explained in the legend, under the plot: a label on the plot sits on some bar at some width
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line=dict(color="black", dash="dash"),
                             name=f"{ORDER_BLIND_TOLERANCE:g}: below it, tiny (the table says which moved at all)"))
    fig.update_yaxes(type="log", title_text="max |change| (log scale)", tickformat=".0e", dtick=2,
                     range=[np.log10(shown.min()) - 1.5, np.log10(shown.max()) + 1])
    fig.update_xaxes(tickangle=-45)  # the scheme names, the same slant at every width
    fig.update_layout(showlegend=True, legend=dict(orientation="h", y=-0.35, yanchor="top", x=0))
    return finish(fig, title="Layer-1 output: how far the shuffle moved it", height=420)


def attention_bars(result: ShuffleResult, *, head: int, tokenizer: Tokenizer = GPT2) -> go.Figure:
    """The last position's layer-1 weights over every token, before (top) and after (bottom) the
    shuffle; each token keeps its colour and its label, so a weight that travels with its token is easy to
    see (a byte piece keeps the character it belonged to in the original text, never its new neighbours')."""
    tokens_before = [visible(t) for t in tokenizer.token_strings(result.original)]
    origin = moved_from(result.original, result.shuffled)  # shuffled position -> original position
    tokens_after = [tokens_before[i] for i in origin]
    palette = qualitative.Plotly + qualitative.D3
    colour_before = [palette[i % len(palette)] for i in range(len(tokens_before))]
    colour_after = [colour_before[i] for i in origin]
    fig = subplots(rows=2, cols=1, shared_yaxes=True, vertical_spacing=0.3,
                   subplot_titles=["original order", "earlier tokens shuffled (the last token stays)"])
    panels = [(tokens_before, result.weights_before[head], colour_before, list(range(len(tokens_before)))),
              (tokens_after, result.weights_after[head], colour_after, origin)]
    for row, (tokens, weights, colours, came_from) in enumerate(panels, start=1):
        labels = [f"{p} {safe(t)}" for p, t in enumerate(tokens)]
        hover = [f"{safe(t)}: now at position {p}, originally at {o}" for p, (t, o) in enumerate(zip(tokens, came_from))]
        fig.add_trace(go.Bar(x=labels, y=weights, marker_color=colours, text=[safe(t) for t in tokens],
                             textposition="outside", hovertext=hover, showlegend=False,
                             hovertemplate="%{hovertext}<br>weight %{y:.3f}<extra></extra>"), row=row, col=1)
        fig.update_xaxes(title_text="position and token" if row == 2 else None, type="category", row=row, col=1)
        fig.update_yaxes(title_text="attention weight", row=row, col=1,
                         range=[0, 1.25 * float(max(result.weights_before[head].max(), result.weights_after[head].max()))])
    return finish(fig, title=f"{result.scheme}: layer 1, head {head + 1}, weights of the last token", height=560)


def prediction_bars(result: ShuffleResult) -> go.Figure:
    """The full model's top-5 next tokens before and after the shuffle, side by side."""
    fig = subplots(rows=1, cols=2, horizontal_spacing=0.15,
                   subplot_titles=["original order", "earlier tokens shuffled"])
    for col, top in enumerate((result.top_before, result.top_after), start=1):
        labels = [safe(t) for t in top["token"]]
        fig.add_trace(go.Bar(x=top["probability"], y=labels, orientation="h", showlegend=False,
                             marker_color="#4a6fa5" if col == 1 else "#d62728",
                             hovertemplate="next token %{y}<br>probability %{x:.3f}<extra></extra>"), row=1, col=col)
        fig.update_yaxes(autorange="reversed", type="category", row=1, col=col)
        fig.update_xaxes(title_text="probability of the next token", row=1, col=col)
    return finish(fig, title=f"{result.scheme}: the whole model's top-5 next tokens, before and after", height=360)
