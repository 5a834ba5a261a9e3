"""p-rope: RoPE with its slowest pairs removed (Barbero et al. 2025, "Round and Round We Go! What makes Rotary
Positional Encodings useful?"). The pair frequencies are RoPE's over the whole head, base^(-2i/d); the fastest
75% keep them and the slowest 25% are set to zero, so those pairs never turn and carry content alone
(transformers' `proportional` rope type with `partial_rotary_factor = 0.75`; Gemma 4).

Left open by the paper and chosen here: the share kept (0.75, the paper's best in its Gemma 2B runs; it also
tries 0.25 and 0.5), how the kept pairs are counted (transformers' rule: int(0.75 * d // 2) pairs, the fastest
first), and what a rescaling for long inputs does (it rescales the kept frequencies; a zero stays zero).
"""
from __future__ import annotations

from lpos.positions.base import Paper
from lpos.positions.rope import Rope


class PartialFrequencyRope(Rope):
    name = "p-rope"
    order = 9
    label = "p-RoPE"
    colour = "#bcbd22"
    hint = "rotates queries and keys by their position with the fastest 75% of RoPE's pairs; the slowest never turn"
    explanation = ("Nothing is added to the token rows. Inside attention each pair of query and key columns turns by "
                   "its position as in RoPE, but the slowest quarter of the pairs has its frequency set to zero: those "
                   "pairs never turn and compare content alone, at any distance.")
    paper = Paper("Round and Round We Go! What makes Rotary Positional Encodings useful?", "Barbero et al. 2025",
                  "https://arxiv.org/abs/2410.06205")
    turning_share = 0.75
    finding = ("Barbero et al. 2025 (Table 2, Gemma 2B trained from scratch) report 0.75-RoPE slightly ahead of RoPE: "
               "4.441 against 4.463 Wiki perplexity")


SCHEME = PartialFrequencyRope()
