"""GPTConfig: every size and choice of a model, one typed field each, never changed after construction.

The fields a shipped lpos model uses come first (GPT-2's block and a position scheme); then what Llama-shaped
and today's Hugging Face families need (RMSNorm, SwiGLU, grouped-query attention, a head size of their own,
q/k norms, parallel or sandwich blocks), and RoPE as a real model's configuration sets it per block (its base,
its rescaling as trained, layers without rotation, a sliding window). `lpos.model` builds a GPT from it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from lpos.layers import check_block_fields
from lpos.positions import DEFAULT_SCHEME, RopeScaling, check_scheme, scheme_info


@dataclass(frozen=True)
class GPTConfig:
    vocab_size: int = 50257  # GPT-2 BPE
    block_size: int = 128  # rows of the learned table; other schemes run at any length
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128  # the width the app draws
    dropout: float = 0.0
    bias: bool = True  # biases in Linear and LayerNorm, as GPT-2
    position: str = DEFAULT_SCHEME  # a registered scheme (lpos.positions.SCHEMES)
    activation: str = "gelu"  # gelu (exact) | gelu_tanh (GPT-2 checkpoints)
    init_seed: int = 0  # seeds the token table, so rows training never touches can be rebuilt
    tied: bool = True  # the output head is the token table (GPT-2); False: lm_head has rows of its own
    norm: str = "layernorm"  # layernorm (GPT-2) | rmsnorm (Llama)
    norm_eps: float = 1e-5  # the norms' epsilon (Llama: the file's norm_eps / rms_norm_eps)
    mlp: str = "standard"  # standard: c_fc, activation, c_proj (GPT-2) | swiglu: w1, w2, w3 (Llama)
    mlp_hidden: int | None = None  # the feed-forward's hidden size; None: 4 * n_embd
    n_kv_head: int | None = None  # key/value heads, each shared by n_head / n_kv_head query heads; None: n_head
    rope_base: float = 10000.0  # RoPE's base: pair i turns by base^(-2i/hs) per position (Llama: rope_theta)
    qkv_bias: bool | None = None  # biases in the q/k/v projection; None: follow `bias` (Karpathy's lecture: False)
    head_bias: bool = False  # the output head adds a bias per token (Karpathy's lecture's lm_head); needs tied=False
    # what the block families of Hugging Face models need (lpos.checkpoints.layouts: Qwen, GPT-NeoX, SmolLM3, Gemma 3)
    head_dim: int | None = None  # columns of each head; None: n_embd // n_head (Qwen3 and Gemma 3 say their own)
    qk_norm: bool = False  # an RMSNorm over each head's query and key columns before the rotation (Qwen3, Gemma 3)
    query_scale: float | None = None  # scores are q·k times this; None: 1/sqrt(head size) (Gemma: query_pre_attn_scalar)
    parallel_block: bool = False  # attention and feed-forward read the same input and both add to it (GPT-NeoX)
    sandwich_norm: bool = False  # a norm also on attention's and the feed-forward's outputs, before each adds (Gemma)
    embed_scale: float = 1.0  # the token rows are multiplied by it before the first block (Gemma: sqrt(n_embd))
    # RoPE as a real model's configuration sets it; each left empty, the scheme's own rule holds
    rope_share: float | None = None  # the share of each head's first columns that rotate (GPT-NeoX's rotary_pct)
    nope_layers: tuple[int, ...] = ()  # blocks that rotate nothing (SmolLM3's no_rope_layers)
    layer_bases: tuple[float, ...] = ()  # each block's RoPE base; (): rope_base in every block (Gemma 3: local, global)
    layer_scalings: tuple[RopeScaling | None, ...] = ()  # each block's rescaling as trained (the config's rope_scaling)
    dynamic_factor: float | None = None  # dynamic NTK: past block_size positions the base grows with the input
    sliding_windows: tuple[int, ...] = ()  # each block's window: a query sees keys less than this far back; 0: all
    # what some schemes need (lpos.positions: each module says what it reads)
    num_buckets: int = 32  # t5: distance buckets, half of them exact
    max_distance: int = 128  # t5: the last bucket starts here
    npos_max: int = 128  # cope: rows of each layer's count table
    random_positions: bool = False  # learned: read the table at a sorted random subset of its rows (Ruoss et al. 2023)
    position_seed: int = 0  # learned with random_positions: the generator of the evaluation positions

    def __post_init__(self) -> None:
        check_scheme(self.position)
        if self.activation not in ("gelu", "gelu_tanh", "relu"):
            raise ValueError(f"unknown activation {self.activation!r}; choose 'gelu', 'gelu_tanh' or 'relu'")
        if self.head_bias and self.tied:
            raise ValueError("head_bias needs an untied head (tied=False)")
        if self.head_dim is None and self.n_embd % self.n_head:
            raise ValueError(f"n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})")
        for field in ("layer_bases", "layer_scalings", "sliding_windows"):
            if getattr(self, field) and len(getattr(self, field)) != self.n_layer:
                raise ValueError(f"{field} needs one value per block ({self.n_layer}), got {len(getattr(self, field))}")
        scheme_info(self.position).check_config(self)
        check_block_fields(self)

    @property
    def head_size(self) -> int:
        """Columns of each attention head."""
        return self.head_dim or self.n_embd // self.n_head

    @classmethod
    def from_dict(cls, values: dict) -> GPTConfig:
        """A config from its fields as `dataclasses.asdict` writes them (tuples may come back as lists, a
        block's rescaling as a dict)."""
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in values.items() if k in names}
        for field in ("nope_layers", "layer_bases", "sliding_windows"):
            if isinstance(values.get(field), list):
                values[field] = tuple(values[field])
        if isinstance(values.get("layer_scalings"), (list, tuple)):
            values["layer_scalings"] = tuple(RopeScaling(**s) if isinstance(s, dict) else s
                                             for s in values["layer_scalings"])
        return cls(**values)
