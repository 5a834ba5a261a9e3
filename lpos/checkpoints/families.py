"""What a model's configuration does beyond GPT-2's block, in sentences: its block (a Llama's, Qwen's, Gemma's,
GPT-NeoX's) and its position practice (RoPE's base per layer, the share of each head that turns, layers without
RoPE, sliding windows, the rescaling it was trained with). `describe` (the upload's summary, `lpos inspect`)
and the pages read these, so a model's practice is said the same way everywhere.
"""
from __future__ import annotations

from lpos.model_config import GPTConfig
from lpos.positions import ROPE_METHOD_NAMES, RopeScaling, scheme_info


def layer_words(layers: list[int]) -> str:
    """"layer 4", "layers 2 and 4", "layers 1, 2, 3 and 6" (counted from 1)."""
    named = [str(layer + 1) for layer in layers]
    if len(named) == 1:
        return f"layer {named[0]}"
    return f"layers {', '.join(named[:-1])} and {named[-1]}"


def bases_by_layer_words(bases: tuple[float, ...]) -> str:
    """Each distinct RoPE base and the layers that turn with it: "10,000 in layers 1, 2 and 3; 1,000,000 in layer 4"."""
    return "; ".join(f"{base_words(b)} in {layer_words([i for i, own in enumerate(bases) if own == b])}"
                     for b in sorted(set(bases)))


def base_words(base: float) -> str:
    """"1,000,000", "10,000", "500.5": a RoPE base as a learner reads it."""
    return f"{base:,.0f}" if base == int(base) else f"{base:,g}"


def block_sentence(config: GPTConfig) -> str | None:
    """The block's parts that are not GPT-2's, in one line; None for GPT-2's own block."""
    parts = []
    if config.norm == "rmsnorm":
        parts.append(f"RMSNorm (eps {config.norm_eps:g})")
    if config.mlp != "standard":
        gate = "GELU" if config.mlp == "geglu" else "SiLU"
        parts.append(f"a {gate}-gated feed-forward (hidden {config.mlp_hidden:,})")
    if config.parallel_block:
        parts.append("attention and feed-forward side by side, both adding to the block's input")
    if config.sandwich_norm:
        parts.append("a norm also on attention's and the feed-forward's outputs")
    if config.qk_norm:
        parts.append("queries and keys normalised per head before they turn")
    if config.qkv_bias and not config.bias:
        parts.append("biases on queries, keys and values only")
    heads = config.n_kv_head or config.n_head
    if heads != config.n_head:
        parts.append(f"{heads} key/value head{'s' if heads > 1 else ''} for {config.n_head} query heads")
    if config.head_dim is not None and config.head_dim != config.n_embd // config.n_head:
        parts.append(f"heads of {config.head_dim} columns (not width / heads)")
    if config.embed_scale != 1.0:
        parts.append(f"token rows scaled by {config.embed_scale:.3g} (the square root of the width) as they enter")
    return "block: " + "; ".join(parts) if parts else None


def scaling_words(scaling: RopeScaling) -> str:
    """"YaRN ×4 from 32,768 positions"."""
    return f"{ROPE_METHOD_NAMES[scaling.method]} ×{scaling.factor:g} from {scaling.original_length:,} positions"


def trained_scaling_sentence(config: GPTConfig) -> str:
    """What the rescaling a model was trained with (its config's rope_scaling) does on Stretching: "" for none."""
    scaled = {s for s in config.layer_scalings if s is not None}
    if config.dynamic_factor is not None:
        return (f"Its config rescales its rotations with dynamic NTK ×{config.dynamic_factor:g}: past "
                f"{config.block_size:,} positions the base grows with the input. \"RoPE as trained\" keeps that; each "
                "method below replaces it.")
    if not scaled:
        return ""
    words = "; ".join(scaling_words(s) + ("" if all(config.layer_scalings) else " in " + layer_words(
        [i for i, own in enumerate(config.layer_scalings) if own == s])) for s in sorted(scaled, key=str))
    return (f"Its config already rescales its rotations, as it was trained: {words}. \"RoPE as trained\" keeps that; "
            "each method below replaces it.")


def layer_practice(config: GPTConfig) -> list[str]:
    """RoPE's base in each layer and the layers that see only a window of positions, a sentence each."""
    n = config.n_layer
    bases = config.layer_bases or (config.rope_base,) * n
    windows = config.sliding_windows or (0,) * n
    local = [i for i in range(n) if windows[i]]
    said = []
    full = [i for i in range(n) if not windows[i]]
    if local and full and len(set(bases)) > 1:  # Gemma 3: local and global layers, each with its own base
        said.append(f"{len(local)} local layers see the last {windows[local[0]]:,} positions and turn with base "
                    f"{base_words(bases[local[0]])}; {layer_words(full)} {'is' if len(full) == 1 else 'are'} global: every "
                    f"position, base {base_words(bases[full[0]])}")
    else:
        said.append(f"RoPE base {base_words(config.rope_base)}" if len(set(bases)) == 1 else
                    "RoPE bases by layer: " + ", ".join(base_words(b) for b in bases))
        if local:
            said.append(f"{layer_words(local)} see{'s' if len(local) == 1 else ''} only the last {windows[local[0]]:,} "
                        "positions (a sliding window)")
    return said


def position_practice(config: GPTConfig) -> list[str]:
    """What the model does with positions, a sentence each: nothing for a model that does not rotate."""
    scheme = scheme_info(config.position).for_config(config)
    if not scheme.shows("rotation"):
        return []
    hs, n = config.head_size, config.n_layer
    said = layer_practice(config)
    rotated = scheme.rotated_width(hs)
    if rotated < hs:
        said.append(f"only the first {rotated} of each head's {hs} columns turn; the other {(hs - rotated) // 2} pairs "
                    "never do")
    still = [i for i in range(n) if not scheme.rotates_layer(i)]
    if still:
        said.append(f"{layer_words(still)} {'has' if len(still) == 1 else 'have'} no RoPE: no position at all")
    scaled = {s for s in config.layer_scalings if s is not None}
    for scaling in scaled:
        where = [i for i in range(n) if config.layer_scalings[i] == scaling]
        said.append(f"trained with {scaling_words(scaling)}" + ("" if len(where) == n else f" in {layer_words(where)}"))
    if config.dynamic_factor is not None:
        said.append(f"dynamic NTK ×{config.dynamic_factor:g}: past {config.block_size:,} positions the base grows "
                    "with the input")
    return [s for s in said if s]
