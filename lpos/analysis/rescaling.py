"""Which RoPE pairs a rescaling moves, pair by pair, without a model: each pair's wavelength as trained and under
every method, YaRN's regions, the share of the factor each method divides each pair by, and the sentences that
say them (section 2 of the Stretching-the-context page). A scheme that rotates only part of a head (a share of its
columns, its fastest pairs) is read through its own `head_frequencies`: a pair that never turns is said apart.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from lpos.analysis.attention import rotating_scheme
from lpos.positions import (AS_TRAINED, LLAMA3_HIGH_FREQUENCY_FACTOR, LLAMA3_LOW_FREQUENCY_FACTOR, RESCALINGS,
                            ROPE_METHOD_NAMES, ROPE_METHODS, YARN_BETA_FAST, YARN_BETA_SLOW, PositionScheme, RopeScaling,
                            scheme_info, yarn_ramp)


def wavelength_frame(dim: int, base: float = 10000.0, *, factor: float, original_length: int,
                     scheme: str = "rope", share: float | None = None, trained_scaling: RopeScaling | None = None
                     ) -> pd.DataFrame:
    """Per pair of a `dim`-column head of a rotating `scheme` (turning `share` of its columns, as a model's config
    may say): wavelength (positions per full turn) as trained (under `trained_scaling`, a config's own rescaling)
    and under each method, which replaces it (NaN for a pair that never turns); turns inside the training length
    at the base; YaRN's interpolated share and region over the pairs that turn."""
    rotating = rotating_scheme(scheme, share)
    trained = rotating.head_frequencies(dim, None, base)  # (dim/2,): 0 where a pair never turns
    turning = (trained > 0).numpy()
    frame = pd.DataFrame({"pair": np.arange(dim // 2), "turns": (original_length * trained / (2 * math.pi)).numpy()})
    for method in ROPE_METHODS:
        scaling = trained_scaling if method == AS_TRAINED.name else RopeScaling(method, factor, original_length)
        frequencies = rotating.head_frequencies(dim, scaling, base)
        frame[method] = np.where(turning, 2 * math.pi / frequencies.clamp_min(1e-300).numpy(), np.nan)
    rotated = rotating.rotated_width(dim)
    share = np.zeros(dim // 2)
    share[:rotated // 2] = yarn_ramp(rotated, base, original_length=original_length).numpy()
    frame["yarn_share"] = np.where(turning, share, np.nan)
    frame["yarn_region"] = np.where(~turning, "never turns", np.where(
        share == 0, "left alone", np.where(share == 1, "interpolated", "ramp")))
    return frame


def division_frame(dim: int, base: float = 10000.0, *, factor: float, original_length: int,
                   scheme: str = "rope", share: float | None = None) -> pd.DataFrame:
    """How far each method divides each pair's frequency, as a share of the full factor: 0 leaves the pair as
    trained, 1 divides it by `factor`, between blends (log(trained / rescaled) / log(factor)); NaN for a pair
    that never turns. Rows (method, label, pair, share), the methods that rescale in their order."""
    return divisions(rotating_scheme(scheme, share), dim, base, factor=factor, original_length=original_length)


def divisions(rotating: PositionScheme, dim: int, base: float, *, factor: float, original_length: int) -> pd.DataFrame:
    """division_frame for a rotating scheme object (a model's own, as its config sets it)."""
    if not factor > 1:
        raise ValueError(f"a share of the factor needs a factor over 1, got {factor}")
    trained = rotating.head_frequencies(dim, None, base)  # (dim/2,)
    rows = []
    for method in RESCALINGS:
        rescaled = rotating.head_frequencies(dim, RopeScaling(method, factor, original_length), base)
        share = torch.where(trained > 0, torch.log(trained.clamp_min(1e-300) / rescaled.clamp_min(1e-300)) / math.log(factor),
                            torch.nan)
        rows += [{"method": method, "label": ROPE_METHOD_NAMES[method], "pair": pair, "share": float(value)}
                 for pair, value in enumerate(share)]
    return pd.DataFrame(rows)


def division_reading(frame: pd.DataFrame, *, factor: float, trained_scaled: bool = False) -> str:
    """Markdown, one line per method: how many pairs it leaves, divides by the full factor, and blends
    (`trained_scaled`: the model's config rescales as trained, so a pair left alone is at its base frequency)."""
    lines = []
    for method, rows in frame.groupby("method", sort=False):
        share = rows["share"].dropna()
        kept, full = int((share < 1e-6).sum()), int((share > 1 - 1e-6).sum())
        blended = len(share) - kept - full
        parts = [f"{count} {what}" for count, what in ((kept, "left at its base frequency" if trained_scaled else "left as trained"), (full, f"divided by {factor:g}"),
                                                         (blended, "blended between")) if count]
        lines.append(f"- **{rows['label'].iloc[0]}**: of {len(share)} turning pairs, {', '.join(parts)}.")
    never = int(frame[frame["method"] == frame["method"].iloc[0]]["share"].isna().sum())
    if never:
        lines.append(f"- {never} pair{'s' if never != 1 else ''} never turn{'s' if never == 1 else ''}: no method "
                     f"changes {'it' if never == 1 else 'them'}.")
    return "\n".join(lines)


def wavelength_reading(frame: pd.DataFrame, *, original_length: int, factor: float, trained_scaled: bool = False) -> str:
    """Markdown: YaRN's three regions for this head size, with their pairs and turns."""
    lines = []
    for region, rows in frame.groupby("yarn_region", sort=False):
        pairs = rows["pair"].tolist()
        span = f"pair {pairs[0]}" if len(pairs) == 1 else f"pairs {pairs[0]}–{pairs[-1]}"
        turns = f"{rows['turns'].max():.2f} to {rows['turns'].min():.2f}" if len(pairs) > 1 else f"{rows['turns'].iloc[0]:.2f}"
        turned = "" if region == "never turns" else f" ({turns} turns in {original_length} tokens)"
        what = {"never turns": "frequency 0: they carry no position, and no method changes them",
                "left alone": "kept at the base frequency" if trained_scaled else "kept exactly as trained",
                "ramp": "partly interpolated, more the slower they turn",
                "interpolated": f"divided by {factor:g}, as Position Interpolation does"}[region]
        lines.append(f"- **{region}**: {span}{turned}: {what}.")
    turning = frame[frame["yarn_region"] != "never turns"]
    inside = int((turning["turns"] >= 1).sum())
    pairs = "pairs" if len(turning) == len(frame) else "turning pairs"
    lines.append(f"- {inside} of {len(turning)} {pairs} complete a full turn inside the {original_length}-token "
                 f"window; the other {len(turning) - inside} never did in training, so past it they reach angles the "
                 "model never saw.")
    return "\n".join(lines)


def pairs_sentence(head: int, *, train_length: int, base: float, scheme: str | PositionScheme = "rope",
                   layers: int = 1) -> str:
    """What each method does to the turning pairs of a `head`-column head of the rotating `scheme` (a name, or a
    model's own scheme as its config sets it) at RoPE base `base`, why YaRN leaves pair 0 alone when its floored
    boundaries do, and what no method touches (pairs that never turn, layers of `layers` that rotate nothing)."""
    rotating = scheme_info(scheme) if isinstance(scheme, str) else scheme
    rotated = rotating.rotated_width(head)
    turning = int((rotating.head_frequencies(head, None, base) > 0).sum())
    turns = train_length / (2 * math.pi)  # pair 0 turns once every 2π positions
    floored = turns < YARN_BETA_FAST and float(yarn_ramp(rotated, base, original_length=train_length)[0]) == 0
    still = [layer + 1 for layer in range(layers) if not rotating.rotates_layer(layer)]
    ntk = divisions(rotating, head, base, factor=2.0, original_length=train_length)
    ntk_full = float(ntk[ntk["method"] == "ntk"]["share"].max()) > 1 - 1e-6  # NTK's shares do not depend on the factor
    untouched = ("" if turning == head // 2 else
                 f" The other {head // 2 - turning} pairs never turn, so no method changes them.") + (
        f" Layer{'s' if len(still) > 1 else ''} {', '.join(map(str, still))} rotate{'s' if len(still) == 1 else ''} "
        "nothing, so no method changes {}.".format("it" if len(still) == 1 else "them") if still else "")
    return (f"Each head has {head} columns, so {head // 2} pairs"
            + (f", of which {turning} turn" if turning < head // 2 else "") + ". PI divides every frequency by the "
            "factor (every wavelength ×factor); NTK-aware raises the base, so fast pairs barely move and "
            + ("only the slowest is divided by the full factor" if ntk_full else
               "even the slowest turning pair is divided by less than the full factor (the base is raised over the "
               "whole head, whose slowest pairs do not turn)") + f"; YaRN leaves pairs that turn {YARN_BETA_FAST:g} or more times alone, "
            f"interpolates those turning less than {'once' if YARN_BETA_SLOW == 1 else f'{YARN_BETA_SLOW:g} times'}, with "
            "a ramp between (its boundaries floored and ceiled as in the reference code"
            + (f", which is why pair 0 is left alone at about {turns:.0f} turns)" if floored else ")")
            + f"; Llama 3's bands keep wavelengths under {train_length / LLAMA3_HIGH_FREQUENCY_FACTOR:g} positions (a "
            f"quarter of the training length), divide those over {train_length / LLAMA3_LOW_FREQUENCY_FACTOR:g}, and "
            "blend between in proportion to how often each turns." + untouched)
