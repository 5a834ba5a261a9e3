"""GPT-2-shaped torch files, recognised by their keys and renamed to lpos's (nanoGPT) names.

Every layout here is a GPT-2-shaped model with a learned position table; they differ in names
and in what is packed around the weights:

| layout | recognised by |
|---|---|
| nanoGPT `ckpt.pt` | "model" beside "model_args" |
| trainer dict | "model", "model_state_dict" or "state_dict" beside "optimizer", "config" (a dict or the trainer's own config object), "iter_num", ... e.g. the Tiny Children Stories trainer, whose blocks are named `ln1` / `ln2` |
| bare state_dict | nothing but tensors, among them a `wte.weight` token table |
| Hugging Face GPT-2 | GPT2Model keys (`h.0.attn.c_attn.weight`, `wte.weight`: no `transformer.`), Conv1D weights stored (in, out) |

In all of them keys may carry `module.` (DistributedDataParallel) and `_orig_mod.`
(torch.compile) in front, the causal mask may be saved as a buffer, and the token table may be
padded (nanoGPT: 50,304 rows). The shapes say the vocabulary, width, layer count, block size,
whether there are biases and whether the head is tied; the head count is in no shape, so it
comes from the file's own configuration or from the caller.
"""
from __future__ import annotations

import re

import torch

from lpos.checkpoints.errors import CheckpointError, NeedsHeadCount, as_dict
from lpos.checkpoints.layouts.recognised import FileLayout, Recognised, key_name, number
from lpos.checkpoints.payload import PickledConfig

STATE_KEYS = ("model", "model_state_dict", "state_dict")  # where trainers put the weights
WRAPPERS = ("module.", "_orig_mod.")  # DistributedDataParallel, torch.compile; either order, either alone
GPT2MODEL_ROOTS = ("wte.", "wpe.", "h.", "ln_f.")  # Hugging Face GPT2Model: no "transformer." in front
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
MASK_BUFFERS = (".attn.bias", ".attn.masked_bias")  # causal masks saved as buffers (not c_attn.bias)
DECLARED_FIELDS = ("vocab_size", "block_size", "n_layer", "n_head", "n_embd", "bias", "dropout")
META_NUMBERS = ("iter_num", "best_val_loss", "loss")  # kept in meta; any other entry is listed as ignored
LAYER = re.compile(r"transformer\.h\.(\d+)\.")


def read_nanogpt(payload: dict, label: str) -> Recognised:
    declared = as_dict(payload["model_args"], label, "model_args")
    return _read(payload, label, "nanoGPT ckpt.pt", "model", declared, {"model", "model_args"})


def read_trainer_dict(payload: dict, label: str) -> Recognised:
    state_key = next(k for k in STATE_KEYS if isinstance(payload.get(k), dict))
    declared, source = declared_config(payload.get("config"))
    layout = f"trainer dict (weights in {state_key!r}{f', config from {source}' if source else ''})"
    return _read(payload, label, layout, state_key, declared, {state_key, "config"} if source else {state_key})


def read_bare_state_dict(payload: dict, label: str) -> Recognised:
    return _read(payload, label, "bare state_dict", None, {}, set(payload))


FILE_LAYOUTS = (  # tried in this order
    FileLayout("nanoGPT ckpt.pt", lambda p: "model_args" in p and "model" in p, read_nanogpt),
    FileLayout("trainer dict", lambda p: any(isinstance(p.get(k), dict) for k in STATE_KEYS), read_trainer_dict),
    FileLayout("bare state_dict", lambda p: bool(p) and all(isinstance(v, torch.Tensor) for v in p.values()),
               read_bare_state_dict),
)


def _read(payload: dict, label: str, layout: str, state_key: str | None, declared: dict, used: set) -> Recognised:
    state = payload if state_key is None else as_dict(payload[state_key], label, state_key)
    meta = {k: number(payload[k]) for k in META_NUMBERS if number(payload.get(k)) is not None}
    ignored = [key_name(k) for k in payload if k not in used and k not in meta]
    return from_state(state, label, layout=layout, declared=declared, meta=meta, ignored=ignored)


def from_state(state: dict, label: str, *, layout: str, declared: dict, meta: dict | None = None,
               ignored: list[str] | None = None) -> Recognised:
    """Rename a state_dict's keys to lpos's; note what was adjusted and what was left out."""
    ignored, notes, renamed, masks = list(ignored or []), [], {}, 0
    for key, tensor in state.items():
        name = str(key)
        while name.startswith(WRAPPERS):
            wrapper = next(w for w in WRAPPERS if name.startswith(w))
            name = name.removeprefix(wrapper)
            _note(notes, f"{wrapper} prefixes removed")
        if name.startswith(GPT2MODEL_ROOTS):
            name = "transformer." + name
            _note(notes, "GPT2Model keys")
        name, blocks = re.subn(r"^(transformer\.h\.\d+\.)ln([12])\.", r"\1ln_\2.", name)
        if blocks:
            _note(notes, "blocks named ln1/ln2")
        if name.endswith(MASK_BUFFERS):
            masks += 1
        elif not isinstance(tensor, torch.Tensor):
            ignored.append(f"{key_name(key)} (not a tensor)")
        else:
            renamed[name] = tensor
    if masks:
        ignored.append(f"{masks} causal-mask buffers")
    wte = renamed.get("transformer.wte.weight")
    if not isinstance(wte, torch.Tensor) or wte.ndim != 2:
        raise CheckpointError(f"{label} has no token table (a 2-D transformer.wte.weight), so it is not a GPT lpos can read")
    width = wte.shape[1]
    attn = renamed.get("transformer.h.0.attn.c_attn.weight")
    if isinstance(attn, torch.Tensor) and tuple(attn.shape) == (width, 3 * width):  # Conv1D: (in, out)
        for key in [k for k in renamed if k.endswith(CONV1D)]:
            renamed[key] = renamed[key].T
        _note(notes, "Conv1D weights transposed")
        activation = "gelu_tanh"  # GPT-2's gelu_new
    else:
        activation = "gelu"  # nn.GELU(), as nanoGPT
    layout += f"; {', '.join(notes)}" if notes else ""
    return Recognised(layout, renamed, declared, activation, meta or {}, ignored)


def config_values(found: Recognised, *, n_head: int | None, label: str) -> dict:
    """GPTConfig values: what the shapes tell, overridden by what the file declares; the head
    count from the file, else `n_head`, else NeedsHeadCount."""
    state = found.state
    wte = state["transformer.wte.weight"]
    head = state.get("lm_head.weight")
    tied = head is None or (head.shape == wte.shape and torch.equal(head, wte) and "lm_head.bias" not in state)
    if tied:
        state.pop("lm_head.weight", None)  # the token table, saved twice
    layers = {int(m.group(1)) for key in state if (m := LAYER.match(key))}
    values = dict(vocab_size=wte.shape[0], n_embd=wte.shape[1], n_layer=max(layers) + 1 if layers else 0,
                  bias="transformer.ln_f.bias" in state, position="learned", activation=found.activation, tied=tied,
                  head_bias="lm_head.bias" in state)
    qkv_bias = "transformer.h.0.attn.c_attn.bias" in state
    if layers and qkv_bias != values["bias"]:  # Raschka's qkv_bias=False beside biased layers; Karpathy's lecture
        values["qkv_bias"] = qkv_bias
    if isinstance(state.get("transformer.wpe.weight"), torch.Tensor):
        values["block_size"] = state["transformer.wpe.weight"].shape[0]
    values.update({k: found.declared[k] for k in DECLARED_FIELDS if k in found.declared})
    if values.get("n_head") is None:
        if n_head is None:
            raise NeedsHeadCount(label, wte.shape[1])
        values["n_head"] = n_head
    return values


def declared_config(value) -> tuple[dict, str]:
    """The values of a config dict or of a pickled config object's stand-in, and where they came from."""
    if isinstance(value, PickledConfig):
        return dict(getattr(value, "fields", {})), f"a {value.source} object"
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if isinstance(k, str)}, "a config dict"
    return {}, ""


def _note(notes: list[str], note: str) -> None:
    if note not in notes:
        notes.append(note)
