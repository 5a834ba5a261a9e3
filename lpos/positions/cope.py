"""cope: Contextual Position Encoding (Golovneva et al. 2024, "Contextual Position Encoding: Learning
to Count What's Important", section 3). A key's position is not its index but a count: query i gates
every key j <= i with g_ij = σ(q_i·k_j), the position of key j for query i is p_ij = Σ_{k=j..i} g_ik,
and that fractional position picks a vector between the learned integer rows e[⌊p⌋] and e[⌈p⌉]
(linear interpolation, p clamped at npos_max - 1); q_i·e[p_ij] is added to the score. So a head can
count words, sentences or one particular token instead of tokens.

What the paper leaves open, and what lpos chose (as the authors' reference code does):
- the gates read the same scaled scores q·k / sqrt(d) the softmax reads, after the causal mask (a
  masked key's gate is 0); the added term q·e[p] is not scaled;
- one table of `npos_max` rows (head width) per layer, shared by the layer's heads, starting at 0, so
  an untrained model's counts add nothing;
- npos_max = 128 (`GPTConfig.npos_max`): a 128-token window can count to 128 when every gate is 1,
  so training never clamps; a longer input's counts stop at 127.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from lpos.positions.base import Paper, PositionScheme


class CountTable(nn.Module):
    """One layer's position rows e[0..npos_max-1] (head width each)."""

    def __init__(self, head_size: int, npos_max: int):
        super().__init__()
        self.rows = nn.Parameter(torch.zeros(npos_max, head_size))


def counts(scores: torch.Tensor, npos_max: int) -> torch.Tensor:
    """p_ij = Σ_{k=j..i} σ(score_ik) from masked scores (..., T, S) (-inf after the query), clamped."""
    gates = torch.sigmoid(scores)  # 0 where masked
    return gates.flip(-1).cumsum(-1).flip(-1).clamp(max=npos_max - 1)


class Cope(PositionScheme):
    name = "cope"
    order = 7
    label = "CoPE"
    colour = "#17becf"
    hint = "positions as counts of the keys each query gates on, inside attention (CoPE)"
    explanation = ("Nothing is added to the token rows. Each query decides, key by key, how much each earlier token "
                   "counts (a gate between 0 and 1); a key's position is the sum of the gates from it to the query, "
                   "so a head can count words or sentences instead of tokens, and that count picks a learned "
                   "position vector whose dot product with the query is added to the score.")
    paper = Paper("Contextual Position Encoding: Learning to Count What's Important", "Golovneva et al. 2024",
                  "https://arxiv.org/abs/2405.18719")
    views = frozenset({"contextual"})
    acts = "adds a learned vector for each key's count of gated tokens to attention scores"

    def check_config(self, config) -> None:
        if config.npos_max < 2:
            raise ValueError(f"cope needs npos_max of at least 2, got {config.npos_max}")

    def layer_parameters(self, config) -> dict[str, nn.Module]:
        return {"cope": CountTable(config.n_embd // config.n_head, config.npos_max)}

    def score_term(self, attention, scores: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        rows = attention.cope.rows  # (npos, hs)
        p = counts(scores, len(rows))  # (B, nh, T, S)
        at_rows = q @ rows.T  # (B, nh, T, npos): q·e[n] for every integer count n
        low, high = p.floor().long(), p.ceil().long()
        share = p - low
        return at_rows.gather(-1, high) * share + at_rows.gather(-1, low) * (1 - share)


SCHEME = Cope()
