"""Figures of the Stretching-the-context page: loss against length per RoPE scaling method,
the wavelength of each pair before and after, and attention past the wall."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from lpos.figures.common import finish, safe
from lpos.positions import AS_TRAINED, REGISTRY, ROPE_METHODS

REGION_FILLS = {"left alone": "rgba(44,160,44,0.10)", "ramp": "rgba(255,187,0,0.14)",
                "interpolated": "rgba(214,39,40,0.10)", "never turns": "rgba(127,127,127,0.12)"}


def curve_style(name: str) -> dict:
    """Colour and dash of a loss curve named as lpos.analysis.stretch.curve_name names it."""
    if name in REGISTRY and not REGISTRY[name].shows("rotation"):  # a model beside the rotating one, for reference
        return dict(color=REGISTRY[name].colour, dash="dash")
    method = next((m for m in ROPE_METHODS.values() if m.rescales and m.label in name), None)
    return dict(color=(method or AS_TRAINED).colour, dash="solid")


def _training_line(fig: go.Figure, train_length: int, *, log_x: bool) -> None:
    fig.add_shape(type="line", x0=train_length, x1=train_length, y0=0, y1=1, yref="paper",
                  line=dict(color="black", dash="dash"))
    fig.add_annotation(x=math.log10(train_length) if log_x else train_length, y=1, yref="paper",
                       text=f"training length {train_length}", showarrow=False, xanchor="left", yanchor="top")


def scaled_loss_figure(frame: pd.DataFrame, *, title: str, train_length: int) -> go.Figure:
    """Loss against evaluation length, one line per curve (rows: curve, length, loss, tokens)."""
    fig = go.Figure()
    for name, rows in frame.dropna(subset=["loss"]).groupby("curve", sort=False):
        fig.add_trace(go.Scatter(
            x=rows["length"], y=rows["loss"], mode="lines+markers", name=safe(name), line=curve_style(name),
            customdata=rows["tokens"],
            hovertemplate=f"{safe(name)}<br>windows of %{{x}} tokens<br>loss %{{y:.3f}} over %{{customdata:,}} "
                          "predictions<extra></extra>"))
    _training_line(fig, train_length, log_x=True)
    lengths = sorted(frame["length"].unique())
    fig.update_xaxes(type="log", title_text="evaluation length (tokens, log scale)", tickvals=lengths,
                     ticktext=[str(length) for length in lengths],
                     range=[math.log10(lengths[0]) - 0.08, math.log10(lengths[-1]) + 0.08])
    fig.update_yaxes(title_text="mean next-token loss (nats)")
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    return finish(fig, title=title, height=440)


def wavelength_methods_figure(frame: pd.DataFrame, *, original_length: int, factor: float) -> go.Figure:
    """Wavelength of each pair as trained and under each method (log scale), the training and
    target lengths as lines, and YaRN's three regions shaded behind."""
    fig = go.Figure()
    for region, rows in frame.groupby("yarn_region", sort=False):
        fig.add_vrect(x0=rows["pair"].min() - 0.5, x1=rows["pair"].max() + 0.5, fillcolor=REGION_FILLS[region],
                      line_width=0, layer="below", annotation_text=f"YaRN: {region}",
                      annotation_position="bottom left" if region == "left alone" else "top left")
    for method in ROPE_METHODS.values():
        title = method.label if method.rescales else "as trained"
        fig.add_trace(go.Scatter(
            x=frame["pair"], y=frame[method.name], mode="lines+markers", name=title,
            line=dict(color=method.colour, width=2 if method.rescales else 3,
                      dash="solid" if method.name in (AS_TRAINED.name, "yarn") else "dot"),
            customdata=np.stack([frame["turns"], frame["yarn_share"]], axis=-1),
            hovertemplate=f"{title}<br>pair %{{x}}: wavelength %{{y:,.1f}} positions<br>as trained: "
                          f"%{{customdata[0]:.2f}} turns in {original_length} tokens<br>YaRN interpolates "
                          "%{customdata[1]:.0%}<extra></extra>"))
    target = original_length * factor
    # on a log axis, annotations are placed in log10 units; shapes take plain lengths
    for value, text, colour in ((original_length, f"training length {original_length}", "black"),
                                (target, f"target length {target:,.0f} (×{factor:g})", "grey")):
        fig.add_shape(type="line", xref="x domain", x0=0, x1=1, y0=value, y1=value,
                      line=dict(color=colour, dash="dash" if colour == "black" else "dot"))
        fig.add_annotation(xref="x domain", x=1, y=math.log10(value), text=text, showarrow=False, xanchor="right",
                           yanchor="bottom", font=dict(color=colour))
    values = frame[list(ROPE_METHODS)].to_numpy()
    fig.update_yaxes(range=[math.log10(np.nanmin(values)) - 0.2, math.log10(max(np.nanmax(values), target)) + 0.3])
    fig.update_xaxes(title_text="pair i (columns 2i, 2i+1 of each query and key head)", dtick=1)
    fig.update_yaxes(title_text="wavelength (positions per full turn, log scale)", type="log")
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    return finish(fig, title=f"Which pairs turn fully inside the {original_length}-token window", height=460)


def division_figure(frame: pd.DataFrame, *, factor: float) -> go.Figure:
    """One row per method, one cell per pair: how far the method divides that pair's frequency, from 0 (left as
    trained, white) to 1 (divided by the full factor), grey where a pair never turns
    (rows: lpos.analysis.rescaling.division_frame)."""
    table = frame.pivot(index="label", columns="pair", values="share").reindex(frame["label"].unique())
    text = [["never turns" if np.isnan(v) else f"{v:.2f}" for v in row] for row in table.to_numpy()]
    fig = go.Figure(go.Heatmap(
        z=table.to_numpy(), x=table.columns, y=table.index, zmin=0, zmax=1, colorscale="Reds",
        colorbar=dict(title=dict(text="share of the factor", side="right"), thickness=12),
        customdata=text, hovertemplate="%{y}, pair %{x}: %{customdata}<extra></extra>", xgap=1, ygap=1))
    never = np.isnan(table.to_numpy()).all(axis=0)
    if never.any():
        fig.add_vrect(x0=float(table.columns[never].min()) - 0.5, x1=float(table.columns[never].max()) + 0.5,
                      fillcolor=REGION_FILLS["never turns"], line_width=0, layer="below",
                      annotation_text="never turn", annotation_position="top left")
    fig.update_xaxes(title_text="pair i (columns 2i, 2i+1 of each query and key head)")
    fig.update_yaxes(autorange="reversed")
    return finish(fig, title=f"Share of ×{factor:g} each method divides a pair by", height=300)


def attention_profile_figure(profiles: dict[str, pd.DataFrame], *, layer: int, measure: str, train_length: int,
                             window: int = 16) -> go.Figure:
    """The largest attention logit or the entropy against position, one line per method
    (`profiles`: curve name -> lpos.analysis.stretch.attention_profile rows), smoothed over
    `window` positions; entropy also gets ln(t + 1), that of attending evenly to every key."""
    fig = go.Figure()
    label = "largest attention logit" if measure == "max_logit" else "attention entropy (nats)"
    for name, frame in profiles.items():
        rows = frame[frame["layer"] == layer]
        smooth = rows[measure].rolling(window, min_periods=1).mean()
        fig.add_trace(go.Scatter(
            x=rows["position"], y=smooth, mode="lines", name=safe(name), line=curve_style(name),
            hovertemplate=f"{safe(name)}<br>position %{{x}}<br>{label}: %{{y:.2f}} (mean of {window})<extra></extra>"))
    if measure == "entropy":
        positions = np.arange(int(max(len(f[f["layer"] == layer]) for f in profiles.values())))
        fig.add_trace(go.Scatter(x=positions, y=np.log(positions + 1), mode="lines", name="even attention: ln(t + 1)",
                                 line=dict(color="#999999", dash="dot"),
                                 hovertemplate="position %{x}<br>ln(t + 1) = %{y:.2f}<extra></extra>"))
    _training_line(fig, train_length, log_x=False)
    fig.update_xaxes(title_text="query position")
    fig.update_yaxes(title_text=label)
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    return finish(fig, title=f"Layer {layer + 1}: {label} at each position", height=420)  # layers 1-based, as on every page
