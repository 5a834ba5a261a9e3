"""A Hugging Face GPT-2 folder: `config.json` beside `model.safetensors` or `pytorch_model.bin`.

The weights are GPT2Model's or GPT2LMHeadModel's, renamed by the GPT-2 family's one key mapping
(lpos.checkpoints.layouts.gpt2); config.json's names are mapped to GPTConfig's here. A
`tokenizer.json` in the folder is the model's tokenizer (any vocabulary size).
"""
from __future__ import annotations

import json
from pathlib import Path

from lpos.checkpoints.errors import CheckpointError
from lpos.checkpoints.layouts.gpt2 import from_state
from lpos.checkpoints.layouts.recognised import FolderLayout, Recognised
from lpos.checkpoints.payload import read_payload

HF_CONFIG = "config.json"
HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
HF_TOKENIZER = "tokenizer.json"  # found on its own beside config.json
MAX_CONFIG_BYTES = 1024 * 1024  # a Hugging Face config.json is a few kB
CONFIG_NAMES = {"vocab_size": "vocab_size", "n_positions": "block_size", "n_layer": "n_layer", "n_head": "n_head",
                "n_embd": "n_embd"}  # config.json's -> GPTConfig's
TANH_ACTIVATIONS = ("gelu_new", "gelu_pytorch_tanh")
HF_MODEL_TYPES = ("gpt2", "llama", "qwen2", "qwen3", "gpt_neox", "smollm3", "gemma3_text", "gemma3 (its text model)")


def weights_file(folder: Path) -> Path | None:
    return next((folder / name for name in HF_WEIGHTS if (folder / name).is_file()), None)


def has_gpt2_files(folder: Path) -> bool:
    return (folder / HF_CONFIG).is_file() and weights_file(folder) is not None


def read_gpt2_folder(folder: Path, max_bytes: int, *, float32: bool = True) -> Recognised:  # always float32
    config_file, weights = folder / HF_CONFIG, weights_file(folder)
    if weights.stat().st_size > max_bytes:
        raise CheckpointError(f"{weights.name} is over the {max_bytes / 2**20:.0f} MB limit")
    if config_file.stat().st_size > MAX_CONFIG_BYTES:
        raise CheckpointError(f"config.json is over {MAX_CONFIG_BYTES // 1024} kB: it is not a GPT-2 configuration")
    try:
        hf = json.loads(config_file.read_text())
    except Exception as e:
        raise CheckpointError(f"{folder.name} could not be read ({type(e).__name__}): check config.json") from None
    if not isinstance(hf, dict):
        raise CheckpointError("config.json does not hold a JSON object: it is not a GPT-2 configuration")
    if hf.get("model_type", "gpt2") != "gpt2":
        raise CheckpointError(f"model_type {str(hf.get('model_type'))[:30]!r} is not supported; lpos reads Hugging Face "
                              f"folders of model_type {', '.join(HF_MODEL_TYPES)}")
    if weights.suffix == ".bin":
        state = read_payload(weights, max_bytes=max_bytes)
    else:
        try:
            from safetensors.torch import load_file

            state = load_file(str(weights))
        except Exception as e:
            raise CheckpointError(f"{folder.name} could not be read ({type(e).__name__}): check model.safetensors") from None
    declared = {ours: hf[theirs] for theirs, ours in CONFIG_NAMES.items() if theirs in hf}
    found = from_state(state, folder.name, layout=f"Hugging Face GPT-2 folder (config.json + {weights.name})",
                       declared=declared)
    del state
    found.activation = "gelu_tanh" if hf.get("activation_function", "gelu_new") in TANH_ACTIVATIONS else "gelu"
    if (folder / HF_TOKENIZER).is_file():  # a GPT-2 trained with its own BPE saves it beside the weights
        found.tokenizer = folder / HF_TOKENIZER
    return found


FOLDER_LAYOUTS = (FolderLayout("Hugging Face GPT-2 folder", has_gpt2_files, read_gpt2_folder,
                               f"{HF_CONFIG} and {' or '.join(HF_WEIGHTS)}"),)
