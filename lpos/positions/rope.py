"""rope: nothing added; queries and keys are rotated pair by pair inside attention (Su et al. 2021,
RoFormer): pair (2i, 2i+1) turns by t * base^(-2i/d), so q·k depends only on the distance m - n.
At inference its frequencies can be rescaled to read past the training length (Position
Interpolation, NTK-aware scaling or YaRN: `lpos.positions.maths.rope_frequencies`)."""
from __future__ import annotations

import torch

from lpos.positions.base import Paper, PositionScheme
from lpos.positions.maths import rope_rotate, rotation_frequencies


class Rope(PositionScheme):
    name = "rope"
    order = 2
    label = "RoPE"
    colour = "#2ca02c"
    hint = "rotates queries and keys by their position inside attention"
    explanation = ("Nothing is added to the token rows. Inside every attention layer each pair of a query's and a "
                   "key's columns is turned by an angle proportional to its position, so their dot product depends "
                   "only on how far apart they are.")
    paper = Paper("RoFormer: Enhanced Transformer with Rotary Position Embedding", "Su et al. 2021",
                  "https://arxiv.org/abs/2104.09864")
    views = frozenset({"rotation"})

    def check_config(self, config) -> None:
        if (config.n_embd // config.n_head) % 2:
            raise ValueError("rope needs an even head size")

    def rotate(self, attention, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
               rope_scaling=None) -> tuple[torch.Tensor, torch.Tensor]:
        hs = q.shape[-1]
        frequencies = rotation_frequencies(hs, rope_scaling, attention.rope_base)  # (hs/2,), built once per scaling
        magnitude = rope_scaling.attention_factor if rope_scaling is not None else 1.0
        return (rope_rotate(q, positions, frequencies=frequencies, magnitude=magnitude),
                rope_rotate(k, positions, frequencies=frequencies, magnitude=magnitude))


SCHEME = Rope()
