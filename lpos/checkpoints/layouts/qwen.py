"""Hugging Face Qwen2 (Qwen2.5), Qwen3 and SmolLM3 folders: Llama blocks with each family's own practice.

All three are lpos's Llama block (RMSNorm, SwiGLU, grouped-query attention, RoPE over whole heads) under
Hugging Face's Llama names (`model.layers.N.self_attn.q_proj`, `mlp.gate_proj`, `input_layernorm`, ...).
What each adds, read from config.json:

| family | what differs | GPTConfig |
|---|---|---|
| Qwen2 / Qwen2.5 | biases on the query, key and value projections (not the output's); base 1,000,000 | `qkv_bias` |
| Qwen3 | an RMSNorm over each head's queries and keys before they turn; its own head size (128) | `qk_norm`, `head_dim` |
| SmolLM3 | no RoPE in every fourth layer (`no_rope_layers`: 0 where a layer skips it) | `nope_layers`, scheme rnope |

Any of them may set sliding windows (`use_sliding_window`, `layer_types`) and a `rope_scaling`
(lpos.checkpoints.layouts.hf_rope).
"""
from __future__ import annotations

import torch

from lpos.checkpoints.errors import CheckpointError
from lpos.checkpoints.layouts.hf_folder import (Family, Tensors, adjacent_rows, folder_layout, layer_kinds, shaped, whole,
                                                windows)
from lpos.checkpoints.layouts.hf_rope import rope_values
from lpos.checkpoints.layouts.llama import as_float
from lpos.model import GPTConfig

DEFAULTS = {  # what each family's config class assumes when config.json leaves a value out
    "qwen2": dict(tie_word_embeddings=False, head_dim=None),
    "qwen3": dict(tie_word_embeddings=False, head_dim=128),
    "smollm3": dict(tie_word_embeddings=True, head_dim=None),
}
NAMES = {"Qwen2": "qwen2", "Qwen3": "qwen3", "SmolLM3": "smollm3"}


def qwen_values(hf: dict, label: str) -> dict:
    kind = hf.get("model_type")
    defaults = DEFAULTS[kind]
    if hf.get("hidden_act", "silu") != "silu":
        raise CheckpointError(f"{label} uses hidden_act {str(hf.get('hidden_act'))[:20]!r}; lpos reads {kind}'s SwiGLU with silu")
    if hf.get("mlp_bias"):
        raise CheckpointError(f"{label} has biases in its feed-forward (mlp_bias), which lpos's SwiGLU does not have")
    width, heads = whole(hf.get("hidden_size"), "hidden_size", label), whole(hf.get("num_attention_heads"), "num_attention_heads", label)
    n_layer = whole(hf.get("num_hidden_layers"), "num_hidden_layers", label)
    head_dim = hf.get("head_dim") or defaults["head_dim"] or width // heads
    sliding = bool(hf.get("use_sliding_window")) and hf.get("sliding_window") is not None
    uses_rope = [1] * n_layer
    if kind == "smollm3":
        interval = hf.get("no_rope_layer_interval", 4)
        uses_rope = hf.get("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(n_layer)]
        if not isinstance(uses_rope, list) or len(uses_rope) != n_layer:
            raise CheckpointError(f"{label}'s no_rope_layers is not one 0 or 1 per layer")
        kinds = layer_kinds(hf, n_layer, lambda i: "sliding_attention" if sliding and not uses_rope[i] else "full_attention",
                            label)
    else:
        first = hf.get("max_window_layers", 28)
        kinds = layer_kinds(hf, n_layer, lambda i: "sliding_attention" if sliding and i >= first else "full_attention",
                            label)
    if not sliding:  # transformers drops the window unless use_sliding_window says so
        kinds = ["full_attention"] * n_layer
    nope = tuple(i for i, rope in enumerate(uses_rope) if not rope)
    biased = bool(hf.get("attention_bias", False))
    return dict(
        vocab_size=hf.get("vocab_size"), n_embd=width, mlp_hidden=hf.get("intermediate_size"), n_layer=n_layer,
        n_head=heads, n_kv_head=hf.get("num_key_value_heads") or heads, head_dim=head_dim,
        block_size=hf.get("max_position_embeddings", 32768), norm_eps=as_float(hf.get("rms_norm_eps", 1e-6)),
        tied=bool(hf.get("tie_word_embeddings", defaults["tie_word_embeddings"])),
        position="rnope" if nope else "rope", nope_layers=nope, norm="rmsnorm", mlp="swiglu",
        bias=biased, qkv_bias=True if kind == "qwen2" else None, qk_norm=kind == "qwen3",
        **windows(hf, kinds, label), **rope_values(hf, kinds, label=label))


def llama_names_state(config: GPTConfig, fetch: Tensors, label: str, *, prefix: str = "model.",
                      post_norms: bool = False) -> dict:
    """lpos's state dict of a model under Hugging Face's Llama names below `prefix`: q, k, v stacked into
    c_attn with q's and k's rows (and biases, and the q/k norms' weights) in adjacent pairs. post_norms:
    Gemma's four norms per block (input, post_attention, pre_feedforward, post_feedforward)."""
    C, hs, nh, nkv = config.n_embd, config.head_size, config.n_head, config.n_kv_head or config.n_head
    hidden, V = config.mlp_hidden, config.vocab_size

    def get(key: str, shape: tuple[int, ...]):
        return shaped(fetch, prefix + key, shape, label)

    state = {"transformer.wte.weight": get("embed_tokens.weight", (V, C)), "transformer.ln_f.weight": get("norm.weight", (C,))}
    if not config.tied:
        state["lm_head.weight"] = shaped(fetch, "lm_head.weight", (V, C), label)
    biased = config.bias if config.qkv_bias is None else config.qkv_bias
    for i in range(config.n_layer):
        block, source = f"transformer.h.{i}.", f"layers.{i}."
        parts = [adjacent_rows(get(source + "self_attn.q_proj.weight", (nh * hs, C)), nh, hs),
                 adjacent_rows(get(source + "self_attn.k_proj.weight", (nkv * hs, C)), nkv, hs),
                 get(source + "self_attn.v_proj.weight", (nkv * hs, C))]
        state[block + "attn.c_attn.weight"] = torch.cat(parts)  # (nh hs + 2 nkv hs, C): query, key, value rows
        if biased:
            state[block + "attn.c_attn.bias"] = torch.cat([
                adjacent_rows(get(source + "self_attn.q_proj.bias", (nh * hs,)), nh, hs),
                adjacent_rows(get(source + "self_attn.k_proj.bias", (nkv * hs,)), nkv, hs),
                get(source + "self_attn.v_proj.bias", (nkv * hs,))])
        state[block + "attn.c_proj.weight"] = get(source + "self_attn.o_proj.weight", (C, nh * hs))
        if config.bias:
            state[block + "attn.c_proj.bias"] = get(source + "self_attn.o_proj.bias", (C,))
        if config.qk_norm:
            state[block + "attn.q_norm.weight"] = adjacent_rows(get(source + "self_attn.q_norm.weight", (hs,)), 1, hs)
            state[block + "attn.k_norm.weight"] = adjacent_rows(get(source + "self_attn.k_norm.weight", (hs,)), 1, hs)
        state[block + "mlp.w1.weight"] = get(source + "mlp.gate_proj.weight", (hidden, C))
        state[block + "mlp.w2.weight"] = get(source + "mlp.down_proj.weight", (C, hidden))
        state[block + "mlp.w3.weight"] = get(source + "mlp.up_proj.weight", (hidden, C))
        state[block + "ln_1.weight"] = get(source + "input_layernorm.weight", (C,))
        if post_norms:
            state[block + "ln_attn_out.weight"] = get(source + "post_attention_layernorm.weight", (C,))
            state[block + "ln_2.weight"] = get(source + "pre_feedforward_layernorm.weight", (C,))
            state[block + "ln_mlp_out.weight"] = get(source + "post_feedforward_layernorm.weight", (C,))
        else:
            state[block + "ln_2.weight"] = get(source + "post_attention_layernorm.weight", (C,))
    return state


FAMILIES = tuple(Family(name, (kind,), qwen_values, llama_names_state) for name, kind in NAMES.items())
FOLDER_LAYOUTS = tuple(folder_layout(family) for family in FAMILIES)
