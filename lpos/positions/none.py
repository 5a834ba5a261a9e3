"""none: no position information at all. Attention is then blind to the order of earlier tokens in
the first layer; from the second layer on the causal mask leaks some (a token sees how many came
before it)."""
from __future__ import annotations

from lpos.positions.base import PositionScheme


class NoPositions(PositionScheme):
    name = "none"
    order = 4
    label = "No positions"
    colour = "#7f7f7f"
    hint = "no position information in the input (the causal mask lets later layers infer some)"
    explanation = ("Nothing tells the model where a token sits. The first layer's attention is blind to the order "
                   "of earlier tokens; from the second layer on the causal mask leaks some order, since each token "
                   "sees how many tokens came before it.")
    acts = "adds nothing anywhere: the model gets no position information"


SCHEME = NoPositions()
