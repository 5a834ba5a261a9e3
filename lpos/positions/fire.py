"""fire: Functional Interpolation for Relative Positions (Li et al., ICLR 2024, "Functional
Interpolation for Relative Positions Improves Long Context Transformers", section 3). Nothing is
added to the token rows; every score of query i and key j gets

    b(i, j) = f_θ( ψ(i - j) / ψ(max(L, i)) ),   ψ(x) = log(c·x + 1),

a learned function f_θ of the log distance normalised by the query's position, so distances inside
the query's reach always map into [0, 1] however long the input ("progressive interpolation").

What the paper leaves open, and what lpos chose:
- f_θ: an MLP 1 -> 32 -> n_head with a ReLU (the paper's width 32), one per layer;
- c > 0 is learned through a softplus, starting at 1; L is learned as a plain number, starting at the
  training length (128), so inside the training windows the normaliser is the constant ψ(L);
- positions count from 0 and the normaliser reads max(L, i + 1), so the first query is never 0 / 0;
- the bias is added to the scaled scores q·k / sqrt(d), like lpos's other biases; the MLP's weights
  start as lpos's other weights (N(0, 0.02), biases 0), so the bias starts near 0.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from lpos.positions.base import DistanceBias, Paper

HIDDEN = 32  # the paper's MLP width
START_C = 1.0
START_L = 128.0  # the shipped models' training length


class FireFunction(nn.Module):
    """f_θ, c and L of one layer: `forward(distance, query)` gives the bias (nh, T, S)."""

    def __init__(self, n_head: int):
        super().__init__()
        self.mlp_in = nn.Linear(1, HIDDEN)
        self.mlp_out = nn.Linear(HIDDEN, n_head)
        self.c_raw = nn.Parameter(torch.tensor(math.log(math.expm1(START_C))))  # softplus(c_raw) = c
        self.threshold = nn.Parameter(torch.tensor(START_L))  # L

    def psi(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(F.softplus(self.c_raw) * x + 1)

    def normalised(self, distance: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        """ψ(i - j) / ψ(max(L, i + 1)) for distances (T, S) and query positions (T,)."""
        reach = torch.maximum(self.threshold, (query + 1).to(self.threshold.dtype))  # (T,)
        return self.psi(distance.clamp(min=0).to(reach.dtype)) / self.psi(reach)[:, None]

    def curve(self, x: torch.Tensor) -> torch.Tensor:
        """f_θ at normalised distances x (...): (..., nh)."""
        return self.mlp_out(F.relu(self.mlp_in(x[..., None])))

    def forward(self, distance: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        return self.curve(self.normalised(distance, query)).permute(2, 0, 1)  # (nh, T, S)


class Fire(DistanceBias):
    name = "fire"
    order = 6
    label = "FIRE"
    colour = "#e377c2"
    hint = "adds a learned function of the normalised log distance to attention scores (FIRE)"
    explanation = ("Nothing is added to the token rows. Every attention score gets a bias from a small learned "
                   "network of the distance between query and key, taken on a log scale and divided by the query's "
                   "own reach, so any input length maps distances into the same range the training saw.")
    paper = Paper("Functional Interpolation for Relative Positions Improves Long Context Transformers",
                  "Li et al. 2024", "https://arxiv.org/abs/2310.04418")
    acts = "adds a learned function of the normalised log distance to attention scores"

    def layer_parameters(self, config) -> dict[str, nn.Module]:
        return {"fire": FireFunction(config.n_head)}

    def distance_bias(self, attention, distance: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
        return attention.fire(distance, queries)  # the normaliser reads where the query really sits


SCHEME = Fire()
