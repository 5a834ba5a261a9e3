"""rnope: RoPE in three of every four layers and no position at all in the fourth (Yang et al. 2025, "Rope to
Nope and Back Again: A New Hybrid Attention Strategy", who call the hybrid RNoPE; SmolLM3's
`no_rope_layer_interval = 4`, Llama 4's iRoPE). The layers without position attend by content alone and can
reach any distance without a rotation they never saw; the others keep RoPE's sense of order.

Left open and chosen here: which layers skip RoPE (SmolLM3's rule: block i skips when (i + 1) % 4 == 0, so with
4 blocks only the last; Llama 4 also scales the temperature of its NoPE layers and uses chunked attention in the
others, which lpos leaves out); a rescaling for long inputs applies to the rotating layers only.
"""
from __future__ import annotations

from lpos.positions.base import Paper
from lpos.positions.rope import Rope


class RopeWithNopeLayers(Rope):
    name = "rnope"
    order = 10
    label = "RNoPE"
    colour = "#393b79"
    hint = "rotates queries and keys in three of every four layers; every fourth layer has no position at all"
    explanation = ("Nothing is added to the token rows. Three of every four attention layers turn queries and keys by "
                   "their position as RoPE does; every fourth layer has no position at all and attends by content "
                   "alone, to any distance.")
    paper = Paper("Rope to Nope and Back Again: A New Hybrid Attention Strategy", "Yang et al. 2025",
                  "https://arxiv.org/abs/2501.18795")
    nope_every = 4
    finding = ("Yang et al. 2025 report the hybrid reading long contexts better than RoPE alone, at the same quality on "
               "short ones (on far larger models trained on long documents)")


SCHEME = RopeWithNopeLayers()
