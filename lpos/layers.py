"""The norms and feed-forwards a block is built from: GPT-2's LayerNorm and MLP, Llama's RMSNorm
and SwiGLU.

A Llama (llama2.c, Meta's Llama, Hugging Face's LlamaForCausalLM) is lpos's GPT with
`norm="rmsnorm"`, `mlp="swiglu"`, no biases and `position="rope"`; grouped-query attention
(`n_kv_head` key/value heads shared by groups of query heads) lives in the one attention path
(`lpos.self_attention`), and RoPE's base is `GPTConfig.rope_base`. The module names follow llama2.c
inside lpos's blocks (`mlp.w1`, `mlp.w2`, `mlp.w3`), so a learner who read llama2.c finds them.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from lpos.positions import scheme_info

NORMS = ("layernorm", "rmsnorm")
MLPS = ("standard", "swiglu", "geglu")  # standard: GPT-2's c_fc, activation, c_proj; swiglu: Llama's w1, w2, w3; geglu: Gemma's


class LayerNorm(nn.Module):
    """LayerNorm with an optional bias (nanoGPT)."""

    def __init__(self, ndim: int, bias: bool, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.eps)


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight: no centring and no bias (Zhang & Sennrich 2019).
    Computed in float32 whatever the input, as Llama's reference code does."""

    def __init__(self, ndim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)  # (..., C)
        return (normed * self.weight.float()).to(x.dtype)


def dropout(p: float) -> nn.Module:
    """nn.Dropout(p), or nn.Identity when p is 0 (every model lpos trains): the same numbers, one call less per use."""
    return nn.Dropout(p) if p > 0 else nn.Identity()


def _as(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """`tensor` cast to `dtype`, or itself when it is of that dtype already (no call: a token's step reads dozens)."""
    return tensor if tensor.dtype == dtype else tensor.to(dtype)


class Linear(nn.Linear):
    """nn.Linear whose weights may be held in a lower precision than what it reads (a bfloat16 or float16
    Hugging Face file kept as stored): they are cast to the input's dtype as it reads, one matrix at a time,
    so every activation stays float32. Float32 weights are used as they are."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, _as(self.weight, x.dtype), None if self.bias is None else _as(self.bias, x.dtype))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        hidden = config.mlp_hidden or 4 * config.n_embd
        self.c_fc = Linear(config.n_embd, hidden, bias=config.bias)
        self.gelu = (nn.ReLU() if config.activation == "relu"  # Karpathy's lecture; the name keeps nanoGPT's keys
                     else nn.GELU(approximate="tanh" if config.activation == "gelu_tanh" else "none"))
        self.c_proj = Linear(hidden, config.n_embd, bias=config.bias)
        self.dropout = dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class SwiGLU(nn.Module):
    """Llama's feed-forward: w2(silu(w1 x) * w3 x) (Shazeer 2020), no biases; the hidden size
    (`mlp_hidden`) is the file's (llama2.c rounds 8/3 of the width up to a multiple of 32 or 256).
    With `mlp="geglu"` the gate is GELU's tanh approximation instead of silu (Gemma)."""

    def __init__(self, config):  # a GPTConfig: n_embd, mlp_hidden, mlp, dropout
        super().__init__()
        self.gate = nn.GELU(approximate="tanh") if config.mlp == "geglu" else nn.SiLU()
        hidden = config.mlp_hidden or 4 * config.n_embd
        self.w1 = Linear(config.n_embd, hidden, bias=False)  # the gate
        self.w2 = Linear(hidden, config.n_embd, bias=False)  # back to the width
        self.w3 = Linear(config.n_embd, hidden, bias=False)  # the value the gate scales
        self.dropout = dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.w2(self.gate(self.w1(x)) * self.w3(x)))


def norm_layer(config) -> nn.Module:
    """A block's or the final norm of a GPTConfig: LayerNorm (GPT-2) or RMSNorm (Llama)."""
    if config.norm == "rmsnorm":
        return RMSNorm(config.n_embd, config.norm_eps)
    return LayerNorm(config.n_embd, bias=config.bias, eps=config.norm_eps)


def check_block_fields(config) -> None:
    """ValueError for a GPTConfig whose norm, feed-forward or key/value head count is unusable."""
    if config.norm not in NORMS:
        raise ValueError(f"unknown norm {config.norm!r}; choose one of {list(NORMS)}")
    if config.mlp not in MLPS:
        raise ValueError(f"unknown mlp {config.mlp!r}; choose one of {list(MLPS)}")
    if config.mlp_hidden is not None and config.mlp_hidden < 1:
        raise ValueError(f"mlp_hidden must be a positive number, got {config.mlp_hidden}")
    if not config.norm_eps > 0:
        raise ValueError(f"norm_eps must be positive, got {config.norm_eps}")
    if not config.rope_base > 1:
        raise ValueError(f"rope_base must be over 1, got {config.rope_base}")
    kv = config.n_kv_head
    if kv is not None and (kv < 1 or config.n_head % kv):
        raise ValueError(f"n_kv_head ({kv}) must divide n_head ({config.n_head})")
    if config.head_dim is not None and config.head_dim < 1:
        raise ValueError(f"head_dim must be a positive number, got {config.head_dim}")
    if config.parallel_block and config.sandwich_norm:
        raise ValueError("a block is parallel (GPT-NeoX) or has sandwich norms (Gemma), not both")
    if any(w < 0 for w in config.sliding_windows):
        raise ValueError(f"sliding_windows are 0 (every key) or a positive length, got {config.sliding_windows}")


def parameter_count(config) -> int:
    """Weights of a GPTConfig's model, counted from its shapes before anything is built (the
    memory check of a file that declares its sizes): the token table(s), the blocks and what the
    position scheme adds (a learned table, a bias table)."""
    C, hs = config.n_embd, config.head_size
    q_width, kv_width = config.n_head * hs, (config.n_kv_head or config.n_head) * hs
    attention = C * (q_width + 2 * kv_width) + q_width * C
    hidden = config.mlp_hidden or 4 * C
    mlp = (2 if config.mlp == "standard" else 3) * C * hidden
    table = (1 if config.tied else 2) * config.vocab_size * C
    return table + config.n_layer * (attention + mlp) + scheme_info(config.position).parameter_count(config)
