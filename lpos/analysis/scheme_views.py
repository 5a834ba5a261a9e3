"""What the pages that follow a scheme's hooks measure: which registered scheme is the no-positions
baseline, how much the bias schemes' biases change with distance, how far a shuffle moved the first
layer's attention weights, how the schemes tie a token to where it sits, and how often a scheme with
no effect crosses a noise band when several are compared at once.

Nothing here compares a scheme's name: it asks the scheme object (lpos.positions.base)."""
from __future__ import annotations

import math

import numpy as np

from lpos.analysis.shuffle import ShuffleResult, moved_from
from lpos.positions import REGISTRY, scheme_info

# How a scheme with a view ties an earlier token to where it sits, after "with <schemes>" (one per
# view that says how positions enter; "table" and "sinusoids" are kinds of "rows").
TIES = {
    "rows": "a row chosen by position is added to each token",
    "rotation": "each query and key is rotated by its position",
    "bias": "each score gets a bias computed from where the query and the key sit",  # FIRE's reads the query's own place too
    "contextual": "each key's position is a count of the gates between it and the query, so it depends on the "
                  "tokens in between",
}


def positionless_scheme() -> str | None:
    """The first registered scheme that adds no rows and does nothing inside attention: the
    order-blind baseline (None if the registry has none)."""
    return next((name for name, s in REGISTRY.items() if not s.adds_rows and not s.in_attention), None)


def names(items: list[str]) -> str:
    """ "a", "a and b", "a, b and c"."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def bias_sentence(curves: dict[str, np.ndarray]) -> str:
    """Per scheme (by label): how much its heads' bias changes from distance 0 to the farthest key,
    from curves (nh, D + 1) with distance 0 first (lpos.analysis.biases.bias_at)."""
    said = []
    for label, curve in curves.items():
        change = curve[:, -1] - curve[:, 0]  # (nh,) farthest minus distance 0
        said.append(f"{label}: from distance 0 to {curve.shape[1] - 1}, its {len(change)} heads' bias changes by "
                    f"{change.min():+.3g} to {change.max():+.3g}")
    return "; ".join(said) + "."


def weight_change(result: ShuffleResult, *, head: int) -> float:
    """The largest change of one head's first-layer weight on a token when the earlier tokens are
    shuffled, each weight compared with the same token's weight before (the bars' heights)."""
    origin = moved_from(result.original, result.shuffled)
    return float(np.abs(result.weights_after[head] - result.weights_before[head][origin]).max())


def ties_sentence(schemes: list[str]) -> str:
    """How each of `schemes` ties a token to where it sits, grouped by view: "With learned and
    sinusoidal a row ...; with rope each query ..."."""
    parts = []
    for view, tie in TIES.items():
        having = [s for s in schemes if scheme_info(s).shows(view)]
        if having:
            parts.append(f"with {names(having)} {tie}")
    said = "; ".join(parts)
    return said[:1].upper() + said[1:] + "." if parts else ""


def crossing_chance(errors: float, comparisons: int) -> float:
    """The chance that at least one of `comparisons` normal estimates with no effect lies more than
    `errors` standard errors from 0 (two-sided)."""
    one = math.erfc(errors / math.sqrt(2))
    return 1 - (1 - one) ** comparisons
