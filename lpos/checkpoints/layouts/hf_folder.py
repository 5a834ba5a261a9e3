"""A Hugging Face folder of one of the block families lpos reads beside Llama: the shared reading.

A family module (qwen.py, gpt_neox.py, gemma.py) says which `model_type`s it reads, how their config.json
becomes GPTConfig values (`values`) and how their tensors take lpos's places (`state`); everything else is
here: config.json (Gemma 3's multimodal `gemma3` keeps its text model's in `text_config`), the sizes checked
before anything is read, `model.safetensors` or the shards of its index, each tensor read on its own as
float32, and the query and key rows turned from Hugging Face's rotate_half pairs (j, j + r/2) to the adjacent
pairs (2j, 2j + 1) lpos rotates (`adjacent_rows`).
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from lpos.checkpoints.errors import CheckpointError
from lpos.checkpoints.layouts.llama import (HF_INDEX, HF_SINGLE, MAX_CONFIG_BYTES, MAX_SIZE, check_memory, held_words,
                                            read_json, shard_files, stored_half, tokenizer_beside)
from lpos.checkpoints.layouts.recognised import FolderLayout, Recognised
from lpos.model import GPTConfig

TABLES = ("embed_tokens.weight", "embed_in.weight", "lm_head.weight", "embed_out.weight")  # always float32
SIZE_FIELDS = ("vocab_size", "n_embd", "mlp_hidden", "n_layer", "n_head", "n_kv_head", "block_size")


class Tensors:
    """The tensors of a folder's safetensors files by their Hugging Face names: `key in tensors`, and
    `tensors(key)` reads one, recording what was read and in which precision it was stored. A block's matrices
    stay in a bfloat16 or float16 file's precision unless `float32`; the token table, the head, biases and norms
    are read as float32 (the pages read the table's rows; a norm's 1 + weight is Gemma's in float32)."""

    def __init__(self, files: list[Path], label: str, family: str, *, float32: bool = False):
        from safetensors import safe_open

        self.label, self.family, self.where, self.float32 = label, family, {}, float32
        self.used: set[str] = set()
        self.dtypes: set[str] = set()
        try:
            for file in files:
                with safe_open(str(file), framework="pt") as handle:
                    self.where.update({key: file for key in handle.keys()})
        except Exception as e:  # a damaged header raises many kinds of errors
            raise CheckpointError(f"{label}: {file.name} could not be read ({type(e).__name__}): the file is damaged") from None

    def __contains__(self, key: str) -> bool:
        return key in self.where

    def __call__(self, key: str) -> torch.Tensor:
        from safetensors import safe_open

        label = self.label
        if key not in self.where:
            raise CheckpointError(f"{label} has no {key[:80]}, so it is not a complete {self.family} model")
        try:
            with safe_open(str(self.where[key]), framework="pt") as handle:
                tensor = handle.get_tensor(key)
        except Exception as e:
            raise CheckpointError(f"{label}: {key[:80]} could not be read ({type(e).__name__}): the file is damaged") from None
        if not tensor.is_floating_point():
            raise CheckpointError(f"{label}: {key[:80]} holds {tensor.dtype}, not floating-point weights")
        self.used.add(key)
        self.dtypes.add(str(tensor.dtype).removeprefix("torch."))
        if self.float32 or tensor.ndim != 2 or key.endswith(TABLES):
            return tensor.float()  # one float32 tensor at a time (a no-op on float32 files)
        return tensor


@dataclass(frozen=True)
class Family:
    name: str  # "Qwen2", as the folder is described
    model_types: tuple[str, ...]  # config.json's model_type values it reads
    values: Callable[[dict, str], dict]  # (config.json's text model, label) -> GPTConfig values
    state: Callable[[GPTConfig, Tensors, str], dict]  # (config, tensors, label) -> lpos's state dict


def model_type(folder: Path) -> str | None:
    """config.json's model_type (its text model's for Gemma 3's multimodal folders), None if unreadable."""
    config = folder / "config.json"
    try:
        if not config.is_file() or config.stat().st_size > MAX_CONFIG_BYTES:
            return None
        hf = json.loads(config.read_text(encoding="utf-8"))
        text = hf.get("text_config")
        return text.get("model_type") if hf.get("model_type") == "gemma3" and isinstance(text, dict) else hf.get("model_type")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return None


def text_config(hf: dict, label: str) -> dict:
    """The configuration of the text model: config.json itself, or a multimodal Gemma 3's text_config."""
    if hf.get("model_type") == "gemma3":
        if not isinstance(hf.get("text_config"), dict):
            raise CheckpointError(f"{label} is a Gemma 3 folder without a text_config")
        return hf["text_config"]
    return hf


def layer_kinds(hf: dict, n_layer: int, default: Callable[[int], str], label: str) -> list[str]:
    """Each block's attention kind, full_attention or sliding_attention: config.json's layer_types, else
    the family's rule for files written before transformers listed them."""
    kinds = hf.get("layer_types")
    if kinds is None:
        kinds = [default(i) for i in range(n_layer if isinstance(n_layer, int) else 0)]
    if not isinstance(kinds, list) or len(kinds) != n_layer or \
            not set(kinds) <= {"full_attention", "sliding_attention"}:
        raise CheckpointError(f"{label}'s layer_types are not one full_attention or sliding_attention per layer")
    return kinds


def windows(hf: dict, kinds: list[str], label: str) -> dict:
    """sliding_windows for the sliding_attention blocks (config.json's sliding_window), or nothing."""
    if "sliding_attention" not in kinds:
        return {}
    window = hf.get("sliding_window")
    if not isinstance(window, int) or isinstance(window, bool) or not 1 <= window <= MAX_SIZE:
        raise CheckpointError(f"{label} has sliding-window layers but a sliding_window of {str(window)[:20]}")
    return {"sliding_windows": tuple(window if kind == "sliding_attention" else 0 for kind in kinds)}


def checked_config(values: dict, label: str, max_bytes: int, *, half: bool = False) -> GPTConfig:
    """The GPTConfig of a family's values, refused before anything is read when a size is not a whole number
    from 1 to a million or the weights as held (`half`: the blocks' matrices in two bytes) would pass
    `max_bytes`."""
    for field in (*SIZE_FIELDS, *(["head_dim"] if values.get("head_dim") is not None else [])):
        value = values.get(field)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_SIZE:
            raise CheckpointError(f"{label} declares {field} = {str(value)[:20]}, not a whole number from 1 to {MAX_SIZE:,}")
    if values["n_head"] % values["n_kv_head"]:
        raise CheckpointError(f"{label} declares {values['n_head']} heads and {values['n_kv_head']} key/value heads: "
                              "the key/value heads must divide the heads")
    if not (isinstance(values.get("norm_eps"), float) and 0 < values["norm_eps"] < 1):
        raise CheckpointError(f"{label} declares a norm epsilon of {str(values.get('norm_eps'))[:20]}, not between 0 and 1")
    try:
        config = GPTConfig.from_dict(values)
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{label} has an unsupported configuration: {str(e)[:200]}") from None
    check_memory(config, label, max_bytes, half=half)
    return config


def shaped(fetch: Tensors, key: str, shape: tuple[int, ...], label: str) -> torch.Tensor:
    """A tensor of the folder, refused unless it has `shape`."""
    tensor = fetch(key)
    if tuple(tensor.shape) != shape:
        raise CheckpointError(f"{label}: {key[:80]} has shape {tuple(tensor.shape)}, expected {shape}")
    return tensor


def whole(value, field: str, label: str) -> int:
    """A config.json size as an int, or CheckpointError naming it."""
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_SIZE:
        raise CheckpointError(f"{label} declares {field} = {str(value)[:20]}, not a whole number from 1 to {MAX_SIZE:,}")
    return value


def adjacent_rows(tensor: torch.Tensor, heads: int, rotated: int) -> torch.Tensor:
    """A query or key projection's rows (heads * hs, ...) or bias (heads * hs,), or a per-head norm's weight
    (hs,) with heads=1, reordered within each head from rotate_half pairs (j, j + rotated/2) to adjacent
    pairs (2j, 2j + 1) over its first `rotated` rows; the rest keep their places. Queries and keys move
    alike, so every score stays as it was."""
    hs = tensor.shape[0] // heads
    order = torch.cat([torch.arange(rotated).view(2, rotated // 2).T.reshape(rotated), torch.arange(rotated, hs)])
    return tensor.reshape(heads, hs, -1)[:, order].reshape(tensor.shape)


def read_folder(folder: Path, max_bytes: int, family: Family, *, float32: bool = False) -> Recognised:
    label = folder.name
    hf = read_json(folder / "config.json", label)
    values = family.values(text_config(hf, label), label)
    config = checked_config(values, label, max_bytes, half=stored_half(text_config(hf, label), float32)
                            or stored_half(hf, float32))
    files = shard_files(folder, label)
    if sum(f.stat().st_size for f in files) > max_bytes:
        raise CheckpointError(f"{label}'s weights are over the {max_bytes / 2**20:.0f} MB limit")
    tensors = Tensors(files, label, family.name, float32=float32)
    state = family.state(config, tensors, label)
    ignored = sorted(key for key in tensors.where if key not in tensors.used)
    for head in ("lm_head.weight", "embed_out.weight"):
        if config.tied and head in ignored:
            ignored.remove(head)
            ignored.insert(0, f"{head} (the token table again: the head is tied)")
    layout = (f"Hugging Face {family.name} folder (config.json + {', '.join(f.name for f in files[:3])}"
              f"{' ...' if len(files) > 3 else ''}; {', '.join(sorted(tensors.dtypes))}"
              f"{held_words(tensors.dtypes, float32)}; "
              "query and key rows turned from rotate_half to adjacent pairs)")
    meta = {"training_length": values["block_size"], "rope_base": values["rope_base"], "model_type": hf.get("model_type")}
    return Recognised(layout, state, {}, "gelu", meta, ignored[:8], tokenizer=tokenizer_beside(folder), values=values)


def folder_layout(family: Family) -> FolderLayout:
    return FolderLayout(f"Hugging Face {family.name} folder", lambda folder: model_type(folder) in family.model_types,
                        lambda folder, max_bytes, float32=False: read_folder(folder, max_bytes, family, float32=float32),
                        f"a config.json of model_type {' or '.join(family.model_types)} and {HF_SINGLE} or {HF_INDEX} "
                        "with its shards")
