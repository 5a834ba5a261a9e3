"""What recognising a layout yields, and the registry entries a layout family provides.

A layout family (a module of this package) turns what a file holds into a `Recognised`: the
tensors under lpos's (nanoGPT) names, the configuration values the file declares, and what was
left unread, in words. `FileLayout` recognises the dict inside one torch file; `FolderLayout` a
folder of files (Hugging Face).
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch


@dataclass
class Recognised:
    layout: str  # what the file was read as, for the user
    state: dict  # tensors under lpos names
    declared: dict  # configuration values the file states (model_args, config dict or object, config.json)
    activation: str  # gelu (nanoGPT's nn.GELU) | gelu_tanh (Hugging Face GPT-2's gelu_new) | relu (Karpathy's lecture)
    meta: dict  # numbers worth keeping (iter_num, best_val_loss, loss)
    ignored: list[str]  # what was left unread, in words
    tokenizer: Path | None = None  # a tokenizer file that came with the model (a folder's tokenizer.json)
    values: dict | None = None  # every GPTConfig value, when the layout knows them all (Llama); None: read from the shapes


@dataclass(frozen=True)
class FileLayout:
    name: str
    matches: Callable[[dict], bool]  # does a torch file's dict look like this layout?
    read: Callable[[dict, str], Recognised]  # (payload, label) -> its tensors renamed


@dataclass(frozen=True)
class FolderLayout:
    name: str
    matches: Callable[[Path], bool]
    read: Callable[..., Recognised]  # (folder, max_bytes, *, float32) -> its tensors renamed
    files: str  # what the folder holds, in words: "config.json and model.safetensors or pytorch_model.bin"


def key_name(key) -> str:
    """A key from the file, safe to show: letters, digits, '_', '.', '-' only, at most 40 characters."""
    return re.sub(r"[^\w.\-]", "_", str(key))[:40] or "_"


def number(value):
    """A plain int or float (a one-element tensor's value), else None."""
    value = value.item() if isinstance(value, torch.Tensor) and value.numel() == 1 else value
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
