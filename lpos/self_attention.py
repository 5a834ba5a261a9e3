"""The one attention path of every block, as named steps analysis can call.

`project` gives queries, keys and values (the scheme's `rotate` hook: RoPE turns q and k by their
positions), `scores` the pre-softmax scores (scaled dot products, the scheme's `bias` hook, the causal
mask, the scheme's `score_term` hook), and `forward`
composes them with a cache, the softmax and the output projection. Pages that show queries, keys,
scores or weights call these steps, so a change here changes every view with it.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from lpos.kv_cache import LayerCache
from lpos.layers import Linear, RMSNorm, dropout
from lpos.positions import PositionScheme, RopeScaling, scheme_info


class CausalSelfAttention(nn.Module):
    """The one attention path: `project` (queries, keys, values; the scheme may rotate q and k),
    `scores` (scaled dot products, the scheme's bias and score term, the causal mask), then softmax and
    the output projection.
    Analysis calls the same steps, so it shows exactly the numbers the model computes."""

    def __init__(self, config, layer: int = 0):  # a GPTConfig: n_embd, n_head, n_kv_head, bias, dropout, position, rope_base
        super().__init__()
        self.layer = layer  # which block this is, from 0 (a scheme may act in some layers only)
        self.n_head = config.n_head
        self.n_kv_head = config.n_kv_head or config.n_head  # grouped-query attention: fewer key/value heads
        self.head_size = config.head_size
        q_width, kv_width = self.n_head * self.head_size, self.n_kv_head * self.head_size
        # one fused projection: the query rows, then the key rows, then the value rows
        qkv_bias = config.bias if config.qkv_bias is None else config.qkv_bias  # Karpathy's lecture: none here only
        self.c_attn = Linear(config.n_embd, q_width + 2 * kv_width, bias=qkv_bias)
        self.c_proj = Linear(q_width, config.n_embd, bias=config.bias)
        if config.qk_norm:  # Qwen3, Gemma 3: each head's query and key normalised before they turn
            self.q_norm = RMSNorm(self.head_size, config.norm_eps)
            self.k_norm = RMSNorm(self.head_size, config.norm_eps)
        self.attn_dropout = dropout(config.dropout)
        self.resid_dropout = dropout(config.dropout)
        # this block's RoPE: its base, the rescaling it was trained with, and how far back a query sees (0: every key)
        self.rope_base = config.layer_bases[layer] if config.layer_bases else config.rope_base
        self.trained_scaling = config.layer_scalings[layer] if config.layer_scalings else None
        self.window = config.sliding_windows[layer] if config.sliding_windows else 0
        self.config = config
        self.scheme = scheme_info(config.position).for_config(config)
        for name, module in self.scheme.layer_parameters(config).items():  # a bias function, a count table
            self.add_module(name, module)
        # the model-wide modules of the scheme (a bias table every layer shares), set by GPT; not registered here
        self.__dict__["model_parts"] = {}

    def project(self, x: torch.Tensor, *, positions: torch.Tensor | None,
                rope_scaling: RopeScaling | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys and values (B, nh, T, hs) of the normalised input x (B, T, C) whose tokens
        sit at `positions` (T,). A rope model's q and k come back rotated, by `rope_scaling`'s frequencies if it
        rescales, else by those the block was trained with (`scaling_as_trained`); positions=None leaves
        them as the heads project them, before any rotation. With grouped-query attention each
        key/value head serves n_head / n_kv_head query heads in a row (`key_head`), and k and v
        come back repeated to one per query head, so every score and weight has a head of its own."""
        B, T, C = x.shape
        nh, nkv, hs = self.n_head, self.n_kv_head, self.head_size
        q, k, v = self.c_attn(x).split([nh * hs, nkv * hs, nkv * hs], dim=2)
        q = q.view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, nkv, hs).transpose(1, 2)  # (B, nkv, T, hs)
        v = v.view(B, T, nkv, hs).transpose(1, 2)  # (B, nkv, T, hs)
        if self.config.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        if positions is not None:
            rescaled = rope_scaling is not None and rope_scaling.record.rescales  # "as trained" keeps the model's own
            scaling = rope_scaling if rescaled else self.scaling_as_trained(positions)
            q, k = self.scheme.rotate(self, q, k, positions, scaling)
        if nkv != nh:
            k = k.repeat_interleave(nh // nkv, dim=1)  # (B, nh, T, hs): key head h // group for query head h
            v = v.repeat_interleave(nh // nkv, dim=1)  # (B, nh, T, hs)
        return q, k, v

    def scaling_as_trained(self, positions: torch.Tensor) -> RopeScaling | None:
        """The rescaling this block's rotation was trained with, for tokens at `positions`: its config's
        (`trained_scaling`), or dynamic NTK's once the input reaches past block_size (the base grown for that
        length, as transformers recomputes it), or None."""
        factor, trained_length = self.config.dynamic_factor, self.config.block_size
        if factor is None:
            return self.trained_scaling
        length = int(positions.max()) + 1
        if length <= trained_length:
            return self.trained_scaling
        return RopeScaling("ntk", factor * length / trained_length - (factor - 1), trained_length)

    def key_head(self, head: int) -> int:
        """The key/value head query head `head` reads (itself unless attention is grouped)."""
        return head // (self.n_head // self.n_kv_head)

    def scores(self, q: torch.Tensor, k: torch.Tensor, *, first_query: int = 0, offset: int = 0,
               scheme: PositionScheme | None = None) -> torch.Tensor:
        """Pre-softmax scores (B, nh, T, S) of queries q (B, nh, T, hs) at positions
        first_query..first_query+T-1 against keys k (B, nh, S, hs) at 0..S-1: q·k / sqrt(hs), plus the
        scheme's bias, -inf where a key comes after its query, plus the scheme's score term (computed
        from those masked scores). `scheme` is whose bias and term are added: the model's own unless given
        (`lpos.positions.NO_POSITIONS` shows the scores without them, `ALIBI` what ALiBi would add). `offset` shifts
        every position (keys at offset..offset+S-1), for a bias that reads where the query sits."""
        scheme = self.scheme if scheme is None else scheme
        T, S, hs = q.shape[2], k.shape[2], q.shape[3]
        if self.config.query_scale is None:
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(hs)  # (B, nh, T, S)
        else:
            scores = (q @ k.transpose(-2, -1)) * self.config.query_scale  # (B, nh, T, S)
        bias = scheme.bias(self, first_query, T, S, offset=offset)
        if bias is not None:
            scores = scores + bias.to(scores)  # (nh, T, S) over B
        if first_query < S - 1 or self.window and first_query + T > self.window:  # a key is hidden from a query
            causal = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(diagonal=first_query)
            if self.window:  # a sliding window: keys `window` or more positions back are hidden too
                causal = causal.triu(diagonal=first_query - self.window + 1)
            scores = scores.masked_fill(~causal, float("-inf"))
        term = scheme.score_term(self, scores, q)
        return scores if term is None else scores + term  # -inf stays -inf

    def forward(self, x: torch.Tensor, *, offset: int = 0, rope_scaling: RopeScaling | None = None,
                cache: LayerCache | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns the attention output (B, T, C) and the weights (B, nh, T, S): S keys, the T new
        ones after any in `cache`. The new tokens sit at positions offset + cached + (0..T-1)."""
        B, T, C = x.shape
        past = cache.length if cache is not None else 0
        positions = torch.arange(offset + past, offset + past + T, device=x.device)  # (T,)
        q, k, v = self.project(x, positions=positions, rope_scaling=rope_scaling)  # (B, nh, T, hs) each
        if cache is not None:
            k, v = cache.extend(k, v)  # (B, nh, S, hs), S = past + T
        weights = F.softmax(self.scores(q, k, first_query=past, offset=offset), dim=-1)  # (B, nh, T, S)
        y = self.attn_dropout(weights) @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, self.n_head * self.head_size)  # re-assemble heads
        return self.resid_dropout(self.c_proj(y)), weights
