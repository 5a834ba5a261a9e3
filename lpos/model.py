"""A small GPT with a pluggable position scheme (nanoGPT's module names and maths).

A GPTConfig (`lpos.model_config`, importable from here) says its shape. Pre-norm blocks (GPT-NeoX's
parallel ones and Gemma's sandwich norms too), `transformer.wte` (tied to `lm_head` unless `tied=False`), the position
scheme's own modules (`transformer.wpe` for the learned table, `transformer.relative_bias` for T5's),
and one attention path that can hand back its weights, because the app draws them
(`lpos.self_attention`). The schemes differ only through their hooks (`lpos.positions.base`):
`embed_parts` asks for the rows they add, the attention's steps for what they do to q, k and the
scores; nothing here compares a scheme's name. `GPT.trace` runs the blocks once and keeps what
analysis reads (weights, residual streams), so no analysis writes the layer loop again. `offset` starts the positions at k instead
of 0, as a cache continuing a sequence does; a `KVCache` keeps each layer's keys and values so
generation reads one new position at a time. `untrained_model` is the one untrained model the app
and the CLI show.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from lpos.corpus import SHIPPED_SEED
from lpos.model_config import GPTConfig
from lpos.self_attention import CausalSelfAttention
from lpos.kv_cache import KVCache, LayerCache
from lpos.meta_device import SkipMetaInit
from lpos.layers import MLP, SwiGLU, dropout, norm_layer
from lpos.positions import REGISTRY, RopeScaling, scheme_info
from lpos.positions.sinusoidal import SINUSOID_SCALE  # noqa: F401  (public here: the sinusoid rows' scale)
from lpos.token_table import SharedTokenTable, initial_token_table

INFERENCE_LOSS_ROWS = 128  # positions scored at once by vocab_loss without gradients


class Trace(NamedTuple):
    hidden: torch.Tensor  # (B, T, C) the final normalised hidden states (what the head reads)
    attention: list[torch.Tensor]  # per layer (B, nh, T, S) weights; empty unless keep_attention
    residual: list[torch.Tensor]  # n_layer + 1 streams (B, T, C): block i's input, then ln_f's; empty unless keep_residual


class EmbedParts(NamedTuple):
    token: torch.Tensor  # (B, T, C) the rows looked up for each token id
    position: torch.Tensor | None  # (T, C) the rows added for each position, None if nothing is added
    total: torch.Tensor  # (B, T, C) what enters the first block


class Block(nn.Module):
    def __init__(self, config: GPTConfig, layer: int = 0):
        super().__init__()
        self.ln_1 = norm_layer(config)
        self.attn = CausalSelfAttention(config, layer)
        self.ln_2 = norm_layer(config)
        self.mlp = MLP(config) if config.mlp == "standard" else SwiGLU(config)
        self.parallel, self.sandwich = config.parallel_block, config.sandwich_norm
        if self.sandwich:  # Gemma normalises what attention and the feed-forward give before each is added
            self.ln_attn_out = norm_layer(config)
            self.ln_mlp_out = norm_layer(config)

    def forward(self, x: torch.Tensor, *, offset: int = 0, rope_scaling: RopeScaling | None = None,
                cache: LayerCache | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        attended, weights = self.attn(self.ln_1(x), offset=offset, rope_scaling=rope_scaling, cache=cache)
        if self.parallel:  # GPT-NeoX: both read x
            return x + attended + self.mlp(self.ln_2(x)), weights
        x = x + (self.ln_attn_out(attended) if self.sandwich else attended)
        fed = self.mlp(self.ln_2(x))
        return x + (self.ln_mlp_out(fed) if self.sandwich else fed), weights


class GPT(nn.Module):
    def __init__(self, config: GPTConfig, *, init_weights: bool = True):
        super().__init__()
        self.config = config
        # Without init_weights (GPT.empty, for a checkpoint to fill) the token table is left as
        # uninitialised memory rather than drawn at random and overwritten.
        modules = dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd,
                             _weight=None if init_weights else torch.empty(config.vocab_size, config.n_embd)),
            drop=dropout(config.dropout),
            h=nn.ModuleList([Block(config, layer) for layer in range(config.n_layer)]),
            ln_f=norm_layer(config),
        )
        self.scheme = scheme_info(config.position).for_config(config)
        modules.update(self.scheme.model_parameters(config))  # a position table, a shared bias table
        self.transformer = nn.ModuleDict(modules)
        for block in self.transformer.h:  # every layer reads the model-wide ones (not registered twice)
            block.attn.__dict__["model_parts"] = self.transformer
        # Empty and tied: the head's weight is replaced by the token table at once, so it is never
        # allocated. (Initialised, it is drawn as before, so the random stream, and with it training,
        # stays what built the shipped checkpoints.)
        with SkipMetaInit():
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=config.head_bias,
                                     device="meta" if config.tied and not init_weights else None)
        if config.tied:
            self.lm_head.weight = self.transformer.wte.weight  # weight tying, as GPT-2
        # ids the output softmax runs over; None = all. Set for checkpoints trained on a corpus
        # vocabulary: every other token gets probability zero.
        self.register_buffer("output_vocab", None, persistent=False)
        if init_weights:
            self.init_weights()

    @classmethod
    def empty(cls, config: GPTConfig) -> GPT:
        """A model of this shape for a checkpoint to fill: its token table is uninitialised memory
        and nothing is drawn twice, so a load skips ~13 million random numbers it would overwrite.
        (The meta device would skip the rest too, but its first copy to the CPU imports sympy: 35 MB.)"""
        return cls(config, init_weights=False)

    def init_weights(self) -> None:
        """GPT-2's initialisation; the token table from its own generator (initial_token_table)."""
        config = self.config
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):  # scaled residual init (GPT-2 paper)
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))
        with torch.no_grad():
            self.transformer.wte.weight.copy_(initial_token_table(config))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_params(self) -> int:
        wte = self.transformer.wte
        shared = wte.base.numel() - wte.rows.numel() if isinstance(wte, SharedTokenTable) else 0
        return sum(p.numel() for p in self.parameters()) + shared

    def share_token_table(self, base: torch.Tensor) -> bool:
        """Hold the token table as a SharedTokenTable over `base` (keeping only output_vocab's
        rows) if this is a tied model with an output vocabulary whose every other row equals
        `base`'s; True if it did. The numbers the model gives do not change."""
        wte = self.transformer.wte
        if not self.config.tied or self.output_vocab is None or isinstance(wte, SharedTokenTable):
            return False
        table = wte.weight.detach()
        if base.shape != table.shape or base.dtype != table.dtype:
            return False
        untouched = torch.ones(len(table), dtype=torch.bool)
        untouched[self.output_vocab] = False
        if not torch.equal(table[untouched], base[untouched]):
            return False
        self.transformer.wte = SharedTokenTable(base, self.output_vocab.clone(), table[self.output_vocab].clone())
        self.lm_head = None  # it was the dense table; output_logits reads the shared one
        return True

    def vocab_rows(self) -> torch.Tensor:
        """The output head's rows of output_vocab's tokens, in its order (V', C); all rows without one."""
        wte = self.transformer.wte
        if isinstance(wte, SharedTokenTable):
            return wte.rows
        weight = self.lm_head.weight  # the token table itself when tied
        return weight if self.output_vocab is None else weight[self.output_vocab]  # no copy of the whole table

    def output_logits(self, h: torch.Tensor) -> torch.Tensor:
        """Logits over the whole vocabulary (..., vocab) from final hidden states (..., C);
        -inf outside output_vocab: the model gives those tokens probability zero."""
        if self.output_vocab is None:
            return self.lm_head(h)
        logits = h.new_full((*h.shape[:-1], self.config.vocab_size), float("-inf"))
        logits[..., self.output_vocab] = self.output_scores(h)
        return logits

    def output_scores(self, h: torch.Tensor) -> torch.Tensor:
        """The logits of only the tokens the model can write (..., V'), in output_vocab's order (all without one)."""
        return self.lm_head(h) if self.output_vocab is None else h @ self.vocab_rows().T + self.vocab_bias()

    def vocab_bias(self) -> torch.Tensor | float:
        """The output head's bias of output_vocab's tokens (V',), or 0.0 when the head has none."""
        bias = self.lm_head.bias if self.lm_head is not None else None
        if bias is None:
            return 0.0
        return bias if self.output_vocab is None else bias[self.output_vocab]

    @property
    def max_input_length(self) -> int | None:
        """The longest input this model takes: a scheme with a table stops at its last row
        (block_size); None when positions go on for ever."""
        return self.scheme.max_length(self.config)

    @property
    def caches_positions(self) -> bool:
        """Whether a key/value cache can continue an input: False when a longer input draws every
        position anew (a table read at random positions)."""
        return not self.config.random_positions

    def check_length(self, T: int, *, offset: int = 0) -> None:
        if offset < 0:
            raise ValueError(f"offset must be 0 or more, got {offset}")
        rows = self.max_input_length
        if rows is not None and offset + T > rows:
            extending = [name for name, scheme in REGISTRY.items() if scheme.max_length(self.config) is None]
            needs = f" from position {offset}, so it needs {offset + T} rows" if offset else ""
            raise ValueError(
                f"the {self.config.position} position table has {rows} rows; this sequence "
                f"has {T} tokens{needs}. Shorten it to {rows} tokens, or use a scheme "
                f"that extends to any length: {', '.join(extending)}"
            )

    def embed_parts(self, idx: torch.Tensor, *, offset: int = 0, positions: torch.Tensor | None = None) -> EmbedParts:
        """Token rows, position rows (or None) and their sum for ids `idx` (B, T) at positions
        offset..offset+T-1 (the scheme's `input_positions`), or at `positions` (T,) or (B, T), as
        training with random positions gives them."""
        T = idx.shape[1]
        self.check_length(T, offset=offset)
        token = self.transformer.wte(idx)  # (B, T, C)
        if self.config.embed_scale != 1.0:
            token = token * self.config.embed_scale  # Gemma's rows enter scaled by sqrt(C)
        if not self.scheme.adds_rows:
            return EmbedParts(token, None, token)
        if positions is None:
            positions = self.scheme.input_positions(self.config, T, offset, idx.device)
        position = self.scheme.position_rows(self, positions).to(token)  # (T, C) or (B, T, C)
        return EmbedParts(token, position, token + position)

    def trace(self, idx: torch.Tensor, *, offset: int = 0, rope_scaling: RopeScaling | None = None,
              cache: KVCache | None = None, keep_attention: bool = True, keep_residual: bool = False,
              positions: torch.Tensor | None = None) -> Trace:
        """Run the blocks on ids `idx` (B, T), keeping what analysis reads: the final normalised
        hidden states, each layer's attention weights (keep_attention; at 1,024 tokens each layer's
        take nh × 4 MB) and each block's input residual stream plus the one entering ln_f
        (keep_residual)."""
        if rope_scaling is not None and not self.scheme.shows("rotation"):
            raise ValueError(f"rope_scaling rescales RoPE's rotations; this model uses {self.config.position!r}")
        past = cache.length if cache is not None else 0
        if cache is not None and past and not self.caches_positions:
            raise ValueError("this model draws every position anew for a longer input: a cache cannot continue it")
        x = self.transformer.drop(self.embed_parts(idx, offset=offset + past, positions=positions).total)  # (B, T, C)
        attention, residual = [], []
        for i, block in enumerate(self.transformer.h):
            if keep_residual:
                residual.append(x)
            x, weights = block(x, offset=offset, rope_scaling=rope_scaling,
                               cache=cache.layers[i] if cache is not None else None)
            if keep_attention:
                attention.append(weights)
        if keep_residual:
            residual.append(x)
        return Trace(self.transformer.ln_f(x), attention, residual)

    def hidden_states(self, idx: torch.Tensor, *, keep_attention: bool = True, offset: int = 0,
                      rope_scaling: RopeScaling | None = None,
                      cache: KVCache | None = None, positions: torch.Tensor | None = None) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Final normalised hidden states (B, T, C) and per-layer attention weights (see `trace`)."""
        traced = self.trace(idx, offset=offset, rope_scaling=rope_scaling, cache=cache, keep_attention=keep_attention,
                            positions=positions)
        return traced.hidden, traced.attention

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None, return_attention: bool = False, *,
                offset: int = 0, rope_scaling: RopeScaling | None = None, cache: KVCache | None = None):
        """Logits for every position (B, T, vocab); loss if targets are given.

        offset: every position shifted by it (learned: offset + T must fit the table);
        rope_scaling: a RoPE scaling method applied at inference (rope models only);
        cache: keys and values of earlier tokens, extended by these (see KVCache).
        """
        h, attention = self.hidden_states(idx, keep_attention=return_attention, offset=offset,
                                          rope_scaling=rope_scaling, cache=cache)
        logits = self.output_logits(h)  # (B, T, vocab)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1)
        if return_attention:
            return logits, loss, attention
        return logits, loss

    def vocab_loss(self, idx: torch.Tensor, targets: torch.Tensor, reduction: str = "mean", *, offset: int = 0,
                   rope_scaling: RopeScaling | None = None, positions: torch.Tensor | None = None) -> torch.Tensor:
        """Cross-entropy of next-token `targets` (token ids) with the softmax over
        `output_vocab` only, without building full-vocabulary logits (what training and
        evaluation use; equal to `forward`'s loss). Targets outside the vocabulary are left
        out of the mean (NaN with reduction="none"): the model gives them probability zero.
        """
        h, _ = self.hidden_states(idx, keep_attention=False, offset=offset, rope_scaling=rope_scaling, positions=positions)
        vocab = self.output_vocab if self.output_vocab is not None else torch.arange(self.config.vocab_size)
        lookup = torch.full((self.config.vocab_size,), -1, dtype=torch.long, device=idx.device)
        lookup[vocab] = torch.arange(len(vocab), device=idx.device)
        index = lookup[targets].reshape(-1)  # position of each target in the vocabulary
        rows = self.vocab_rows()  # (V', C)
        flat = h.reshape(-1, h.size(-1))  # (B*T, C)
        # Without gradients, score a few hundred positions at a time: 1,024 positions over all
        # 50,257 tokens would hold ~400 MB of logits at once. Training keeps one matmul.
        chunk = flat.size(0) if torch.is_grad_enabled() else INFERENCE_LOSS_ROWS
        bias = self.vocab_bias()
        losses = torch.cat([F.cross_entropy(flat[i : i + chunk] @ rows.T + bias, index[i : i + chunk].clamp(min=0), reduction="none")
                            for i in range(0, flat.size(0), chunk)])  # (B*T,)
        losses = losses.masked_fill(index < 0, float("nan"))
        return losses.nanmean() if reduction == "mean" else losses.view(targets.shape)


def untrained_model(scheme: str) -> GPT:
    """The untrained model of a scheme that the app and the CLI show: the shipped models' shape and
    token table (init_seed SHIPPED_SEED), every other weight drawn after torch.manual_seed(0).
    The global random state is left as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return GPT(GPTConfig(position=scheme, init_seed=SHIPPED_SEED)).eval()


def seeded_model(config: GPTConfig, *, seed: int, wpe_init_std: float) -> GPT:
    """The model as `python -m lpos train` starts it: every weight drawn after torch.manual_seed(seed)
    (the global random state is left there, as training continues from it), then a learned table
    redrawn at N(0, wpe_init_std). lpos.analysis.coverage rebuilds a shipped model's step-0
    table with it."""
    torch.manual_seed(seed)
    model = GPT(config)
    model.scheme.initialise(model, table_std=wpe_init_std)
    return model
