"""Bias schemes (the "bias" view: ALiBi, T5, FIRE): each head's bias against the distance from query
to key, read through the scheme's own hook, beside ALiBi's fixed lines (as the attention path adds
them with `scheme=ALIBI`), and what the bias does to the sentence's attention.

A bias is asked for exactly as the attention path asks for it, `scheme.bias(attn, first_query, T, S)`,
one query at a time: the query at position i against keys 0..i gives the bias at distances i..0.
Whether the bias depends on where the query sits (FIRE's normaliser does, past its threshold) and
whether every layer has the same one (T5's table is shared) is measured, not assumed.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from lpos.analysis.attention import check_layer, queries_and_keys
from lpos.analysis.counts import listed
from lpos.analysis.heads import head_statistics
from lpos.model import GPT
from lpos.positions import ALIBI, NO_POSITIONS

MAX_DISTANCE = 256  # the distance axis every bias scheme is drawn on: 0..256
QUERY_POSITIONS = (16, 64, 127, 512)  # where the query sits: short, mid, the last of a 128-token window, far past it
SAME = 1e-6  # two biases closer than this (in score units) are the same number


@dataclass(frozen=True)
class BiasCurves:
    """One layer's bias per head against distance. `frame`: head, query, distance, bias (the model's
    own, through its scheme's hook); `alibi`: head, distance, bias (ALiBi's lines for as many heads)."""

    layer: int
    frame: pd.DataFrame
    alibi: pd.DataFrame
    same_line: tuple[tuple[int, ...], ...]  # query positions grouped by the line they get (one group: distance alone)
    same_in_every_layer: bool  # every layer's bias equals this one's
    is_alibi: bool  # the model's bias is ALiBi's lines themselves
    parameters: int  # learned numbers behind the bias (0: fixed)

    @property
    def depends_on_query(self) -> bool:
        """The bias at one distance differs between query positions."""
        return len(self.same_line) > 1

    @property
    def heads(self) -> int:
        return int(self.frame["head"].nunique())

    def head_curve(self, head: int) -> pd.Series:
        """The head's bias against distance from the farthest query (distance-indexed)."""
        part = self.frame[(self.frame["head"] == head) & (self.frame["query"] == self.frame["query"].max())]
        return part.set_index("distance")["bias"]

    def changes(self, head: int) -> int:
        """How often the head's bias changes value from one distance to the next over 0..MAX_DISTANCE
        (T5: once per new bucket; ALiBi: at every distance)."""
        return int((np.abs(np.diff(self.head_curve(head).to_numpy())) > SAME).sum())

    def last_change(self, head: int) -> int:
        """The distance from which on the head's bias stays at its last value."""
        values = self.head_curve(head).to_numpy()
        changes = np.flatnonzero(np.abs(np.diff(values)) > SAME)
        return int(changes[-1] + 1) if len(changes) else 0


def has_fixed_bias(model: GPT) -> bool:
    """The model's scheme adds a bias with no weights (ALiBi): the same lines on any model."""
    return model.scheme.shows("bias") and not model.scheme.parameter_count(model.config)


@torch.no_grad()
def bias_at(model: GPT, *, layer: int, query: int, max_distance: int = MAX_DISTANCE) -> torch.Tensor | None:
    """The bias (nh, D + 1) the layer adds for a query at position `query` against keys at
    distances 0..D, D = min(query, max_distance); None for a scheme that adds no bias."""
    check_layer(model, layer)
    attn = model.transformer.h[layer].attn
    bias = attn.scheme.bias(attn, query, 1, query + 1)  # (nh, 1, query + 1): keys 0..query
    if bias is None:
        return None
    reach = min(query, max_distance)
    return bias[:, 0, query - reach:].flip(-1).float()  # (nh, reach + 1): distance 0 first


def bias_lines(model: GPT, *, layer: int, query: int, max_distance: int = MAX_DISTANCE) -> np.ndarray:
    """bias_at as the lines a figure draws (lpos.figures.scheme_views.bias_lines_figure): (nh, D + 1), distance 0 first."""
    return bias_at(model, layer=layer, query=query, max_distance=max_distance).numpy()


@torch.no_grad()
def alibi_lines(model: GPT, *, layer: int, query: int, max_distance: int = MAX_DISTANCE) -> torch.Tensor:
    """ALiBi's bias (nh, D + 1) at distances 0..D for a query at `query`, as the attention path adds it
    (`scores(..., scheme=ALIBI)`) to zero scores: the lines ALiBi would draw for this model's heads."""
    attn = model.transformer.h[layer].attn
    hs = model.config.head_size
    q, k = torch.zeros(1, attn.n_head, 1, hs), torch.zeros(1, attn.n_head, query + 1, hs)  # q·k = 0 everywhere
    scores = attn.scores(q, k, first_query=query, scheme=ALIBI)[0, :, 0]  # (nh, query + 1): keys 0..query
    reach = min(query, max_distance)
    return scores[:, query - reach:].flip(-1)  # distance 0 first


@torch.no_grad()
def bias_curves(model: GPT, *, layer: int, queries: tuple[int, ...] = QUERY_POSITIONS,
                max_distance: int = MAX_DISTANCE) -> BiasCurves:
    """Every head's bias against distance at each query position, and how it compares."""
    check_layer(model, layer)
    if not model.scheme.shows("bias"):
        raise ValueError(f"{model.scheme.label} adds no bias to attention scores: it {model.scheme.acts}")
    curves = {query: bias_at(model, layer=layer, query=query, max_distance=max_distance) for query in queries}
    rows = [pd.DataFrame({"head": head, "query": query, "distance": np.arange(curve.shape[1]),
                          "bias": curve[head].numpy()})
            for query, curve in curves.items() for head in range(curve.shape[0])]
    nh = next(iter(curves.values())).shape[0]
    farthest = curves[max(queries)]  # (nh, D + 1)
    groups: list[list[int]] = []
    for query in queries:  # with the first group whose first query's line agrees on the distances both reach
        near = curves[query]
        group = next((g for g in groups if torch.allclose(curves[g[0]][:, :near.shape[1]],
                                                          near[:, :curves[g[0]].shape[1]], atol=SAME, rtol=0)), None)
        if group is None:
            groups.append([query])
        else:
            group.append(query)
    same = all(torch.allclose(bias_at(model, layer=other, query=max(queries), max_distance=max_distance), farthest,
                              atol=SAME, rtol=0) for other in range(model.config.n_layer))
    distances = torch.arange(farthest.shape[1])
    lines = alibi_lines(model, layer=layer, query=max(queries), max_distance=max_distance)  # (nh, D + 1)
    alibi = pd.concat([pd.DataFrame({"head": head, "distance": distances.numpy(), "bias": lines[head].numpy()})
                       for head in range(nh)], ignore_index=True)
    return BiasCurves(layer=layer, frame=pd.concat(rows, ignore_index=True), alibi=alibi,
                      same_line=tuple(tuple(g) for g in groups),
                      same_in_every_layer=same,
                      is_alibi=torch.allclose(farthest, lines, atol=SAME, rtol=0),
                      parameters=model.scheme.parameter_count(model.config))


def bias_curves_sentence(curves: BiasCurves, *, head: int, trained: bool) -> str:
    """What the bias curves show, measured: where the bias lives (every layer or its own), whether it depends
    on the query's position, how often head `head`'s bias changes with distance, and the ALiBi lines beside it."""
    if curves.same_in_every_layer:
        where = ("It has no weights, and the bias is the same in every layer." if not curves.parameters else
                 f"Its {curves.parameters:,} learned numbers serve every layer: the bias is the same in each layer.")
    else:
        where = (f"Each layer has a bias of its own ({curves.parameters:,} learned numbers in all): this is "
                 f"layer {curves.layer + 1}'s; choose another layer above.")
    if curves.depends_on_query:
        shares = [f"{listed([str(q) for q in g])} share one line" if len(g) > 1 else f"{g[0]} has its own"
                  for g in curves.same_line]
        when = (f"Queries at {listed(shares)}: the bias depends on where the query sits, not only on the "
                f"distance. Each line reaches back to its farthest query's position or distance {MAX_DISTANCE}.")
    else:
        when = f"It depends on the distance alone: queries at {listed([str(q) for q in QUERY_POSITIONS])} get the same line."
    changes, last = curves.changes(head), curves.last_change(head)
    steps = (f"Head {head + 1}'s bias is the same at every distance 0–{MAX_DISTANCE}." if not changes else
             f"Head {head + 1}'s bias changes value {changes} time{'s' if changes > 1 else ''} over distances 0–{MAX_DISTANCE}"
             + (f", the last time at distance {last}: it stays the same from there on." if last < MAX_DISTANCE else
                ", up to the last distance drawn."))
    dashed = ("" if curves.is_alibi else "\nDashed: ALiBi's fixed line for the same head, for comparison; the y axis "
              "fits this model's own bias, so an ALiBi line steeper than that leaves the panel.")
    start = " Untrained: the learned bias is still its random start." if curves.parameters and not trained else ""
    return f"{where} {when} {steps}{start}{dashed}"


@dataclass(frozen=True)
class BiasEffect:
    bias: np.ndarray  # (nh, T, T) the model's own bias over the sentence, 0 above the diagonal
    with_bias: np.ndarray  # (nh, T, T) the model's attention weights
    without_bias: np.ndarray  # (nh, T, T) softmax of the same scores with the bias left out


@torch.no_grad()
def bias_effect(model: GPT, ids: list[int], *, layer: int) -> BiasEffect:
    """The layer's own bias over the sentence, and its weights with and without it."""
    q, k = queries_and_keys(model, ids, layer=layer, rotate=True)  # (nh, T, hs) as the model reads them
    attn = model.transformer.h[layer].attn
    T = len(ids)
    bias = attn.scheme.bias(attn, 0, T, T)  # (nh, T, T)
    if bias is None:
        raise ValueError(f"{model.scheme.label} adds no bias to attention scores: it {model.scheme.acts}")
    scores = {own: attn.scores(q[None], k[None], scheme=None if own else NO_POSITIONS)[0] for own in (True, False)}  # (nh, T, T)
    visible = torch.isfinite(scores[False])  # the model's causal mask: -inf after each query
    return BiasEffect(bias=bias.float().masked_fill(~visible, 0.0).numpy(),
                      with_bias=F.softmax(scores[True], dim=-1).numpy(),
                      without_bias=F.softmax(scores[False], dim=-1).numpy())


def look_back(effect: BiasEffect) -> tuple[np.ndarray, np.ndarray] | None:
    """How far back each head looks on average (nh,), with the bias and without it (the head
    portraits' mean distance, over queries 1..T-1); None for a sentence of one token."""
    if effect.with_bias.shape[-1] < 2:
        return None
    return tuple(head_statistics(torch.from_numpy(w[None]))["mean distance"].numpy()
                 for w in (effect.with_bias, effect.without_bias))


def look_back_sentence(effect: BiasEffect, *, head: int) -> str:
    """How far back head `head`'s queries look on average with the bias and without it (look_back), on a
    line of its own; "" for a sentence of one token."""
    distances = look_back(effect)
    return ("" if distances is None else f"\nWith it head {head + 1}'s queries look back {distances[0][head]:.2f} tokens "
            f"on average; without it, {distances[1][head]:.2f}.")
