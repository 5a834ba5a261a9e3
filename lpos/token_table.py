"""The token table at initialisation, and a table that shares its untouched rows between models.

A model trained over a corpus vocabulary changes only that vocabulary's rows of `wte`; every
other row keeps the value `initial_token_table` draws for its init_seed. `SharedTokenTable` holds
only the changed rows over one base table all such models share (docs/PERFORMANCE.md).
"""
from __future__ import annotations

import functools

import torch
import torch.nn as nn
import torch.nn.functional as F

INIT_STD = 0.02  # GPT-2's initialisation of weights and embedding rows


def initial_token_table(config) -> torch.Tensor:
    """The token table at initialisation of a GPTConfig (its vocab_size, n_embd and init_seed), from
    its own generator: N(0, 0.02) as GPT-2. A new tensor, the caller's to change."""
    return shared_initial_table(config.init_seed, config.vocab_size, config.n_embd).clone()


@functools.lru_cache(maxsize=2)
def shared_initial_table(init_seed: int, vocab_size: int, n_embd: int) -> torch.Tensor:
    """initial_token_table, drawn once per seed and shape and shared: never to be written. Every
    shipped model's load rebuilds its table from it (a copy: ~10 ms, against ~0.3 s to draw it)."""
    generator = torch.Generator().manual_seed(init_seed)
    return torch.randn(vocab_size, n_embd, generator=generator) * INIT_STD


class SharedTokenTable(nn.Module):
    """A tied token table held as the rows training changed over a base table other models share.

    A model trained over a corpus vocabulary changes only those rows (`ids`, `rows`); every other
    row keeps its initial value, which is the same for every model of one init_seed. The server
    holds that base once for all the shipped models instead of one 26 MB table each
    (`GPT.share_token_table`, docs/PERFORMANCE.md). Lookups and logits give the same numbers as
    the dense table; `weight` builds the dense table when something needs all of it.
    """

    def __init__(self, base: torch.Tensor, ids: torch.Tensor, rows: torch.Tensor):
        super().__init__()
        self.register_buffer("base", base, persistent=False)  # (V, C), shared: never written
        self.register_buffer("ids", ids)  # (K,) in output_vocab's order
        self.rows = nn.Parameter(rows, requires_grad=False)  # (K, C)
        slot = torch.full((len(base),), -1, dtype=torch.long)
        slot[ids] = torch.arange(len(ids))
        self.register_buffer("slot", slot, persistent=False)  # row of each id in `rows`, -1 if none

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        out = F.embedding(idx, self.base)
        slot = self.slot[idx]
        changed = slot >= 0
        out[changed] = self.rows[slot[changed]]
        return out

    @property
    def weight(self) -> torch.Tensor:
        """The dense (V, C) table: a new tensor, built on each access."""
        table = self.base.clone()
        table[self.ids] = self.rows.detach()
        return table
