"""rope: nothing added; queries and keys are rotated pair by pair inside attention (Su et al. 2021,
RoFormer): pair (2i, 2i+1) turns by t * base^(-2i/d), so q·k depends only on the distance m - n.
At inference its frequencies can be rescaled to read past the training length (Position
Interpolation, NTK-aware scaling, YaRN or Llama 3's bands: `lpos.positions.maths.rope_frequencies`).

`Rope` also carries the three ways today's models rotate less, each a subclass in a module of its own:
a share of each head's columns (`rotated_share`, GPT-NeoX), a share of the pairs that turn at all
(`turning_share`, p-RoPE), and layers left without rotation (`nope_every`, SmolLM3). What a head does is
said by one tensor, `head_frequencies`: one angular frequency per column pair, 0 for a pair that never turns.
A real model's configuration may say its own share and its own layers without rotation (`GPTConfig.rope_share`,
`nope_layers`): `for_config` gives the scheme with them, which the model, its layers and the views ask.
"""
from __future__ import annotations

import copy
import functools

import torch

from lpos.positions.base import Paper, PositionScheme
from lpos.positions.maths import RopeScaling, rope_rotate, rotation_frequencies


@functools.lru_cache(maxsize=64)
def _head_frequencies(rotated: int, turning_pairs: int, pairs: int, scaling: RopeScaling | None,
                      base: float) -> torch.Tensor:
    with torch.inference_mode(False):  # shared with training, as rotation_frequencies
        frequencies = torch.zeros(pairs, dtype=torch.float64)
        frequencies[:rotated // 2] = rotation_frequencies(rotated, scaling, base)
        frequencies[turning_pairs:] = 0.0
        return frequencies


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
    rotated_share: float = 1.0  # the first columns of each head that rotate, with frequencies over them alone
    turning_share: float = 1.0  # the fastest pairs that turn (frequencies over the whole head); the rest stay at 0
    nope_every: int | None = None  # every n-th layer (the n-th, 2n-th, ...) rotates nothing
    nope_layers: frozenset[int] | None = None  # the blocks that rotate nothing, as a model's config lists them

    @property
    def rotates_fully(self) -> bool:
        """Every column of every head in every layer turns, as RoFormer's RoPE."""
        return (self.rotated_share == 1.0 and self.turning_share == 1.0 and self.nope_every is None
                and not self.nope_layers)

    def rotated_width(self, head_size: int) -> int:
        """How many of a head's columns rotate (the first ones): the share's columns rounded down to whole pairs, at
        least one pair (a tiny head of 4 columns rotates 2); the rest pass through."""
        return max(2, int(head_size * self.rotated_share) // 2 * 2) if self.rotated_share < 1 else head_size

    def turning_pairs(self, head_size: int) -> int:
        """How many pairs of a head turn at all, the fastest first (p-RoPE's transformers rule)."""
        return min(int(self.turning_share * head_size // 2), self.rotated_width(head_size) // 2)

    def rotates_layer(self, layer: int) -> bool:
        """Whether block `layer` (from 0) rotates its queries and keys (SmolLM3's `no_rope_layers` rule)."""
        if self.nope_layers is not None:
            return layer not in self.nope_layers
        return self.nope_every is None or (layer + 1) % self.nope_every != 0

    def for_config(self, config) -> Rope:
        if config.rope_share is None and not config.nope_layers:
            return self
        configured = copy.copy(self.with_share(config.rope_share))  # never the registry's own object
        if config.nope_layers:
            configured.nope_layers = frozenset(config.nope_layers)
        return configured

    def with_share(self, share: float | None) -> Rope:
        """This scheme rotating the first `share` of each head's columns (a configuration's own share; None: its own)."""
        if share is None:
            return self
        configured = copy.copy(self)
        configured.rotated_share = share
        return configured

    def check_config(self, config) -> None:
        hs = config.head_size
        rotated = self.for_config(config).rotated_width(hs)
        if hs % 2 or rotated % 2 or rotated < 2:
            raise ValueError(f"{self.name} needs an even head size and an even number of rotated columns; a head "
                             f"of {hs} columns rotates {rotated}")

    def head_frequencies(self, head_size: int, rope_scaling: RopeScaling | None = None,
                         base: float = 10000.0) -> torch.Tensor:
        """The angular frequency of each column pair of a head (head_size/2,), rescaled by `rope_scaling` where it
        turns; 0 where it never turns (a pair past the rotated columns, or among the slowest p-RoPE drops).
        Read it, never write to it: it is shared."""
        return _head_frequencies(self.rotated_width(head_size), self.turning_pairs(head_size), head_size // 2,
                                 rope_scaling, base)

    def rotate(self, attention, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
               rope_scaling=None) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.rotates_layer(attention.layer):
            return q, k
        hs = q.shape[-1]
        rotated = self.rotated_width(hs)
        frequencies = self.head_frequencies(hs, rope_scaling, attention.rope_base)[:rotated // 2]  # (rotated/2,)
        magnitude = rope_scaling.attention_factor if rope_scaling is not None else 1.0

        def turned(x: torch.Tensor) -> torch.Tensor:  # (B, nh, T, hs): the first `rotated` columns turned
            moved = rope_rotate(x[..., :rotated], positions, frequencies=frequencies, magnitude=magnitude)
            return moved if rotated == hs else torch.cat([moved, x[..., rotated:]], dim=-1)

        return turned(q), turned(k)


SCHEME = Rope()
