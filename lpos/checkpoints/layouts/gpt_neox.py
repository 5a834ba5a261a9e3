"""Hugging Face GPT-NeoX folders (EleutherAI's Pythia, 14m to 12b): partial RoPE in a parallel block.

A GPT-NeoX block is GPT-2's (LayerNorm with biases, a GELU feed-forward with biases, biased attention) with
three differences lpos reproduces through GPTConfig:
- RoPE turns only the first `rotary_pct` (transformers 5: `partial_rotary_factor`) of each head's query and
  key columns, a quarter in Pythia, with frequencies over those columns alone: scheme rope-partial, `rope_share`;
- attention and the feed-forward both read the block's input and both add to it (`use_parallel_residual`):
  `parallel_block`;
- the output head is a matrix of its own (`embed_out`), not the token table: `tied=False`.

`query_key_value` holds each head's query, key and value rows together (head 0's q, k, v, then head 1's, ...);
they are regrouped into c_attn's query rows, key rows, value rows, and the rotated quarter of each head's
query and key rows put in adjacent pairs.
"""
from __future__ import annotations

import torch

from lpos.checkpoints.errors import CheckpointError
from lpos.checkpoints.layouts.hf_folder import Family, Tensors, adjacent_rows, folder_layout, shaped, whole
from lpos.checkpoints.layouts.hf_rope import rope_values
from lpos.checkpoints.layouts.llama import as_float
from lpos.model import GPTConfig
from lpos.positions import scheme_info

ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}  # hidden_act -> lpos's
PYTHIA_SHARE = 0.25  # transformers' rotary_pct when config.json leaves it out


def neox_values(hf: dict, label: str) -> dict:
    activation = ACTIVATIONS.get(hf.get("hidden_act", "gelu"))
    if activation is None:
        raise CheckpointError(f"{label} uses hidden_act {str(hf.get('hidden_act'))[:20]!r}; lpos reads GPT-NeoX with "
                              f"{', '.join(ACTIVATIONS)}")
    if not hf.get("attention_bias", True):
        raise CheckpointError(f"{label} has no attention biases (attention_bias false); lpos reads GPT-NeoX with them")
    n_layer = whole(hf.get("num_hidden_layers"), "num_hidden_layers", label)
    heads = whole(hf.get("num_attention_heads"), "num_attention_heads", label)
    rope = rope_values(hf, ["full_attention"] * n_layer, label=label, partial=True, default_share=PYTHIA_SHARE)
    return dict(
        vocab_size=hf.get("vocab_size"), n_embd=hf.get("hidden_size"), mlp_hidden=hf.get("intermediate_size"),
        n_layer=n_layer, n_head=heads, n_kv_head=heads, block_size=hf.get("max_position_embeddings", 2048),
        norm_eps=as_float(hf.get("layer_norm_eps", 1e-5)), tied=bool(hf.get("tie_word_embeddings", False)),
        position="rope-partial" if "rope_share" in rope else "rope", activation=activation, bias=True,
        parallel_block=bool(hf.get("use_parallel_residual", True)), **rope)


def neox_state(config: GPTConfig, fetch: Tensors, label: str) -> dict:
    C, nh, hs, hidden, V = config.n_embd, config.n_head, config.head_size, config.mlp_hidden, config.vocab_size
    rotated = scheme_info(config.position).for_config(config).rotated_width(hs)

    def get(key: str, shape: tuple[int, ...]) -> torch.Tensor:
        return shaped(fetch, "gpt_neox." + key, shape, label)

    def regrouped(fused: torch.Tensor) -> torch.Tensor:
        """(nh * 3 * hs, ...) head by head -> (3 * nh * hs, ...) query rows, key rows, value rows."""
        q, k, v = fused.reshape(nh, 3, hs, -1).unbind(1)  # (nh, hs, ...) each
        q, k, v = (part.reshape(nh * hs, *fused.shape[1:]) for part in (q, k, v))
        return torch.cat([adjacent_rows(q, nh, rotated), adjacent_rows(k, nh, rotated), v])

    head = "embed_out.weight" if "embed_out.weight" in fetch else "lm_head.weight"  # Pythia's name, or transformers 5's
    state = {"transformer.wte.weight": get("embed_in.weight", (V, C)),
             "transformer.ln_f.weight": get("final_layer_norm.weight", (C,)),
             "transformer.ln_f.bias": get("final_layer_norm.bias", (C,))}
    if not config.tied:
        state["lm_head.weight"] = shaped(fetch, head, (V, C), label)
    for i in range(config.n_layer):
        block, source = f"transformer.h.{i}.", f"layers.{i}."
        state[block + "attn.c_attn.weight"] = regrouped(get(source + "attention.query_key_value.weight", (3 * C, C)))
        state[block + "attn.c_attn.bias"] = regrouped(get(source + "attention.query_key_value.bias", (3 * C,)))
        state[block + "attn.c_proj.weight"] = get(source + "attention.dense.weight", (C, C))
        state[block + "attn.c_proj.bias"] = get(source + "attention.dense.bias", (C,))
        state[block + "mlp.c_fc.weight"] = get(source + "mlp.dense_h_to_4h.weight", (hidden, C))
        state[block + "mlp.c_fc.bias"] = get(source + "mlp.dense_h_to_4h.bias", (hidden,))
        state[block + "mlp.c_proj.weight"] = get(source + "mlp.dense_4h_to_h.weight", (C, hidden))
        state[block + "mlp.c_proj.bias"] = get(source + "mlp.dense_4h_to_h.bias", (C,))
        for theirs, ours in (("input_layernorm", "ln_1"), ("post_attention_layernorm", "ln_2")):
            state[block + ours + ".weight"] = get(source + theirs + ".weight", (C,))
            state[block + ours + ".bias"] = get(source + theirs + ".bias", (C,))
    return state


FOLDER_LAYOUTS = (folder_layout(Family("GPT-NeoX", ("gpt_neox",), neox_values, neox_state)),)
