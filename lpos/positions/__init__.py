"""The position schemes: one module each in this folder, found by the registry below.

- learned:    a trainable table `wpe[t]` added to the token row (GPT-2); optionally read at random
              positions (Ruoss et al. 2023: `GPTConfig.random_positions`).
- sinusoidal: a fixed sin/cos table added to the token row (Vaswani et al. 2017).
- rope:       queries and keys rotated by their position inside attention (Su et al. 2021).
- alibi:      scores tilted by -slope_h * distance per head (Press et al. 2021).
- none:       no position information at all.
- t5:         a learned bias per head and distance bucket, shared by every layer (Raffel et al. 2020).
- fire:       a learned function of the normalised log distance, per layer (Li et al. 2024).
- cope:       positions counted by gates the queries set on keys (Golovneva et al. 2024).

Each module defines `SCHEME`, a `PositionScheme` (base.py) that says everything the rest of the code
needs through attributes and hooks; a module copied under a new name with a new `name` is a new scheme.
The shared maths (sinusoid frequencies, RoPE and its rescalings) is in maths.py.
"""
from __future__ import annotations

import importlib
import pkgutil

from lpos.positions.alibi import SCHEME as ALIBI
from lpos.positions.alibi import alibi_bias, alibi_slopes
from lpos.positions.base import VIEWS, Paper, PositionScheme
from lpos.positions.none import SCHEME as NO_POSITIONS
from lpos.positions.maths import (
    AS_TRAINED,
    LLAMA3_HIGH_FREQUENCY_FACTOR,
    LLAMA3_LOW_FREQUENCY_FACTOR,
    RESCALINGS,
    ROPE_METHOD_NAMES,
    ROPE_METHODS,
    YARN_BETA_FAST,
    YARN_BETA_SLOW,
    RopeMethod,
    RopeScaling,
    applied_factor,
    check_rope_method,
    llama3_ramp,
    pair_frequencies,
    rope_angles,
    rope_attention_factor,
    rope_frequencies,
    rope_rotate,
    rotation_frequencies,
    sinusoidal_table,
    wavelengths,
    yarn_pair_index,
    yarn_ramp,
)

_SHARED = {"base", "maths"}  # modules here that are not schemes


def _discover() -> dict[str, PositionScheme]:
    found = []
    for module in pkgutil.iter_modules(__path__):
        if module.name in _SHARED or module.name.startswith("_"):
            continue
        scheme = getattr(importlib.import_module(f"{__name__}.{module.name}"), "SCHEME", None)
        if isinstance(scheme, PositionScheme):
            found.append(scheme)
    found.sort(key=lambda s: (s.order, s.name))
    names = [s.name for s in found]
    if len(set(names)) != len(names):
        raise RuntimeError(f"two scheme modules share a name: {names}")
    return {s.name: s for s in found}


REGISTRY: dict[str, PositionScheme] = _discover()
SCHEMES: tuple[str, ...] = tuple(REGISTRY)
DEFAULT_SCHEME = SCHEMES[0]  # what a link without a scheme shows: the first in order (learned)
SCHEME_INFO = REGISTRY  # the same registry under the name the public API gives it
HINTS: dict[str, str] = {name: scheme.hint for name, scheme in REGISTRY.items()}
SchemeInfo = PositionScheme


def check_scheme(name: str) -> str:
    if name not in REGISTRY:
        raise ValueError(f"unknown position scheme {name!r}; choose one of {sorted(SCHEMES)}")
    return name


def scheme_info(name: str) -> PositionScheme:
    """The scheme of a name; an unknown name raises ValueError."""
    return REGISTRY[check_scheme(name)]


get = scheme_info


def schemes_with(view: str) -> tuple[str, ...]:
    """The names of the schemes a view applies to, in registry order."""
    return tuple(name for name, scheme in REGISTRY.items() if scheme.shows(view))


__all__ = [
    "REGISTRY", "SCHEMES", "ALIBI", "NO_POSITIONS", "DEFAULT_SCHEME", "SCHEME_INFO", "HINTS", "VIEWS", "Paper", "PositionScheme", "SchemeInfo", "check_scheme",
    "scheme_info", "get", "schemes_with", "alibi_bias", "alibi_slopes", "AS_TRAINED", "applied_factor", "LLAMA3_HIGH_FREQUENCY_FACTOR", "LLAMA3_LOW_FREQUENCY_FACTOR", "RESCALINGS", "ROPE_METHOD_NAMES", "ROPE_METHODS", "llama3_ramp",
    "YARN_BETA_FAST", "YARN_BETA_SLOW", "RopeMethod", "RopeScaling", "check_rope_method", "pair_frequencies",
    "rope_angles", "rope_attention_factor", "rope_frequencies", "rope_rotate", "rotation_frequencies",
    "sinusoidal_table", "wavelengths", "yarn_pair_index", "yarn_ramp",
]
