"""rope-partial: RoPE on the first quarter of each head's columns only, the GPT-NeoX convention (Black et al.
2022; Pythia's `rotary_pct = 0.25`; transformers' `partial_rotary_factor`). The rotated quarter turns with
frequencies over that quarter, base^(-2i/(d/4)), so its slowest pair is as slow as a full head's; the other
three quarters of every query and key carry no position and match on content alone.

Left open by the GPT-NeoX paper and chosen here: which columns rotate (the first ones, as GPT-NeoX's code),
how they pair (lpos's adjacent pairs (2i, 2i+1); GPT-NeoX pairs column i with i + d/8, a permutation of the
same rotation), and the share (a quarter, Pythia's; Phi-2 rotates 40%). A rescaling for long inputs
(Stretching) applies to the rotated pairs only, as transformers computes it over the rotated dimension.
"""
from __future__ import annotations

from lpos.positions.base import Paper
from lpos.positions.rope import Rope


class PartialRope(Rope):
    name = "rope-partial"
    order = 8
    label = "Partial RoPE"
    colour = "#8c564b"
    hint = "rotates only the first quarter of each head's query and key columns (GPT-NeoX, Pythia)"
    explanation = ("Nothing is added to the token rows. Inside attention only the first quarter of each head's query "
                   "and key columns is turned by the token's position, as RoPE turns a whole head; the other three "
                   "quarters carry no position, so part of every score compares content alone.")
    paper = Paper("GPT-NeoX-20B: An Open-Source Autoregressive Language Model", "Black et al. 2022",
                  "https://arxiv.org/abs/2204.06745")
    rotated_share = 0.25
    finding = ("Black et al. 2022 rotate a quarter, as GPT-J did, to balance quality against compute; they report no "
               "comparison past the training length")


SCHEME = PartialRope()
