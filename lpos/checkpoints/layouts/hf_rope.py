"""A Hugging Face config.json's RoPE settings as GPTConfig values: base, share, rescaling, per layer type.

Configs say RoPE in two generations of names. Older files (the ones on the Hub) have `rope_theta`,
`rope_scaling` (`{"type" or "rope_type": "linear" | "dynamic" | "yarn" | "llama3", "factor": ...}`),
GPT-NeoX's `rotary_pct` and `rotary_emb_base`, Gemma 3's `rope_local_base_freq`; transformers 5 writes
`rope_parameters`, flat or nested by layer type (`{"full_attention": {...}, "sliding_attention": {...}}`).
`layer_rope` merges them into one dict per layer type; `rope_values` turns those into what lpos's attention
reads: each block's base (`layer_bases`), its rescaling as trained (`layer_scalings`: linear is Position
Interpolation, yarn and llama3 are lpos's own methods) and dynamic NTK's factor (`dynamic_factor`, applied
past `block_size`). A rope type or a parameter lpos does not reproduce is refused by name.
"""
from __future__ import annotations

from lpos.checkpoints.errors import CheckpointError
from lpos.positions import YARN_BETA_FAST, YARN_BETA_SLOW, RopeScaling

ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "llama3")  # rope_type values lpos reproduces
# Where older configs keep each layer type's base, and whether their rope_scaling applies to it
Legacy = dict[str, tuple[tuple[str, ...], bool]]
LEGACY: Legacy = {"full_attention": (("rope_theta", "rotary_emb_base"), True),
                  "sliding_attention": (("rope_theta", "rotary_emb_base"), True)}
YARN_DEFAULTS = {"beta_fast": YARN_BETA_FAST, "beta_slow": YARN_BETA_SLOW, "truncate": True}


def layer_rope(hf: dict, layer_type: str, *, default_base: float, legacy: Legacy = LEGACY) -> dict:
    """The RoPE parameters of one layer type: rope_type, rope_theta and the rescaling's own, from
    rope_parameters (flat or nested by layer type) and the older top-level names (`legacy`)."""
    base_names, scaled = legacy[layer_type]
    parameters = hf.get("rope_parameters") if isinstance(hf.get("rope_parameters"), dict) else {}
    nested = parameters.get(layer_type) if isinstance(parameters.get(layer_type), dict) else None
    if nested is None and any(isinstance(v, dict) for v in parameters.values()):
        nested = {}  # nested by layer type, this one left to its defaults
    merged = dict(nested if nested is not None else parameters)
    scaling = hf.get("rope_scaling")
    if isinstance(scaling, dict) and scaled:
        merged.update(scaling)
    merged.setdefault("rope_type", merged.get("type", "default"))
    if "rope_theta" not in merged:
        merged["rope_theta"] = next((hf[name] for name in base_names if name in hf), default_base)
    return merged


def scaling_of(rope: dict, *, max_positions: int, label: str) -> tuple[RopeScaling | None, float | None]:
    """The rescaling one layer type was trained with, and dynamic NTK's factor (None unless dynamic)."""
    kind = rope.get("rope_type")
    if kind not in ROPE_TYPES:
        raise CheckpointError(f"{label} rescales RoPE with rope_type {str(kind)[:30]!r}, which lpos does not "
                              f"reproduce (it reads {', '.join(ROPE_TYPES)})")
    if kind == "default":
        return None, None
    factor = rope.get("factor")
    original = rope.get("original_max_position_embeddings") or max_positions
    if kind == "yarn" and factor is None:
        factor = max_positions / original
    if not isinstance(factor, (int, float)) or isinstance(factor, bool) or not factor >= 1:
        raise CheckpointError(f"{label}'s {kind} RoPE scaling has factor {str(factor)[:20]}, not a number of 1 or more")
    if not isinstance(original, int) or original < 1:
        raise CheckpointError(f"{label}'s {kind} RoPE scaling has original_max_position_embeddings {str(original)[:20]}")
    if kind == "linear":
        return RopeScaling("pi", float(factor), original), None
    if kind == "dynamic":
        return None, float(factor)
    if kind == "yarn":
        changed = [name for name, value in YARN_DEFAULTS.items() if rope.get(name) not in (None, value)]
        changed += [name for name in ("attention_factor", "mscale", "mscale_all_dim") if rope.get(name) is not None]
        if changed:
            raise CheckpointError(f"{label}'s yarn RoPE scaling sets {', '.join(changed)}; lpos reproduces YaRN with "
                                  f"beta_fast {YARN_BETA_FAST}, beta_slow {YARN_BETA_SLOW} and the paper's attention factor")
        return RopeScaling("yarn", float(factor), original), None
    low, high = rope.get("low_freq_factor", 1.0), rope.get("high_freq_factor", 4.0)
    try:
        return RopeScaling("llama3", float(factor), original, low_frequency_factor=float(low),
                           high_frequency_factor=float(high)), None
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{label}'s llama3 RoPE scaling is not usable: {str(e)[:120]}") from None


def rope_values(hf: dict, layer_types: list[str], *, label: str, default_bases: dict[str, float] | None = None,
                legacy: Legacy = LEGACY, partial: bool = False, default_share: float = 1.0) -> dict:
    """GPTConfig values of a config's RoPE for blocks of `layer_types`: rope_base (the first block's),
    layer_bases and layer_scalings (one per block, set only when blocks differ or one is rescaled),
    dynamic_factor, and rope_share when `partial` (GPT-NeoX: the share of each head that rotates); a partial
    share in a family that rotates whole heads is refused."""
    default_bases = default_bases or {}
    max_positions = hf.get("max_position_embeddings", 2048)
    ropes = {kind: layer_rope(hf, kind, default_base=default_bases.get(kind, 10000.0), legacy=legacy)
             for kind in set(layer_types)}
    bases, scalings, dynamic = {}, {}, set()
    for kind, rope in ropes.items():
        base = rope["rope_theta"]
        if not isinstance(base, (int, float)) or isinstance(base, bool) or not 1 < base < 1e12:
            raise CheckpointError(f"{label} declares a RoPE base of {str(base)[:20]}, not a number over 1")
        bases[kind] = float(base)
        scalings[kind], factor = scaling_of(rope, max_positions=max_positions, label=label)
        if factor is not None:
            dynamic.add(factor)
    if len(dynamic) > 1 or (dynamic and len(ropes) > 1 and any(s is not None for s in scalings.values())):
        raise CheckpointError(f"{label} mixes dynamic RoPE scaling with other rescalings across its layers")
    values = dict(rope_base=bases[layer_types[0]], dynamic_factor=dynamic.pop() if dynamic else None)
    if len(set(bases.values())) > 1:
        values["layer_bases"] = tuple(bases[kind] for kind in layer_types)
    if any(s is not None for s in scalings.values()):
        values["layer_scalings"] = tuple(scalings[kind] for kind in layer_types)
    shares = {rope.get("partial_rotary_factor", hf.get("partial_rotary_factor", hf.get("rotary_pct", default_share)))
              for rope in ropes.values()}
    share = shares.pop() if len(shares) == 1 else None
    if not isinstance(share, (int, float)) or isinstance(share, bool) or not 0 < share <= 1:
        raise CheckpointError(f"{label} rotates a share of {str(share)[:20]} of each head; lpos reads one share from 0 to 1")
    if partial and share != 1:
        values["rope_share"] = float(share)
    elif share != 1:
        raise CheckpointError(f"{label} sets partial_rotary_factor {share}, which this family's attention does not use")
    return values
