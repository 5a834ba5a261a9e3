"""Hugging Face Gemma 3 folders: `gemma3_text` (Gemma-3-270m, 1b) and the text model of a multimodal `gemma3`.

Gemma 3's block is lpos's Llama block with Gemma's practice, each read from config.json into GPTConfig:
- local and global layers: five `sliding_attention` layers (a window of `sliding_window` keys, RoPE base
  10,000, `rope_local_base_freq`) to one `full_attention` layer (every key, base 1,000,000, `rope_theta`,
  the one a `rope_scaling` rescales): `sliding_windows`, `layer_bases`, `layer_scalings`;
- an RMSNorm over each head's queries and keys before they turn (`qk_norm`), heads of their own size
  (`head_dim`, 256) and scores scaled by `query_pre_attn_scalar`^-1/2 (`query_scale`);
- four norms per block, the outputs of attention and of the feed-forward normalised before each adds
  (`sandwich_norm`); a GELU-gated feed-forward (`mlp="geglu"`);
- token rows scaled by sqrt(width) as they enter (`embed_scale`), the head tied to the table.
Gemma's RMSNorm multiplies by (1 + weight): lpos's multiplies by its weight, so 1 is added as it is read.
"""
from __future__ import annotations

from lpos.checkpoints.errors import CheckpointError
from lpos.checkpoints.layouts.hf_folder import Family, Tensors, folder_layout, layer_kinds, whole, windows
from lpos.checkpoints.layouts.hf_rope import rope_values
from lpos.checkpoints.layouts.llama import as_float
from lpos.checkpoints.layouts.qwen import llama_names_state
from lpos.model import GPTConfig

BASES = {"full_attention": 1_000_000.0, "sliding_attention": 10_000.0}  # Gemma 3's defaults (global, local)
LEGACY = {"full_attention": (("rope_theta",), True), "sliding_attention": (("rope_local_base_freq",), False)}
PREFIXES = ("model.", "model.language_model.", "language_model.model.")  # text-only, multimodal (two generations)
GELU_TANH = ("gelu_pytorch_tanh", "gelu_new")


def gemma_values(hf: dict, label: str) -> dict:
    activation = hf.get("hidden_activation") or hf.get("hidden_act") or "gelu_pytorch_tanh"
    if activation not in GELU_TANH:
        raise CheckpointError(f"{label} uses hidden_activation {str(activation)[:20]!r}; lpos reads Gemma 3 with gelu_pytorch_tanh")
    for setting in ("final_logit_softcapping", "attn_logit_softcapping", "use_bidirectional_attention", "attention_bias"):
        if hf.get(setting):
            raise CheckpointError(f"{label} sets {setting}, which lpos's attention does not reproduce")
    n_layer = whole(hf.get("num_hidden_layers"), "num_hidden_layers", label)
    heads = whole(hf.get("num_attention_heads"), "num_attention_heads", label)
    pattern = hf.get("sliding_window_pattern", hf.get("_sliding_window_pattern", 6))
    kinds = layer_kinds(hf, n_layer, lambda i: "sliding_attention" if (i + 1) % pattern else "full_attention", label)
    scalar = hf.get("query_pre_attn_scalar", 256)
    if not isinstance(scalar, (int, float)) or isinstance(scalar, bool) or not scalar > 0:
        raise CheckpointError(f"{label} declares query_pre_attn_scalar {str(scalar)[:20]}, not a positive number")
    width = whole(hf.get("hidden_size"), "hidden_size", label)
    return dict(
        vocab_size=hf.get("vocab_size"), n_embd=width, mlp_hidden=hf.get("intermediate_size"), n_layer=n_layer,
        n_head=heads, n_kv_head=hf.get("num_key_value_heads") or heads, head_dim=hf.get("head_dim", 256),
        block_size=hf.get("max_position_embeddings", 131072), norm_eps=as_float(hf.get("rms_norm_eps", 1e-6)),
        tied=bool(hf.get("tie_word_embeddings", True)), position="rope", norm="rmsnorm", mlp="geglu", bias=False,
        qk_norm=True, sandwich_norm=True, query_scale=float(scalar) ** -0.5, embed_scale=width ** 0.5,
        **windows(hf, kinds, label),
        **rope_values(hf, kinds, label=label, default_bases=BASES, legacy=LEGACY))


def gemma_state(config: GPTConfig, tensors: Tensors, label: str) -> dict:
    prefix = next((p for p in PREFIXES if p + "embed_tokens.weight" in tensors), PREFIXES[0])
    state = llama_names_state(config, tensors, label, prefix=prefix, post_norms=True)
    for key in state:
        if key.endswith(("norm.weight", "ln_f.weight")) or ".ln_" in key:
            state[key] = 1.0 + state[key]  # Gemma's RMSNorm scales by 1 + weight
    return state


FOLDER_LAYOUTS = (folder_layout(Family("Gemma 3", ("gemma3_text",), gemma_values, gemma_state)),)
