"""The layouts people save models in: a registry of recognisers, one module per layout family.

Each family module offers `FILE_LAYOUTS` (a torch file's dict) and/or `FOLDER_LAYOUTS` (a folder
of files), tried in order; the first that matches renames the tensors to lpos's names. The
GPT-2-shaped families (gpt2: nanoGPT, trainer dicts, bare state_dicts; huggingface: GPT-2
folders) share one `config_values` that reads their shapes; the Llama families (llama2c:
llama2.c's ckpt.pt, and its model.bin, a raw file read by `read_model_bin`; llama: Hugging Face
Llama folders) state every value themselves (`Recognised.values`).
"""
from __future__ import annotations

from pathlib import Path

from lpos.checkpoints.errors import CheckpointError
from lpos.checkpoints.layouts import courses, gemma, gpt2, gpt_neox, huggingface, llama, llama2c, qwen
from lpos.checkpoints.layouts.recognised import FileLayout, FolderLayout, Recognised

FILE_LAYOUTS: tuple[FileLayout, ...] = (*llama2c.FILE_LAYOUTS, *courses.FILE_LAYOUTS, *gpt2.FILE_LAYOUTS)  # llama2.c's ckpt.pt has model_args too
FOLDER_LAYOUTS: tuple[FolderLayout, ...] = (*llama.FOLDER_LAYOUTS, *qwen.FOLDER_LAYOUTS, *gpt_neox.FOLDER_LAYOUTS,
                                              *gemma.FOLDER_LAYOUTS, *huggingface.FOLDER_LAYOUTS)
# the names a model file of these layouts ends in: a torch file (nanoGPT's ckpt.pt, a course's model.pth, a
# trainer's .ckpt, GPT-2's pytorch_model.bin) or llama2.c's raw model.bin; the upload box, the shared folder
# and the CLI's help are built from it
TORCH_SUFFIXES = (".pt", ".pth", ".ckpt", ".bin")
LAYOUT_NAMES = ", ".join(["an lpos checkpoint", *(layout.name for layout in FILE_LAYOUTS)])

__all__ = ["FILE_LAYOUTS", "FOLDER_LAYOUTS", "LAYOUT_NAMES", "Recognised", "TORCH_SUFFIXES", "config_values",
           "recognise", "recognise_folder"]


def config_values(found: Recognised, *, n_head: int | None, label: str) -> dict:
    """GPTConfig values: all of them from a layout that knows them (Llama), else read from the
    GPT-2 family's shapes (gpt2.config_values)."""
    if found.values is not None:
        return dict(found.values)
    return gpt2.config_values(found, n_head=n_head, label=label)


def recognise(payload: dict, label: str) -> Recognised:
    """The layout of a torch file's dictionary (not the lpos format), with its tensors renamed."""
    for layout in FILE_LAYOUTS:
        if layout.matches(payload):
            return layout.read(payload, label)
    raise CheckpointError(f"{label} is in none of the layouts lpos reads ({LAYOUT_NAMES})")


def recognise_folder(folder: Path, *, max_bytes: int, float32: bool = False) -> Recognised:
    """The layout of a folder of model files, with its tensors renamed; a bfloat16 or float16 file's block
    matrices stay in that precision unless `float32`."""
    for layout in FOLDER_LAYOUTS:
        if layout.matches(folder):
            return layout.read(folder, max_bytes, float32=float32)
    raise CheckpointError(f"{folder.name} needs " + "; or ".join(f"{layout.files} ({layout.name})"
                                                             for layout in FOLDER_LAYOUTS))
