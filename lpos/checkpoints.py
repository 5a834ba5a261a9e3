"""Save and load models: the lpos format, and the layouts people save (lpos.layouts: nanoGPT
`ckpt.pt`, trainer dicts, bare state_dicts, Hugging Face GPT-2 folders).

Every file goes through `torch.load(weights_only=True)`, which refuses to unpickle anything but
tensors and plain containers: a file that tries to run code is refused, never executed. The one
exception is a trainer's own config object (a pickled `@dataclass GPTConfig`): the class the file
names is never imported; a stand-in of ours (PickledConfig) is built in its place and keeps plain
values only. Before loading, the archive's declared sizes are checked against a cap, so a zip
bomb is refused unread, and a configuration is checked before any model is built, so a file
cannot ask for more memory than the cap either. Files are memory-mapped and only the model's
tensors are copied out, so an optimizer state saved beside them is never read into memory.
Whatever is wrong with a file, `load` raises CheckpointError with one sentence.

lpos format (one file): {"format": "lpos", "version": 1, "config": {...GPTConfig fields},
"state_dict": {...}, "meta": {...}}. When a model was trained over a corpus vocabulary
(`model.output_vocab`), only those token rows are stored (`transformer.wte.ids` and
`transformer.wte.rows`, float16); every other row is its initial value, rebuilt from
`config.init_seed`. That keeps a shipped file under 8 MB and makes "a token never seen keeps its
random row" literally true.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pickle
import re
import threading
import zipfile
from pathlib import Path

import torch

from lpos.corpus import SHIPPED_SEED
from lpos.model import GPT, GPTConfig, initial_token_table
from lpos.tokenizer import VOCAB_SIZE

CHECKPOINT_DIR = Path(__file__).resolve().parent.parent / "checkpoints"
FORMAT_VERSION = 1
MAX_BYTES = int(os.environ.get("LPOS_MAX_UPLOAD_MB", "1024")) * 1024 * 1024
MAX_CONFIG_BYTES = 1024 * 1024  # a Hugging Face config.json is a few kB
SIZE_FIELDS = ("n_layer", "n_head", "n_embd", "block_size")
HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
CONFIG_CLASS = re.compile(r"(?:[A-Za-z_]\w*\.)+[A-Za-z_]\w*(?:Config|Args)")  # src.model.gpt.GPTConfig
_SAFE_GLOBALS = threading.Lock()  # torch's allowlist is one global set: one stand-in load at a time


class CheckpointError(ValueError):
    """A file that cannot be used as a model; the message is one sentence for the user."""


class PickledConfig:
    """Built in place of a trainer's own config class: numbers, text, True/False/None kept as
    `fields`, anything else dropped. Unpickling calls only this `__setstate__`; nothing of the
    file's class runs (it is never imported), and `__slots__` leaves no `__dict__` to overwrite."""

    __slots__ = ("fields",)
    source = ""  # the class the file names; set on the subclass made for each name

    def __setstate__(self, state) -> None:
        parts = state if isinstance(state, tuple) else (state,)  # (__dict__, __slots__ values) or __dict__
        values = {k: v for part in parts if isinstance(part, dict) for k, v in part.items()}
        plain = (bool, int, float, str, type(None))
        self.fields = {k: v for k, v in values.items() if type(k) is str and not k.startswith("_") and type(v) in plain}


def available() -> list[str]:
    """Names of the shipped checkpoints (files `checkpoints/<name>.pt`)."""
    return sorted(p.stem for p in CHECKPOINT_DIR.glob("*.pt") if "." not in p.stem)  # not *.resume.pt


def save(model: GPT, meta: dict, path: str | Path) -> None:
    state = {k: v for k, v in model.state_dict().items() if k != "lm_head.weight" or not model.config.tied}
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


def load(name_or_path: str | Path, *, n_head: int | None = None, max_bytes: int = MAX_BYTES) -> tuple[GPT, dict]:
    """A model in eval mode and its meta, from a shipped name, a torch file of any layout in
    lpos.layouts, or a Hugging Face folder. `n_head` is used only when the file does not say it."""
    name = str(name_or_path)
    path = CHECKPOINT_DIR / f"{name}.pt" if name in available() else Path(name_or_path)
    if path.is_dir():
        model, meta = _load_hf_folder(path, n_head, max_bytes)
    elif path.is_file():
        model, meta = _from_payload(read_payload(path, max_bytes=max_bytes), path.name, n_head, max_bytes)
    else:
        raise CheckpointError(f"no checkpoint named {name!r}: use one of {available()} or a file path")
    model.eval()
    return model, meta


def describe(model: GPT, meta: dict) -> list[str]:
    """What was loaded, in three lines: the layout, the configuration, what was left unread."""
    c = model.config
    lines = [f"read as: {meta.get('source', 'lpos checkpoint')}",
             f"{c.n_layer} layers, {c.n_head} heads, width {c.n_embd}, {c.block_size:,} position rows, "
             f"vocabulary {c.vocab_size:,}, head {'tied to the token table' if c.tied else 'untied (its own rows)'}, "
             f"{model.num_params() / 1e6:,.1f}M parameters"]
    if meta.get("ignored"):
        lines.append(f"ignored: {', '.join(meta['ignored'])}")
    return lines


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
    stand_ins = _config_stand_ins(path)
    try:
        with _SAFE_GLOBALS if stand_ins else contextlib.nullcontext(), torch.serialization.safe_globals(stand_ins):
            payload = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
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


def _config_stand_ins(path: Path) -> list[tuple[type, str]]:
    """A PickledConfig subclass for each config class the file names (read from its pickle's
    GLOBAL instructions without running them); every other global stays refused."""
    try:
        names = torch.serialization.get_unsafe_globals_in_checkpoint(str(path))
    except Exception:  # damaged: torch.load says how
        return []
    return [(type(name.rpartition(".")[2], (PickledConfig,), {"__slots__": (), "source": name}), name)
            for name in sorted(names) if CONFIG_CLASS.fullmatch(name)]


def _from_payload(payload: dict, label: str, n_head: int | None, max_bytes: int) -> tuple[GPT, dict]:
    from lpos import layouts

    if payload.get("format") == "lpos":
        if payload.get("version") != FORMAT_VERSION:
            raise CheckpointError(f"{label} is lpos format version {payload.get('version')}; this lpos reads {FORMAT_VERSION}")
        config = _config(_mapping(payload.get("config"), label, "config"), label, max_bytes)
        state = _mapping(payload.get("state_dict"), label, "state_dict")
        return _build(config, state, label), _mapping(payload.get("meta", {}), label, "meta")
    found = layouts.recognise(payload, label)
    payload.clear()  # the optimizer state and other extras go now, before a model is built
    return _import(found, label, n_head, max_bytes)


def _import(found, label: str, n_head: int | None, max_bytes: int) -> tuple[GPT, dict]:
    from lpos import layouts

    config = _config(layouts.config_values(found, n_head=n_head, label=label), label, max_bytes)
    model = _build(config, found.state, label)
    return model, {"source": found.layout, **found.meta, "ignored": found.ignored[:12]}


def _mapping(value, label: str, what: str) -> dict:
    if not isinstance(value, dict):
        raise CheckpointError(f"{label}: {what} is not a dictionary, so this is not a usable checkpoint")
    return dict(value)


def _load_hf_folder(folder: Path, n_head: int | None, max_bytes: int) -> tuple[GPT, dict]:
    from lpos import layouts

    config_file = folder / "config.json"
    weights_file = next((folder / name for name in HF_WEIGHTS if (folder / name).is_file()), None)
    if not config_file.is_file() or weights_file is None:
        raise CheckpointError(f"{folder.name} needs config.json and model.safetensors or pytorch_model.bin "
                              "(Hugging Face GPT-2)")
    if weights_file.stat().st_size > max_bytes:
        raise CheckpointError(f"{weights_file.name} is over the {max_bytes / 2**20:.0f} MB limit")
    if config_file.stat().st_size > MAX_CONFIG_BYTES:
        raise CheckpointError(f"config.json is over {MAX_CONFIG_BYTES // 1024} kB: it is not a GPT-2 configuration")
    try:
        hf = json.loads(config_file.read_text())
    except Exception as e:
        raise CheckpointError(f"{folder.name} could not be read ({type(e).__name__}): check config.json") from None
    if not isinstance(hf, dict):
        raise CheckpointError("config.json does not hold a JSON object: it is not a GPT-2 configuration")
    if hf.get("model_type", "gpt2") != "gpt2":
        raise CheckpointError(f"model_type {hf.get('model_type')!r} is not supported; lpos reads GPT-2 models")
    if weights_file.suffix == ".bin":
        weights = read_payload(weights_file, max_bytes=max_bytes)
    else:
        try:
            from safetensors.torch import load_file

            weights = load_file(str(weights_file))
        except Exception as e:
            raise CheckpointError(f"{folder.name} could not be read ({type(e).__name__}): check model.safetensors") from None
    names = {"vocab_size": "vocab_size", "n_positions": "block_size", "n_layer": "n_layer", "n_head": "n_head",
             "n_embd": "n_embd"}  # config.json's -> GPTConfig's
    declared = {ours: hf[theirs] for theirs, ours in names.items() if theirs in hf}
    layout = f"Hugging Face GPT-2 folder (config.json + {weights_file.name})"
    found = layouts.from_state(weights, folder.name, layout=layout, declared=declared)
    del weights
    tanh = hf.get("activation_function", "gelu_new") in ("gelu_new", "gelu_pytorch_tanh")
    found.activation = "gelu_tanh" if tanh else "gelu"
    return _import(found, folder.name, n_head, max_bytes)


def _config(values: dict, label: str, max_bytes: int) -> GPTConfig:
    try:
        values = dict(values)
        from lpos.layouts import MAX_PADDED_VOCAB

        vocab = int(values.get("vocab_size") or 0)
        if vocab < VOCAB_SIZE:
            raise CheckpointError(f"{label} has a vocabulary of {vocab}; lpos needs GPT-2's {VOCAB_SIZE} tokens")
        if vocab > MAX_PADDED_VOCAB:
            raise CheckpointError(f"{label} has a vocabulary of {vocab:,}; lpos reads GPT-2's {VOCAB_SIZE:,} tokens "
                                  f"(padded to at most {MAX_PADDED_VOCAB:,} rows), so it was trained with another tokenizer")
        values["vocab_size"] = VOCAB_SIZE  # nanoGPT pads to 50304; the padding rows are never used
        for field in SIZE_FIELDS:
            value = values.get(field, getattr(GPTConfig, field))
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise CheckpointError(f"{label} has an unsupported configuration: {field} is "
                                      f"{str(value)[:20]!r}, not a positive whole number")
        for field in ("bias", "tied"):
            if not isinstance(values.get(field, True), bool):
                raise CheckpointError(f"{label} has an unsupported configuration: {field} is "
                                      f"{str(values[field])[:20]!r}, not True or False")
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
    parameters = (1 if config.tied else 2) * config.vocab_size * C + 12 * config.n_layer * C * C
    if config.position == "learned":
        parameters += config.block_size * C
    if 4 * parameters > max_bytes:
        raise CheckpointError(f"{label} declares a model of {parameters / 1e6:,.0f} million parameters "
                              f"({4 * parameters / 2**20:,.0f} MB in memory), over the {max_bytes / 2**20:.0f} MB limit")


def _build(config: GPTConfig, state: dict, label: str) -> GPT:
    try:
        model = GPT.empty(config)  # every weight comes from the file, so none is drawn
    except (TypeError, ValueError, RuntimeError) as e:  # e.g. a dropout that is not a number
        raise CheckpointError(f"{label} has an unsupported configuration: {str(e)[:200]}") from None
    if "transformer.wte.ids" in state:
        ids, rows = state.pop("transformer.wte.ids"), state.pop("transformer.wte.rows", None)
        if (not isinstance(ids, torch.Tensor) or not isinstance(rows, torch.Tensor) or ids.ndim != 1
                or ids.dtype not in (torch.int32, torch.int64) or rows.shape != (len(ids), config.n_embd)
                or (ids.numel() and not 0 <= int(ids.min()) <= int(ids.max()) < config.vocab_size)):
            raise CheckpointError(f"{label} has token rows of the wrong shape")
        table = initial_token_table(config)  # the initial rows, rebuilt from config.init_seed
        table[ids] = rows.float()
        state["transformer.wte.weight"] = table
        model.output_vocab = ids.long()
    for key in ("transformer.wte.weight", "lm_head.weight"):
        if isinstance(state.get(key), torch.Tensor) and state[key].ndim == 2:
            state[key] = state[key][: config.vocab_size]  # nanoGPT's padding rows are never tokens
    if config.tied:
        head, table = state.get("lm_head.weight"), state.get("transformer.wte.weight")
        if isinstance(head, torch.Tensor) and not (isinstance(table, torch.Tensor) and head.shape == table.shape
                                                   and torch.equal(head, table)):
            raise CheckpointError(f"{label} says its head is tied to the token table, but lm_head.weight holds other values")
        state["lm_head.weight"] = table
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
