"""Head portraits: what each attention head does with position, measured on held-out text.

For every layer and head, averaged over the queries 1..L-1 of every window (query 0 can only
look at itself): the mean distance it looks back, and the share of its attention on the previous
token, on the first token of the window and on the token itself. A head that puts a large share
on the first token whatever the text is an attention sink (Xiao et al. 2023); one that looks one
token back is a previous-token head. The distance profile is the mean weight at each distance.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from lpos.analysis.probes import ProbeText, residual_streams
from lpos.model import GPT

MAX_DISTANCE = 128  # the longest distance a profile shows
DOMINANT_SHARE = 0.4  # a head putting this share on one token is named after it
SINK_SHARE = 0.3  # first-token share from which a head counts as an attention sink
LOCAL_FRACTION = 1 / 16  # a head with no dominant token looking back less than this share of the window is "local"
BEHAVIOURS = ("first token (sink)", "previous token", "itself", "local", "broad")
SHARES = {"first token (sink)": "first token share", "previous token": "previous token share", "itself": "self share"}


@dataclass(frozen=True)
class HeadPortraits:
    table: pd.DataFrame  # one row per (layer, head): the four statistics and the behaviour named
    profiles: np.ndarray  # (n_layer, nh, D + 1) mean attention weight at distance 0..D; NaN past the window
    queries: int  # query tokens averaged over, per head
    window: int  # tokens per window


def head_statistics(weights: torch.Tensor) -> dict[str, torch.Tensor]:
    """The four statistics per head from attention weights (n, nh, T, T), over queries 1..T-1: each (nh,)."""
    T = weights.shape[-1]
    if T < 2:
        raise ValueError("head statistics need windows of at least two tokens")
    positions = torch.arange(T)
    distance = (positions[:, None] - positions[None, :]).clamp(min=0).to(weights)  # (T, T) query minus key
    return {
        "mean distance": (weights * distance).sum(-1)[..., 1:].mean((0, 2)),
        "previous token share": weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean((0, 2)),
        "first token share": weights[..., 1:, 0].mean((0, 2)),
        "self share": weights.diagonal(dim1=-2, dim2=-1)[..., 1:].mean((0, 2)),
    }


def head_sentence(weights: np.ndarray, *, layer: int, head: int) -> str:
    """What one head does on one sentence (weights (nh, T, T)), measured, against an even spread.

    `layer` is the 1-based number shown to the reader. The shares are disjoint and add up to 100%:
    for the second query the previous token is the first token, so it counts as "first" only.
    """
    T = weights.shape[-1]
    if T < 2:
        return "One token attends only to itself."
    w = np.asarray(weights[head], dtype=np.float64)[1:]  # (T-1, T): queries 1..T-1
    queries = np.arange(1, T)
    first = float(w[:, 0].mean())
    itself = float(w[np.arange(T - 1), queries].mean())
    previous = float(np.where(queries >= 2, w[np.arange(T - 1), queries - 1], 0.0).mean())  # key q-1 when it is not key 0
    further = max(0.0, 1.0 - first - itself - previous)
    distance = float((w * (queries[:, None] - np.arange(T)[None, :]).clip(min=0)).sum(-1).mean())
    even = float(np.mean(queries / 2))  # query q spread evenly over keys 0..q looks back q/2
    return (f"On this sentence ({T} tokens), layer {layer} head {head + 1} puts {itself:.0%} of its weight on the token "
            f"itself, {first:.0%} on the first token, {previous:.0%} on the token just before (when that is not the "
            f"first) and {further:.0%} further back; it looks back {distance:.1f} tokens on average ({even:.1f} for an "
            "even spread). Head portraits over long held-out text are on the Inside the model page.")


def distance_profile(weights: torch.Tensor, *, max_distance: int = MAX_DISTANCE) -> torch.Tensor:
    """Mean weight a query puts on the key d tokens back, over the queries 1..T-1 that have one: (nh, D + 1)."""
    T = weights.shape[-1]
    columns = [weights.diagonal(offset=-d, dim1=-2, dim2=-1)[..., 1 if d == 0 else 0 :].mean((0, 2)) if d < T
               else torch.full(weights.shape[1:2], float("nan")) for d in range(max_distance + 1)]
    return torch.stack(columns, dim=1)


def uniform_first_share(window: int) -> float:
    """The first-token share of a head that spreads evenly over its prefix: the mean of 1/(q+1), q = 1..L-1."""
    return float(np.mean(1.0 / np.arange(2, window + 1)))


def behaviour(row: pd.Series, *, window: int) -> str:
    """The behaviour a head is named after: the token it favours, else how far it looks."""
    favourite = max(SHARES, key=lambda name: row[SHARES[name]])
    if row[SHARES[favourite]] >= DOMINANT_SHARE:
        return favourite
    return "local" if row["mean distance"] < LOCAL_FRACTION * window else "broad"


@torch.no_grad()
def head_portraits(model: GPT, text: ProbeText, *, batch_size: int = 4) -> HeadPortraits:
    """Statistics and distance profiles of every head of `model` on the windows of `text`."""
    n, L = text.windows.shape
    sums, profiles = None, None
    for first in range(0, n, batch_size):
        batch = text.windows[first : first + batch_size]
        _, attention = residual_streams(model, batch, keep_attention=True, batch_size=batch_size)
        share = len(batch) / n  # statistics are means over windows: weight each batch by its size
        stats = [{k: v * share for k, v in head_statistics(w.float()).items()} for w in attention]
        profile = torch.stack([distance_profile(w.float()) for w in attention]) * share  # (n_layer, nh, D + 1)
        sums = stats if sums is None else [{k: a[k] + b[k] for k in a} for a, b in zip(sums, stats)]
        profiles = profile if profiles is None else profiles + profile
    rows = [{"layer": layer + 1, "head": head + 1, **{k: float(v[head]) for k, v in stats.items()}}
            for layer, stats in enumerate(sums) for head in range(model.config.n_head)]
    table = pd.DataFrame(rows)
    table["behaviour"] = table.apply(behaviour, axis=1, window=L)
    return HeadPortraits(table=table, profiles=profiles.numpy(), queries=n * (L - 1), window=L)


def distance_profiles(portraits: dict[str, HeadPortraits], *, layer: int, head: int) -> dict[str, np.ndarray]:
    """Each model's distance profile of one head (`layer` and `head` 0-based indices), by name; a model with fewer
    layers or heads is left out."""
    return {name: p.profiles[layer, head] for name, p in portraits.items()
            if layer < p.profiles.shape[0] and head < p.profiles.shape[1]}


def sink_heads(portraits: HeadPortraits) -> pd.DataFrame:
    """The heads putting at least SINK_SHARE of their attention on the first token, largest first."""
    table = portraits.table
    return table[table["first token share"] >= SINK_SHARE].sort_values("first token share", ascending=False)


def heads_reading(portraits: HeadPortraits, *, scheme: str) -> list[str]:
    """Sentences from one model's head table: what its heads do, and which are sinks."""
    table = portraits.table
    counts = table["behaviour"].value_counts()
    named = ", ".join(f"{counts[b]} {b}" for b in BEHAVIOURS if b in counts)
    lines = [f"**{scheme}**, {len(table)} heads: {named} (a head is named after a token only when at least "
             f"{DOMINANT_SHARE:.0%} of its attention goes there; otherwise by its mean distance)."]
    sinks = sink_heads(portraits)
    uniform = uniform_first_share(portraits.window)
    if len(sinks):
        listed = ", ".join(f"layer {r['layer']} head {r['head']} ({r['first token share']:.2f})" for _, r in sinks.iterrows())
        lines.append(f"Attention sinks (at least {SINK_SHARE:.0%} on the first token; an even spread would put "
                     f"{uniform:.3f} there): {listed}.")
    else:
        top = table.loc[table["first token share"].idxmax()]
        lines.append(f"No head is an attention sink: the largest first-token share is {top['first token share']:.2f} "
                     f"(layer {top['layer']} head {top['head']}), against {uniform:.3f} for an even spread and "
                     f"{SINK_SHARE:.0%} to count as a sink.")
    previous = table.loc[table["previous token share"].idxmax()]
    below = previous["previous token share"] < DOMINANT_SHARE
    lines.append(f"The strongest previous-token head is layer {previous['layer']} head {previous['head']} "
                 f"({previous['previous token share']:.2f} of its attention one token back"
                 + (f", under the {DOMINANT_SHARE:.0%} that would name it, so it counts as {previous['behaviour']}"
                    if below else "") + "); mean distances run "
                 f"from {table['mean distance'].min():.1f} to {table['mean distance'].max():.1f} tokens "
                 f"(an even spread over {portraits.window} tokens gives {portraits.window / 4:.1f}).")
    return lines


def first_share_sentence(shares: dict[str, float], *, layer: int | None) -> str:
    """The largest first-token share of each scheme's heads: over all its heads, or in one `layer` (1-based)."""
    return (f"Largest first-token share per scheme{' over all its heads' if layer is None else f' in layer {layer}'}: "
            + ", ".join(f"{scheme} {share:.2f}" for scheme, share in shares.items()) + ".")
