"""The layouts people save models in: a registry of recognisers, one module per layout family.

Each family module offers `FILE_LAYOUTS` (a torch file's dict) and/or `FOLDER_LAYOUTS` (a folder
of files), tried in order; the first that matches renames the tensors to lpos's names. Every
family so far is GPT-2-shaped (gpt2: nanoGPT, trainer dicts, bare state_dicts; huggingface:
GPT-2 folders), so one `config_values` reads their shapes; a family of another shape adds its
module here and its entries to the two registries.
"""
from __future__ import annotations

from pathlib import Path

from lpos.checkpoints.errors import CheckpointError
from lpos.checkpoints.layouts import gpt2, huggingface
from lpos.checkpoints.layouts.gpt2 import config_values
from lpos.checkpoints.layouts.recognised import FileLayout, FolderLayout, Recognised

FILE_LAYOUTS: tuple[FileLayout, ...] = (*gpt2.FILE_LAYOUTS,)
FOLDER_LAYOUTS: tuple[FolderLayout, ...] = (*huggingface.FOLDER_LAYOUTS,)

__all__ = ["FILE_LAYOUTS", "FOLDER_LAYOUTS", "Recognised", "config_values", "recognise", "recognise_folder"]


def recognise(payload: dict, label: str) -> Recognised:
    """The layout of a torch file's dictionary (not the lpos format), with its tensors renamed."""
    for layout in FILE_LAYOUTS:
        if layout.matches(payload):
            return layout.read(payload, label)
    raise CheckpointError(f"{label} is neither an lpos checkpoint, a nanoGPT ckpt.pt, a trainer dict with "
                          "'model' nor a state_dict")


def recognise_folder(folder: Path, *, max_bytes: int) -> Recognised:
    """The layout of a folder of model files, with its tensors renamed."""
    for layout in FOLDER_LAYOUTS:
        if layout.matches(folder):
            return layout.read(folder, max_bytes)
    raise CheckpointError(f"{folder.name} needs config.json and model.safetensors or pytorch_model.bin "
                          "(Hugging Face GPT-2)")
