"""sinusoidal: a fixed table of sines and cosines added to the token row (Vaswani et al. 2017),
interleaved: column 2i = sin(t / base^(2i/width)), column 2i+1 = cos of the same angle.

The table's +-1 values would drown token rows initialised at 0.02 (measured: 0.4 nats worse), so a
row is scaled to the norm of an initial token row, as a learned table starts; the rows shown are the
rows added.
"""
from __future__ import annotations

import math

import torch

from lpos.positions.base import Paper, PositionScheme
from lpos.positions.maths import sinusoidal_table
from lpos.token_table import INIT_STD

# a sinusoidal row has norm sqrt(C/2); times this it has INIT_STD * sqrt(C), an initial token row's norm
SINUSOID_SCALE = INIT_STD * math.sqrt(2)


class Sinusoidal(PositionScheme):
    name = "sinusoidal"
    order = 1
    label = "Sinusoidal"
    colour = "#ff7f0e"
    hint = "a fixed table of sines and cosines, added to token rows"
    explanation = ("Each position gets a fixed row of sines and cosines at geometrically spaced frequencies, added "
                   "to the token row before the first block. Nothing is trained and the table goes on for ever, and "
                   "the dot product of two rows depends only on their distance.")
    paper = Paper("Attention Is All You Need", "Vaswani et al. 2017", "https://arxiv.org/abs/1706.03762")
    views = frozenset({"rows", "sinusoids"})
    acts = "adds a fixed sin/cos row per position to each token row before the first block"

    def position_rows(self, model, positions: torch.Tensor) -> torch.Tensor:
        table = sinusoidal_table(int(positions.max()) + 1, model.config.n_embd)  # rows 0..max
        return SINUSOID_SCALE * table.to(positions.device)[positions]  # never the token table: a shared one is rebuilt on each read


SCHEME = Sinusoidal()
