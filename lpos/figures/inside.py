"""Figures of the Inside the model page: probe scores across layers, head grids, distance
profiles, and the streaming test with and without the first tokens kept."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from lpos.analysis.heads import BEHAVIOURS, SHARES, HeadPortraits
from lpos.analysis.streaming import NOISE_ERRORS, SinkTest
from lpos.figures.common import colour_of, finish, safe, subplots

TARGETS = ("absolute position", "tokens since sentence end")
BEHAVIOUR_COLOURS = {"first token (sink)": "#d62728", "previous token": "#1f77b4", "itself": "#2ca02c",
                     "local": "#ff7f0e", "broad": "#c7c7c7"}


def _colour(name: str) -> str:
    return colour_of(name)


def probe_figure(panels: dict[str, dict[str, pd.DataFrame]], *,
                 title: str = "How well a linear probe reads position from each layer") -> go.Figure:
    """R² of both probes across streams: a column per panel ("trained", "untrained"), a row per
    target, a line per model. `panels` maps a column title to {line name: position_probes frame}."""
    titles = [f"{target}: {safe(panel)}" for target in TARGETS for panel in panels]
    fig = subplots(rows=len(TARGETS), cols=len(panels), subplot_titles=titles, shared_yaxes=True,
                   vertical_spacing=0.16, horizontal_spacing=0.05)
    shown = set()
    for col, frames in enumerate(panels.values(), start=1):
        for name, frame in frames.items():
            scheme = name.split(" ")[0]
            for row, target in enumerate(TARGETS, start=1):
                part = frame[frame.target == target]
                fig.add_trace(go.Scatter(
                    x=part["stream name"], y=part["r2"], mode="lines+markers", name=safe(name), legendgroup=name,
                    showlegend=name not in shown, line=dict(color=_colour(scheme), dash="dash" if scheme != name else None),
                    customdata=np.stack([part["mae"], part["penalty"], part["scored"]], axis=1),
                    hovertemplate=(f"{safe(name)} · %{{x}}<br>R² %{{y:.3f}}<br>mean error %{{customdata[0]:.1f}} tokens"
                                   "<br>penalty %{customdata[1]:.0e} × mean eigenvalue<br>%{customdata[2]} tokens "
                                   "scored<extra></extra>")), row=row, col=col)
                shown.add(name)
    lowest = min([-0.1] + [float(f["r2"].min()) - 0.05 for frames in panels.values() for f in frames.values()
                           if f["r2"].notna().any()])
    fig.update_yaxes(range=[lowest, 1.05])
    fig.update_yaxes(title_text="R² on unseen windows", col=1)
    fig.update_xaxes(title_text="residual stream", row=len(TARGETS))
    # the legend sits at the figure's foot, below the axis title: deep models' slanted stream names
    # push the title down, and a legend placed in the plot's own coordinates then covered it
    fig.update_layout(legend=dict(orientation="h", yref="container", y=0.0, yanchor="bottom"))
    finish(fig, title=title, height=680)
    fig.update_layout(margin=dict(b=170))
    return fig


def probe_figures(panels: dict[str, dict[str, pd.DataFrame]]) -> list[go.Figure]:
    """probe_figure as one figure per panel ("trained", "untrained"), both targets stacked in each,
    for a page to set in columns that a phone stacks: two panels side by side in one figure cannot
    reflow, and at 400 px their titles overprint."""
    return [probe_figure({name: frames}, title=f"Probe R², {safe(name)} models") for name, frames in panels.items()]


def head_grid_figure(portraits: dict[str, HeadPortraits]) -> go.Figure:
    """One layer × head grid per model, each cell coloured by the behaviour the head is named after."""
    fig = subplots(rows=1, cols=len(portraits), subplot_titles=[safe(n) for n in portraits],
                   horizontal_spacing=0.03)
    codes = {b: i for i, b in enumerate(BEHAVIOURS)}
    scale = [[edge, BEHAVIOUR_COLOURS[b]] for i, b in enumerate(BEHAVIOURS)
             for edge in (i / len(BEHAVIOURS), (i + 1) / len(BEHAVIOURS))]
    for col, (name, portrait) in enumerate(portraits.items(), start=1):
        table = portrait.table.assign(label=portrait.table.apply(_cell_label, axis=1),
                                      hover=portrait.table.apply(_cell_hover, axis=1))

        def grid(column: str) -> pd.DataFrame:
            return table.pivot(index="layer", columns="head", values=column)  # (n_layer, nh)

        z = grid("behaviour").map(codes.get)
        fig.add_trace(go.Heatmap(z=z.to_numpy(dtype=float), x=[f"h{h}" for h in z.columns], y=[f"L{layer}" for layer in z.index],
                                 zmin=-0.5, zmax=len(BEHAVIOURS) - 0.5, colorscale=scale, showscale=False,
                                 text=grid("label").to_numpy(), texttemplate="%{text}", textfont=dict(size=12),
                                 customdata=grid("hover").to_numpy(), xgap=2, ygap=2,
                                 hovertemplate=f"{safe(name)} · layer %{{y}} head %{{x}}<br>%{{customdata}}<extra></extra>"),
                      row=1, col=col)
        fig.update_yaxes(autorange="reversed", row=1, col=col, showticklabels=col == 1)
    for behaviour, colour in BEHAVIOUR_COLOURS.items():  # a legend for the discrete colours
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=behaviour,
                                 marker=dict(color=colour, size=12, symbol="square")))
    fig.update_layout(legend=dict(orientation="h", y=-0.15), plot_bgcolor="rgba(0,0,0,0)")
    return finish(fig, title="What each head does: layer × head, named by its dominant behaviour", height=380)


def head_layer_figure(portraits: dict[str, HeadPortraits], *, layer: int) -> go.Figure:
    """One layer of every model: a row per model, a cell per head, coloured by the behaviour the head
    is named after (head_grid_figure for a model too deep to draw whole). `layer` is 1-based."""
    codes = {b: i for i, b in enumerate(BEHAVIOURS)}
    scale = [[edge, BEHAVIOUR_COLOURS[b]] for i, b in enumerate(BEHAVIOURS)
             for edge in (i / len(BEHAVIOURS), (i + 1) / len(BEHAVIOURS))]
    rows = {name: p.table[p.table["layer"] == layer].sort_values("head") for name, p in portraits.items()}
    heads = max(len(r) for r in rows.values())

    def grid(values) -> list[list]:  # (models, heads), padded where a model has fewer heads
        return [list(values(r)) + [None] * (heads - len(r)) for r in rows.values()]

    z = grid(lambda r: r["behaviour"].map(codes.get))
    fig = go.Figure(go.Heatmap(z=z, x=[f"h{h + 1}" for h in range(heads)], y=[safe(n) for n in rows],
                               zmin=-0.5, zmax=len(BEHAVIOURS) - 0.5, colorscale=scale, showscale=False,
                               text=grid(lambda r: r.apply(_cell_label, axis=1)), texttemplate="%{text}",
                               textfont=dict(size=12), customdata=grid(lambda r: r.apply(_cell_hover, axis=1)),
                               xgap=2, ygap=2, hoverongaps=False,
                               hovertemplate=f"%{{y}} · layer {layer} head %{{x}}<br>%{{customdata}}<extra></extra>"))
    fig.update_yaxes(autorange="reversed")
    for behaviour, colour in BEHAVIOUR_COLOURS.items():  # a legend for the discrete colours
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=behaviour,
                                 marker=dict(color=colour, size=12, symbol="square")))
    fig.update_layout(legend=dict(orientation="h", y=-0.15), plot_bgcolor="rgba(0,0,0,0)")
    return finish(fig, title=f"Layer {layer}: what each head does",
                  height=220 + 40 * len(rows))


def _cell_label(row: pd.Series) -> str:
    """Short text in a grid cell (the colour names the behaviour): the share that named the head, or
    its mean distance."""
    share = SHARES.get(row["behaviour"])
    return f"{row[share]:.2f}" if share else f"d {row['mean distance']:.0f}"


def _cell_hover(row: pd.Series) -> str:
    return (f"{row['behaviour']}<br>mean distance {row['mean distance']:.1f}<br>previous {row['previous token share']:.2f}"
            f" · first {row['first token share']:.2f} · self {row['self share']:.2f}")


def distance_profile_figure(profiles: dict[str, np.ndarray], *, layer: int, head: int, window: int) -> go.Figure:
    """Mean attention weight by distance back, one line per model, for one (layer, head), with the
    weight an even spread over the prefix would give."""
    fig = go.Figure()
    for name, profile in profiles.items():
        distance = np.arange(len(profile))
        fig.add_trace(go.Scatter(x=distance, y=profile, mode="lines", name=safe(name), line=dict(color=_colour(name.split(" ")[0])),
                                 hovertemplate=f"{safe(name)}<br>%{{x}} tokens back<br>mean weight %{{y:.3f}}<extra></extra>"))
    d = np.arange(window)
    even = [float(np.mean(1.0 / (np.arange(max(k, 1), window) + 1))) for k in d]  # mean of 1/(q+1), queries q >= d, q >= 1
    fig.add_trace(go.Scatter(x=d, y=even, mode="lines", name="even spread over the prefix",
                             line=dict(color="black", dash="dot"), hovertemplate="even spread: %{y:.3f}<extra></extra>"))
    fig.update_xaxes(title_text="distance back (0 = the token itself)", range=[0, 128])
    # a steep ALiBi head falls to 1e-15 by 128 back; below 1e-4 nothing is read anyway
    fig.update_yaxes(title_text="mean attention weight (log scale, from 10⁻⁴)", type="log", range=[-4, 0],
                     exponentformat="power")
    fig.update_layout(legend=dict(orientation="h", y=-0.2))
    return finish(fig, title=f"Layer {layer}, head {head + 1}: average attention by distance", height=420)


def streaming_figure(test: SinkTest, *, label: str, smooth: int = 32) -> go.Figure:
    """Rolling mean of the per-token loss along the text for the window alone and with the first tokens kept."""
    fig = go.Figure()
    for losses, name, colour in ((test.alone, f"window of {test.window} alone", "#ff7f0e"),
                                 (test.with_sink, f"first {test.sink} kept + window of {test.window}", "#1f77b4")):
        rolling = pd.Series(losses).rolling(smooth, min_periods=1).mean()
        fig.add_trace(go.Scatter(x=np.arange(1, len(losses) + 1), y=losses, mode="lines", showlegend=False,
                                 line=dict(color=colour, width=0.6), opacity=0.25, hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=np.arange(1, len(losses) + 1), y=rolling, mode="lines", name=name,
                                 line=dict(color=colour, width=3),
                                 hovertemplate=f"{name}<br>token %{{x}}<br>mean of the last {smooth}: %{{y:.3f}}<extra></extra>"))
    fig.add_vline(x=test.window, line=dict(color="black", dash="dash"), annotation_text="the window starts to slide",
                  annotation_position="top right")
    fig.update_xaxes(title_text="token predicted (position in the text)")
    fig.update_yaxes(title_text=f"next-token loss (nats), mean of the last {smooth}")
    fig.update_layout(legend=dict(orientation="h", y=-0.2))
    return finish(fig, title=f"Streaming the text: {safe(label)}", height=420)


def sink_gain_figure(summaries: dict[str, dict], *, sink: int) -> go.Figure:
    """The loss saved per token by keeping the first tokens, per scheme, with its noise band
    (sink_summary's "noise": the gain counts only outside it)."""
    names = list(summaries)
    gains = [summaries[n]["gain"] for n in names]
    errors = [summaries[n]["noise"] for n in names]
    fig = go.Figure(go.Bar(x=[safe(n) for n in names], y=gains, error_y=dict(type="data", array=errors),
                           marker_color=[_colour(n) for n in names],
                           hovertemplate="%{x}<br>loss saved %{y:.4f} nats per token<extra></extra>"))
    fig.add_hline(y=0, line=dict(color="black"))
    fig.update_yaxes(title_text=f"loss saved per token (nats; bars: ± {NOISE_ERRORS} s.e.)")
    return finish(fig, title=f"What keeping the first {sink} tokens saves, by scheme", height=380)
