"""What the pages that follow a scheme's hooks measure: which registered scheme is the no-positions
baseline, how much the bias schemes' biases change with distance, how far a shuffle moved the first
layer's attention weights, how the schemes tie a token to where it sits, and how often a scheme with
no effect crosses a noise band when several are compared at once.

Nothing here compares a scheme's name: it asks the scheme object (lpos.positions.base)."""
from __future__ import annotations

import math

import numpy as np

from lpos.analysis.counts import listed
from lpos.analysis.shuffle import ORDER_BLIND_TOLERANCE, ShuffleResult, moved_from
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


def bias_sentence(curves: dict[str, np.ndarray]) -> str:
    """Per scheme (by label): how much its heads' bias changes from distance 0 to the farthest key,
    from curves (nh, D + 1) with distance 0 first (lpos.analysis.biases.bias_at)."""
    said = []
    for label, curve in curves.items():
        change = curve[:, -1] - curve[:, 0]  # (nh,) farthest minus distance 0
        said.append(f"{label}: from distance 0 to {curve.shape[1] - 1}, its {len(change)} heads' bias changes by "
                    f"{change.min():+.2f} to {change.max():+.2f}")  # one precision for both ends
    return "; ".join(said) + "."


def weight_change(result: ShuffleResult, *, head: int) -> float:
    """The largest change of one head's first-layer weight on a token when the earlier tokens are
    shuffled, each weight compared with the same token's weight before (the bars' heights)."""
    origin = moved_from(result.original, result.shuffled)
    return float(np.abs(result.weights_after[head] - result.weights_before[head][origin]).max())


def weights_sentence(change: float, *, positionless: bool) -> str:
    """What one head's bars show, from its largest weight change (`weight_change`): each weight travelling with
    its token (`positionless`: the scheme without positions), or weights that changed."""
    if change < ORDER_BLIND_TOLERANCE:
        return (("Without positions each" if positionless else "Each")
                + " weight travels with its token: same heights up to float rounding, new places.")
    return f"The weights change, not only their places: the largest change is {change:.2g}."


def ties_sentence(schemes: list[str]) -> str:
    """How each of `schemes` ties a token to where it sits, grouped by view: "With learned and
    sinusoidal a row ...; with rope each query ..."."""
    parts = []
    for view, tie in TIES.items():
        having = [s for s in schemes if scheme_info(s).shows(view)]
        if having:
            parts.append(f"with {listed(having)} {tie}")
    said = "; ".join(parts)
    return said[:1].upper() + said[1:] + "." if parts else ""


def crossing_chance(errors: float, comparisons: int) -> float:
    """The chance that at least one of `comparisons` normal estimates with no effect lies more than
    `errors` standard errors from 0 (two-sided)."""
    one = math.erfc(errors / math.sqrt(2))
    return 1 - (1 - one) ** comparisons


def moved_sentence(results: list[ShuffleResult], *, trained: list[bool]) -> str:
    """Which schemes with positions (`results`, each model trained or not) moved layer 1's output past float
    error, by how much, and which did not."""
    moved = [r for r in results if not r.order_blind]
    still = [(t, r) for t, r in zip(trained, results) if r.order_blind]
    least, most = (min(moved, key=lambda r: r.attention_change), max(moved, key=lambda r: r.attention_change)) \
        if moved else (None, None)
    said = (f"{listed([r.scheme for r in moved])} moved it by more than float error: from {least.attention_change:.1e} "
            f"({least.scheme}) to {most.attention_change:.1e} ({most.scheme})." if len(moved) > 1 else
            f"{least.scheme} moved it by more than float error: {least.attention_change:.1e}." if moved else "")
    if still:
        its = "its" if len(still) == 1 else "their"
        untrained = [r.scheme for t, r in still if not t]
        why = ("" if not untrained else f" (untrained, so {its} position weights are still as they started)"
               if len(untrained) == len(still) else f" ({listed(untrained)}: untrained, its position weights still as "
               "they started)" if len(untrained) == 1 else f" ({listed(untrained)}: untrained, their position weights "
               "still as they started)")
        said += (f" {listed([r.scheme for _, r in still])} stayed within float error too: with these weights, {its} "
                 f"positions leave layer 1's output at the last token unchanged{why}.")
    return said.strip()


def baseline_caption(baseline: ShuffleResult | None) -> str:
    """Where the position-free scheme's bar sits against the dashed line, measured."""
    line = f"the dashed line at {ORDER_BLIND_TOLERANCE:g}"
    if baseline is None:
        return f"Log scale, with {line}."
    change = baseline.attention_change
    where = ("orders of magnitude below" if change < ORDER_BLIND_TOLERANCE / 100 else
             "below" if change < ORDER_BLIND_TOLERANCE else "above")
    return f"Log scale: `{baseline.scheme}` sits {where} {line}."


def baseline_sentence(baseline: ShuffleResult) -> str:
    """How far the shuffle moved the position-free scheme's layer-1 output: float rounding, or more."""
    if baseline.order_blind:
        return (f"With `{baseline.scheme}`, the shuffle moved layer 1's output by {baseline.attention_change:.1e}: "
                "float rounding, nothing more.")
    return (f"With `{baseline.scheme}`, layer 1's output moved by {baseline.attention_change:.1e}, more than "
            "float error: this model is not position-free.")


def mask_sentence(baseline: ShuffleResult, *, layers: int) -> str:
    """What the full position-free model did with the shuffle, and why (the causal mask)."""
    name = baseline.scheme
    if layers < 2:
        return (f"This `{name}` model has a single layer, so its prediction is order-blind too: the mask leaks order "
                "only once a second layer reads what each prefix computed.")
    moved = baseline.logits_change > ORDER_BLIND_TOLERANCE
    return (f"The full `{name}` model is {'not ' if moved else ''}order-blind: its next-token distribution moved by a "
            f"total variation of {baseline.distribution_change:.3f} (logits by up to {baseline.logits_change:.2f}), and "
            f"its top-1 token {'stayed the same' if baseline.same_top1 else 'changed'}. From layer 2 "
            "on, the last token reads the earlier positions' layer-1 outputs, and each of those attended only over its "
            "own prefix. Shuffle the tokens and the prefixes change, so the causal mask alone can tell a deep model "
            "about order.")
