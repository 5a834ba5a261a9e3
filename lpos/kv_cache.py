"""Keys and values of the positions a model has already read, so generation reads one new token at a time.

Each block's attention appends its new (already rotated, for rope) keys and values to its
`LayerCache`; the next `GPT.forward` call with the same `KVCache` starts at the positions after them.
"""
from __future__ import annotations

import torch


class LayerCache:
    """The keys (already rotated, for rope) and values of the positions one layer has read."""

    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None  # (B, nh, S, hs)
        self.values: torch.Tensor | None = None  # (B, nh, S, hs)

    @property
    def length(self) -> int:
        return 0 if self.keys is None else self.keys.shape[2]

    def extend(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the new positions' keys and values; return all of them."""
        self.keys = k if self.keys is None else torch.cat([self.keys, k], dim=2)
        self.values = v if self.values is None else torch.cat([self.values, v], dim=2)
        return self.keys, self.values


class KVCache:
    """One LayerCache per block. Pass the same cache to successive `GPT.forward` calls: each call
    reads only its new tokens, at the positions after those already cached."""

    def __init__(self, n_layer: int) -> None:
        self.layers = [LayerCache() for _ in range(n_layer)]

    @property
    def length(self) -> int:
        return self.layers[0].length
