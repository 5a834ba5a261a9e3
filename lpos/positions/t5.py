"""t5: T5's relative position bias (Raffel et al. 2020, "Exploring the Limits of Transfer Learning
with a Unified Text-to-Text Transformer", section 2.1). Nothing is added to the token rows; every
score of query i and key j gets a learned scalar per head, looked up by the bucket of the distance
i - j: the first half of the buckets are exact distances 0, 1, ..., the rest log-spaced towards
`max_distance` (bucket 16 + floor(16 · log(d / 16) / log(128 / 16)) at the defaults, so the last bucket
already starts at distance 113 and holds every distance beyond). One table (buckets × heads) is
shared by every layer, as in T5.

Choices: the causal buckets (T5's `bidirectional=False`: only i - j >= 0 occurs), the config's
`num_buckets` (32) and `max_distance` (128) as T5's defaults; T5 does not scale q·k by 1/sqrt(d) (it
folds that into its initialisation), lpos keeps the scaling of its other schemes and adds the bias
after it; the table starts at N(0, 0.02) like lpos's other weights. The table learns at 10 times the
base rate, without weight decay (T5 trained with AdaFactor and no decay): Adam moves a weight by about
the learning rate per step at most, so over lpos's 1,100-step schedule one entry can travel about 1.8
(the sum of the rates), and a first run at the base rate ended with its entries between -1.56 and
+1.58, at that limit, while ALiBi's fixed lines reach -127 · slope. At 10 times the rate the shipped
table spans -8.95 to +3.43 and the held-out loss at 128 tokens fell from 3.043 to 2.934 nats
(checkpoints/README.md, docs/EXPERIMENTS.md).
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn

from lpos.positions.base import DistanceBias, Paper


def relative_bucket(distance: torch.Tensor, *, num_buckets: int = 32, max_distance: int = 128) -> torch.Tensor:
    """T5's causal bucket of each distance i - j (negative distances, keys after the query, count as 0):
    exact below num_buckets / 2, then log-spaced, the last bucket from max_distance on."""
    distance = distance.clamp(min=0).long()
    exact = num_buckets // 2
    # the log-spaced buckets: exact + log(d / exact) / log(max_distance / exact) * (num_buckets - exact), floored
    spread = torch.log(distance.float().clamp(min=1) / exact) / math.log(max_distance / exact) * (num_buckets - exact)
    far = (exact + spread.to(torch.long)).clamp(max=num_buckets - 1)
    return torch.where(distance < exact, distance, far)


class T5Bias(DistanceBias):
    name = "t5"
    order = 5
    label = "T5 bias"
    colour = "#9467bd"
    hint = "adds a learned bias per head and distance bucket to attention scores (T5)"
    explanation = ("Nothing is added to the token rows. Every attention score gets a learned number that depends on "
                   "the head and on the bucket of the distance between query and key: short distances each have a "
                   "bucket of their own, longer ones share log-spaced buckets, and everything past the last bucket's "
                   "start gets the same bias. One table serves every layer.")
    paper = Paper("Exploring the Limits of Transfer Learning with a Unified Text-to-Text Transformer",
                  "Raffel et al. 2020", "https://arxiv.org/abs/1910.10683")
    acts = "adds a learned bias per head and distance bucket to attention scores"
    learning_rate_scale = 10.0

    def check_config(self, config) -> None:
        if config.num_buckets < 2 or config.max_distance <= config.num_buckets // 2:
            raise ValueError(f"t5 needs num_buckets >= 2 and max_distance over num_buckets / 2, got "
                             f"{config.num_buckets} and {config.max_distance}")

    def model_parameters(self, config) -> dict[str, nn.Module]:
        return {"relative_bias": nn.Embedding(config.num_buckets, config.n_head)}

    def distance_bias(self, attention, distance: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
        table = attention.model_parts["relative_bias"].weight  # (buckets, nh), shared by every layer
        buckets = relative_bucket(distance, num_buckets=attention.config.num_buckets,
                                  max_distance=attention.config.max_distance)  # (T, S)
        return table[buckets].permute(2, 0, 1)  # (nh, T, S): distances only, so an offset cancels


SCHEME = T5Bias()
