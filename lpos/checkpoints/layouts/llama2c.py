"""Karpathy's llama2.c: the `ckpt.pt` its train.py saves and the `model.bin` its export.py writes.

| layout | recognised by |
|---|---|
| `ckpt.pt` | "model" beside "model_args" (dim, n_layers, n_heads, n_kv_heads, vocab_size, max_seq_len, ...), weights named `tok_embeddings`, `layers.N.attention.wq` ... (the optimizer is dropped unread) |
| `model.bin` version 1 | uint32 magic 0x616b3432 ("ak42"), int32 version 1, seven int32 sizes, a byte saying whether the head is shared, zeros up to 256 bytes; then float32 weights: the norms, the token table, wq, wk, wv, wo, w1, w2, w3 (each over all layers), the head if not shared |
| `model.bin` version 0 (legacy, `stories15M.bin`) | seven int32 sizes (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size: negative when the head is not shared, max_seq_len); then float32: token table, attention norms, wq, wk, wv, wo, ffn norms, w1, w2, w3, final norm, RoPE's cos and sin tables (max_seq_len x head_size/2 each; lpos computes its own), the head if not shared |

A `model.bin` is raw bytes: it is read with numpy from a memory map, never unpickled, and every
size in its header is checked (each a whole number, the heads dividing the width, the float32
weights under the memory cap, the file exactly as long as the header says) before any weight is read.
llama2.c uses RoPE base 10,000 and RMSNorm epsilon 1e-5.
"""
from __future__ import annotations

import math
import struct
from pathlib import Path

import numpy as np
import torch

from lpos.checkpoints.errors import CheckpointError, as_dict
from lpos.checkpoints.layouts.llama import as_float, assemble, check_sizes, llama_values, tokenizer_beside
from lpos.checkpoints.layouts.recognised import FileLayout, Recognised, key_name, number

MAGIC = 0x616B3432  # "ak42"
HEADER_V1 = 256
LEGACY_HEADER = 7 * 4
WRAPPERS = ("_orig_mod.", "module.")
META_NUMBERS = ("iter_num", "best_val_loss")


def is_llama2c_ckpt(payload: dict) -> bool:
    model = payload.get("model")
    return "model_args" in payload and isinstance(model, dict) and any(
        str(key).removeprefix("_orig_mod.").removeprefix("module.") == "tok_embeddings.weight" for key in model)


def read_llama2c_ckpt(payload: dict, label: str, max_bytes: int = 1 << 62) -> Recognised:
    args = as_dict(payload["model_args"], label, "model_args")
    state = {}
    for key, tensor in as_dict(payload["model"], label, "model").items():
        name = str(key)
        while name.startswith(WRAPPERS):
            name = name.removeprefix(next(w for w in WRAPPERS if name.startswith(w)))
        state[name] = tensor
    table, w1 = state.get("tok_embeddings.weight"), state.get("layers.0.feed_forward.w1.weight")
    if not (isinstance(table, torch.Tensor) and table.ndim == 2 and isinstance(w1, torch.Tensor) and w1.ndim == 2):
        raise CheckpointError(f"{label} is a llama2.c checkpoint without a token table or a first feed-forward layer")
    head = state.get("output.weight")
    tied = head is None or (head.shape == table.shape and torch.equal(head, table))
    values = llama_values(vocab_size=args.get("vocab_size", table.shape[0]), dim=args.get("dim"),
                          hidden_dim=w1.shape[0], n_layers=args.get("n_layers"), n_heads=args.get("n_heads"),
                          n_kv_heads=args.get("n_kv_heads") or args.get("n_heads"),
                          max_seq_len=args.get("max_seq_len"), norm_eps=as_float(args.get("norm_eps", 1e-5)),
                          tied=tied)
    config = check_sizes(values, label, max_bytes)

    def fetch(name: str) -> torch.Tensor:
        if not isinstance(state.get(name), torch.Tensor):
            raise CheckpointError(f"{label} has no {name}, so it is not a complete llama2.c model")
        return state[name].float()

    renamed = assemble(config, fetch, label)
    used = {"tok_embeddings.weight", "norm.weight", "output.weight"} | {
        f"layers.{i}.{part}" for i in range(config.n_layer) for part in (
            "attention.wq.weight", "attention.wk.weight", "attention.wv.weight", "attention.wo.weight",
            "feed_forward.w1.weight", "feed_forward.w2.weight", "feed_forward.w3.weight",
            "attention_norm.weight", "ffn_norm.weight")}
    ignored = [key_name(k) for k in payload if k not in ("model", "model_args") and k not in META_NUMBERS]
    ignored += [key_name(k) for k in state if k not in used][:8]
    meta = {k: number(payload[k]) for k in META_NUMBERS if number(payload.get(k)) is not None}
    meta.update(training_length=values["block_size"], rope_base=values["rope_base"])
    return Recognised("llama2.c ckpt.pt", renamed, dict(args), "gelu", meta, ignored, values=values)


FILE_LAYOUTS = (FileLayout("llama2.c ckpt.pt", is_llama2c_ckpt, read_llama2c_ckpt),)


def is_model_bin(path: Path) -> bool:
    """A llama2.c export: version 1's magic, or a `.bin` that is not a zip archive (torch's format)."""
    with path.open("rb") as f:
        start = f.read(4)
    if len(start) == 4 and struct.unpack("<I", start)[0] == MAGIC:
        return True
    return path.suffix == ".bin" and start != b"PK\x03\x04"


def read_model_bin(path: Path, max_bytes: int) -> Recognised:
    """A llama2.c model.bin (version 0 or 1), every size checked before a weight is read."""
    label, size = path.name, path.stat().st_size
    with path.open("rb") as f:
        head = f.read(HEADER_V1)
    if len(head) >= 8 and struct.unpack("<I", head[:4])[0] == MAGIC:
        version = struct.unpack("<i", head[4:8])[0]
        if version != 1:
            raise CheckpointError(f"{label} is a llama2.c model.bin of version {version}; lpos reads versions 0 and 1 "
                                  "(version 2 is quantised to 8 bits: export it again with --version 1)")
        if len(head) < HEADER_V1:
            raise CheckpointError(f"{label} is shorter than a llama2.c version 1 header ({HEADER_V1} bytes)")
        sizes, shared, offset = struct.unpack("<7i", head[8:36]), head[36] == 1, HEADER_V1
        vocab = sizes[5]
    else:
        if len(head) < LEGACY_HEADER:
            raise CheckpointError(f"{label} is shorter than a llama2.c model.bin header ({LEGACY_HEADER} bytes)")
        sizes, version, offset = struct.unpack("<7i", head[:LEGACY_HEADER]), 0, LEGACY_HEADER
        shared, vocab = sizes[5] > 0, abs(sizes[5])
    dim, hidden, n_layers, n_heads, n_kv, _, seq_len = sizes
    values = llama_values(vocab_size=vocab, dim=dim, hidden_dim=hidden, n_layers=n_layers, n_heads=n_heads,
                          n_kv_heads=n_kv, max_seq_len=seq_len, norm_eps=1e-5, tied=shared)
    config = check_sizes(values, label, max_bytes)
    shapes = bin_shapes(config, version=version)
    expected = offset + 4 * sum(math.prod(shape) for _, shape in shapes)
    if size != expected:
        raise CheckpointError(f"{label}'s header describes a llama2.c model of {expected:,} bytes, but the file holds "
                              f"{size:,}: it is truncated, or not a llama2.c version {version} model.bin")
    data = np.memmap(path, dtype="<f4", mode="r", offset=offset)
    tensors, at = {}, 0
    for name, shape in shapes:
        count = math.prod(shape)
        tensors[name] = (at, count, shape)
        at += count

    def fetch(name: str) -> torch.Tensor:
        start, count, shape = tensors[name]
        return torch.from_numpy(np.array(data[start : start + count])).view(shape)  # one copy, float32

    state = assemble(config, fetch, label)
    del data
    ignored = ["RoPE's cos and sin tables (lpos computes the same angles)"] if version == 0 else []
    layout = f"llama2.c model.bin, version {version}{' (legacy)' if version == 0 else ''}"
    meta = {"training_length": seq_len, "rope_base": values["rope_base"]}
    return Recognised(layout, state, {}, "gelu", meta, ignored, tokenizer=tokenizer_beside(path.parent), values=values)


def bin_shapes(config, *, version: int) -> list[tuple[str, tuple[int, ...]]]:
    """Every array of a model.bin in file order, under llama2.c's names."""
    C, hs, L = config.n_embd, config.n_embd // config.n_head, config.n_layer
    kv, hidden, V = config.n_kv_head * hs, config.mlp_hidden, config.vocab_size

    def per_layer(part: str, shape: tuple[int, ...]) -> list[tuple[str, tuple[int, ...]]]:
        return [(f"layers.{i}.{part}", shape) for i in range(L)]

    attention = [*per_layer("attention.wq.weight", (C, C)), *per_layer("attention.wk.weight", (kv, C)),
                 *per_layer("attention.wv.weight", (kv, C)), *per_layer("attention.wo.weight", (C, C))]
    mlp = [*per_layer("feed_forward.w1.weight", (hidden, C)), *per_layer("feed_forward.w2.weight", (C, hidden)),
           *per_layer("feed_forward.w3.weight", (hidden, C))]
    table, head = [("tok_embeddings.weight", (V, C))], [] if config.tied else [("output.weight", (V, C))]
    if version == 1:
        return [*per_layer("attention_norm.weight", (C,)), *per_layer("ffn_norm.weight", (C,)),
                ("norm.weight", (C,)), *table, *attention, *mlp, *head]
    rope_tables = [("freq_cis_real", (config.block_size, hs // 2)), ("freq_cis_imag", (config.block_size, hs // 2))]
    return [*table, *per_layer("attention_norm.weight", (C,)), *attention, *per_layer("ffn_norm.weight", (C,)),
            *mlp, ("norm.weight", (C,)), *rope_tables, *head]
