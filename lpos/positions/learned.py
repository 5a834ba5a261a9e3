"""learned: a trained table `wpe[t]`, one row per position, added to the token row (GPT-2).

With `GPTConfig.random_positions` the table is read at a sorted random subset of its rows instead of
0..T-1 (Ruoss et al. 2023, "Randomized Positional Encodings Boost Length Generalization of
Transformers"): training draws a new subset for every window (lpos.train), so every row of a table
far longer than the training windows is trained. The paper samples at evaluation too; so does lpos,
from a fixed generator (`GPTConfig.position_seed`), so the same input always gets the same positions:
an input of n tokens at offset o reads rows sorted(first o + n draws of one fixed permutation)[o:].
A longer input therefore draws all its positions anew, and a key/value cache cannot continue one
(`GPT.caches_positions`).
"""
from __future__ import annotations

import functools

import torch
import torch.nn as nn

from lpos.positions.base import Paper, PositionScheme


@functools.lru_cache(maxsize=8)
def _permutation(rows: int, seed: int) -> torch.Tensor:
    return torch.randperm(rows, generator=torch.Generator().manual_seed(seed))


def sampled_positions(rows: int, count: int, *, seed: int) -> torch.Tensor:
    """The evaluation positions of a randomized table: the first `count` draws of one fixed
    permutation of its `rows` rows, sorted."""
    if count > rows:
        raise ValueError(f"the table has {rows} rows; {count} positions cannot be drawn from it")
    return _permutation(rows, seed)[:count].sort().values


class Learned(PositionScheme):
    name = "learned"
    order = 0
    label = "Learned table"
    colour = "#1f77b4"
    hint = "a trained table of position rows, added to token rows (GPT-2)"
    explanation = ("Each position has a row of its own in a trained table, added to the token row before the "
                   "first block, as in GPT-2. Training writes only rows it reaches, and the table stops at its last "
                   "row: a longer input has no row to read.")
    paper = Paper("Language Models are Unsupervised Multitask Learners", "Radford et al. 2019",
                  "https://cdn.openai.com/better-language-models/language_models_are_unsupervised_multitask_learners.pdf")
    views = frozenset({"rows", "table"})
    acts = "adds a trained row per position to each token row before the first block"

    def model_parameters(self, config) -> dict[str, nn.Module]:
        return {"wpe": nn.Embedding(config.block_size, config.n_embd)}

    def initialise(self, model, *, table_std: float) -> None:
        with torch.no_grad():
            model.transformer.wpe.weight.normal_(0.0, table_std)

    def position_rows(self, model, positions: torch.Tensor) -> torch.Tensor:
        return model.transformer.wpe(positions)

    def input_positions(self, config, T: int, offset: int, device=None) -> torch.Tensor:
        if not config.random_positions:
            return super().input_positions(config, T, offset, device)
        return sampled_positions(config.block_size, offset + T, seed=config.position_seed)[offset:].to(device)


SCHEME = Learned()
