"""Save and load models: the lpos format, nanoGPT `ckpt.pt` files and Hugging Face GPT-2 folders.

Every file goes through `torch.load(weights_only=True)`, which refuses to unpickle anything but
tensors and plain containers: a file that tries to run code is refused, never executed. Before
that, the archive's declared sizes are checked against a cap, so a zip bomb is refused unread,
and a configuration is checked before any model is built, so a file cannot ask for more memory
than the cap either. Whatever is wrong with a file, `load` raises CheckpointError with one sentence.

lpos format (one file): {"format": "lpos", "version": 1, "config": {...GPTConfig fields},
"state_dict": {...}, "meta": {...}}. When a model was trained over a corpus vocabulary
(`model.output_vocab`), only those token rows are stored (`transformer.wte.ids` and
`transformer.wte.rows`, float16); every other row is its initial value, rebuilt from
`config.init_seed`. That keeps a shipped file under 8 MB and makes "a token never seen keeps its
random row" literally true.
"""
from __future__ import annotations

import dataclasses
import json
import os
import pickle
import zipfile
from pathlib import Path

import torch

from lpos.model import GPT, GPTConfig
from lpos.tokenizer import VOCAB_SIZE

CHECKPOINT_DIR = Path(__file__).resolve().parent.parent / "checkpoints"
FORMAT_VERSION = 1
MAX_BYTES = int(os.environ.get("LPOS_MAX_UPLOAD_MB", "600")) * 1024 * 1024
MAX_CONFIG_BYTES = 1024 * 1024  # a Hugging Face config.json is a few kB
SIZE_FIELDS = ("n_layer", "n_head", "n_embd", "block_size")


class CheckpointError(ValueError):
    """A file that cannot be used as a model; the message is one sentence for the user."""


def available() -> list[str]:
    """Names of the shipped checkpoints (files `checkpoints/<name>.pt`)."""
    return sorted(p.stem for p in CHECKPOINT_DIR.glob("*.pt") if "." not in p.stem)  # not *.resume.pt


def save(model: GPT, meta: dict, path: str | Path) -> None:
    state = {k: v for k, v in model.state_dict().items() if k != "lm_head.weight"}  # tied to wte
    if model.output_vocab is not None:
        ids = model.output_vocab.sort().values
        state.pop("transformer.wte.weight")
        state["transformer.wte.ids"] = ids.clone()
        state["transformer.wte.rows"] = model.transformer.wte.weight.detach()[ids].half()
    payload = {
        "format": "lpos",
        "version": FORMAT_VERSION,
        "config": dataclasses.asdict(model.config),
        "state_dict": state,
        "meta": meta,
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(payload, tmp)
    tmp.replace(path)  # never leave a half-written checkpoint behind


def load(name_or_path: str | Path, *, max_bytes: int = MAX_BYTES) -> tuple[GPT, dict]:
    """A model in eval mode and its meta, from a shipped name, an lpos/nanoGPT file or an HF folder."""
    name = str(name_or_path)
    path = CHECKPOINT_DIR / f"{name}.pt" if name in available() else Path(name_or_path)
    if path.is_dir():
        model, meta = _load_hf_folder(path, max_bytes)
    elif path.is_file():
        model, meta = _from_payload(read_payload(path, max_bytes=max_bytes), path.name, max_bytes)
    else:
        raise CheckpointError(f"no checkpoint named {name!r}: use one of {available()} or a file path")
    model.eval()
    return model, meta


def read_payload(path: Path, *, max_bytes: int = MAX_BYTES) -> dict:
    """The dict inside a torch file, loaded with weights_only=True after the size checks."""
    size = path.stat().st_size
    if size > max_bytes:
        raise CheckpointError(f"{path.name} is {size / 2**20:.0f} MB; the limit is {max_bytes / 2**20:.0f} MB")
    try:
        with zipfile.ZipFile(path) as archive:
            declared = sum(info.file_size for info in archive.infolist())
    except zipfile.BadZipFile:
        raise CheckpointError(f"{path.name} is not a PyTorch checkpoint (not a zip archive, or truncated)") from None
    if declared > max_bytes:
        raise CheckpointError(
            f"{path.name} unpacks to {declared / 2**20:.0f} MB, over the {max_bytes / 2**20:.0f} MB limit"
        )
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        if "Weights only load failed" not in str(e) or "Unsupported operand" in str(e):  # damaged, not refused
            raise CheckpointError(f"{path.name} could not be read (UnpicklingError): the file is damaged") from None
        raise CheckpointError(
            f"{path.name} contains Python objects other than tensors; lpos refuses to unpickle them"
        ) from None
    except Exception as e:  # truncated or corrupt archives raise many kinds of errors
        raise CheckpointError(f"{path.name} could not be read ({type(e).__name__}): the file is damaged") from None
    if not isinstance(payload, dict):
        raise CheckpointError(f"{path.name} does not hold a checkpoint dictionary")
    return payload


def _from_payload(payload: dict, label: str, max_bytes: int) -> tuple[GPT, dict]:
    if payload.get("format") == "lpos":
        if payload.get("version") != FORMAT_VERSION:
            raise CheckpointError(f"{label} is lpos format version {payload.get('version')}; this lpos reads {FORMAT_VERSION}")
        config = _config(_mapping(payload.get("config"), label, "config"), label, max_bytes)
        state = _mapping(payload.get("state_dict"), label, "state_dict")
        return _build(config, state, label), _mapping(payload.get("meta", {}), label, "meta")
    if "model_args" in payload and "model" in payload:  # nanoGPT
        args = _mapping(payload["model_args"], label, "model_args")
        config = _config({**args, "position": "learned", "activation": "gelu"}, label, max_bytes)
        state = {str(k).removeprefix("_orig_mod."): v for k, v in _mapping(payload["model"], label, "model").items()
                 if not str(k).endswith(".attn.bias")}  # nanoGPT's causal-mask buffer, saved without flash attention
        meta = {"source": "nanoGPT", "iter_num": payload.get("iter_num"), "best_val_loss": _number(payload.get("best_val_loss"))}
        return _build(config, state, label), meta
    raise CheckpointError(f"{label} is neither an lpos checkpoint nor a nanoGPT ckpt.pt")


def _mapping(value, label: str, what: str) -> dict:
    if not isinstance(value, dict):
        raise CheckpointError(f"{label}: {what} is not a dictionary, so this is not a usable checkpoint")
    return dict(value)


def _number(value):
    return value.item() if isinstance(value, torch.Tensor) else value


def _load_hf_folder(folder: Path, max_bytes: int) -> tuple[GPT, dict]:
    config_file, weights_file = folder / "config.json", folder / "model.safetensors"
    if not config_file.is_file() or not weights_file.is_file():
        raise CheckpointError(f"{folder.name} needs both config.json and model.safetensors (Hugging Face GPT-2)")
    if weights_file.stat().st_size > max_bytes:
        raise CheckpointError(f"model.safetensors is over the {max_bytes / 2**20:.0f} MB limit")
    if config_file.stat().st_size > MAX_CONFIG_BYTES:
        raise CheckpointError(f"config.json is over {MAX_CONFIG_BYTES // 1024} kB: it is not a GPT-2 configuration")
    try:
        hf = json.loads(config_file.read_text())
        from safetensors.torch import load_file

        weights = load_file(str(weights_file))
    except Exception as e:
        raise CheckpointError(f"{folder.name} could not be read ({type(e).__name__}): check config.json and model.safetensors") from None
    if not isinstance(hf, dict):
        raise CheckpointError("config.json does not hold a JSON object: it is not a GPT-2 configuration")
    if hf.get("model_type", "gpt2") != "gpt2":
        raise CheckpointError(f"model_type {hf.get('model_type')!r} is not supported; lpos reads GPT-2 models")
    activation = "gelu_tanh" if hf.get("activation_function", "gelu_new") in ("gelu_new", "gelu_pytorch_tanh") else "gelu"
    config = _config(
        dict(vocab_size=hf.get("vocab_size", VOCAB_SIZE), block_size=hf.get("n_positions", 1024), n_layer=hf.get("n_layer"),
             n_head=hf.get("n_head"), n_embd=hf.get("n_embd"), position="learned", activation=activation, bias=True),
        folder.name, max_bytes,
    )
    conv1d = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
    state = {}
    for key, tensor in weights.items():
        key = key.removeprefix("transformer.")
        if key.endswith((".attn.bias", ".attn.masked_bias")) or key == "lm_head.weight":
            continue  # causal-mask buffers (not c_attn.bias) and the tied head
        if key.endswith(conv1d):
            tensor = tensor.T  # HF's Conv1D stores (in, out); nn.Linear wants (out, in)
        state[f"transformer.{key}"] = tensor
    return _build(config, state, folder.name), {"source": "Hugging Face GPT-2"}


def _config(values: dict, label: str, max_bytes: int) -> GPTConfig:
    try:
        values = dict(values)
        vocab = int(values.get("vocab_size") or 0)
        if vocab < VOCAB_SIZE:
            raise CheckpointError(f"{label} has a vocabulary of {vocab}; lpos needs GPT-2's {VOCAB_SIZE} tokens")
        values["vocab_size"] = VOCAB_SIZE  # nanoGPT pads to 50304; the padding rows are never used
        for field in SIZE_FIELDS:
            value = values.get(field, getattr(GPTConfig, field))
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise CheckpointError(f"{label} has an unsupported configuration: {field} is "
                                      f"{str(value)[:20]!r}, not a positive whole number")
        config = GPTConfig.from_dict(values)
    except CheckpointError:
        raise
    except (TypeError, ValueError, ArithmeticError) as e:
        raise CheckpointError(f"{label} has an unsupported configuration: {str(e)[:200]}") from None
    _check_memory(config, label, max_bytes)
    return config


def _check_memory(config: GPTConfig, label: str, max_bytes: int) -> None:
    """Refuse, before building anything, a configuration whose float32 weights exceed the cap:
    a small file may declare a huge model (lpos rebuilds untrained token rows from a seed)."""
    C = config.n_embd
    parameters = config.vocab_size * C + 12 * config.n_layer * C * C
    if config.position == "learned":
        parameters += config.block_size * C
    if 4 * parameters > max_bytes:
        raise CheckpointError(f"{label} declares a model of {parameters / 1e6:,.0f} million parameters "
                              f"({4 * parameters / 2**20:,.0f} MB in memory), over the {max_bytes / 2**20:.0f} MB limit")


def _build(config: GPTConfig, state: dict, label: str) -> GPT:
    try:
        model = GPT(config)
    except (TypeError, ValueError, RuntimeError) as e:  # e.g. a dropout that is not a number
        raise CheckpointError(f"{label} has an unsupported configuration: {str(e)[:200]}") from None
    wte = model.transformer.wte.weight
    if "transformer.wte.ids" in state:
        ids, rows = state.pop("transformer.wte.ids"), state.pop("transformer.wte.rows", None)
        if (not isinstance(ids, torch.Tensor) or not isinstance(rows, torch.Tensor) or ids.ndim != 1
                or ids.dtype not in (torch.int32, torch.int64) or rows.shape != (len(ids), config.n_embd)
                or (ids.numel() and not 0 <= int(ids.min()) <= int(ids.max()) < config.vocab_size)):
            raise CheckpointError(f"{label} has token rows of the wrong shape")
        table = wte.detach().clone()  # the initial rows, rebuilt from config.init_seed
        table[ids] = rows.float()
        state["transformer.wte.weight"] = table
        model.output_vocab = ids.long()
    elif isinstance(state.get("transformer.wte.weight"), torch.Tensor):
        state["transformer.wte.weight"] = state["transformer.wte.weight"][: config.vocab_size]
    state["lm_head.weight"] = state.get("transformer.wte.weight")
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(str(key)[:80] for key in set(state) - set(expected))
    if missing or unexpected:
        raise CheckpointError(f"{label} does not match the architecture: missing {missing[:3]}, unexpected {unexpected[:3]}")
    for key, tensor in state.items():
        if not isinstance(tensor, torch.Tensor) or tensor.shape != expected[key].shape:
            shape = tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
            raise CheckpointError(f"{label}: {key} has shape {shape}, expected {tuple(expected[key].shape)}")
    model.load_state_dict({k: v.float() for k, v in state.items()})
    return model
