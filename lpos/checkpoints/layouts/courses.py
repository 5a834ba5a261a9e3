"""Models learners build in the from-scratch courses, recognised by their keys and renamed to
lpos's (nanoGPT) names. Both are GPT-2-shaped (pre-LayerNorm blocks, a learned position table);
they differ in names, in which parts carry a bias, and in the activation:

| course | keys | differences from nanoGPT |
|---|---|---|
| "Build a Large Language Model (From Scratch)" (rasbt/LLMs-from-scratch `GPTModel`) | `tok_emb`, `pos_emb`, `trf_blocks.N.att.W_query/W_key/W_value`, `att.out_proj`, `ff.layers.0/2`, `norm1/norm2/final_norm.scale/shift`, `out_head` | q/k/v biased only with `qkv_bias=True`; tanh GELU; head untied; n_head not in the file |
| Karpathy's "Let's build GPT" lecture (`gpt.py` of ng-video-lecture) | `token_embedding_table`, `position_embedding_table`, `blocks.N.sa.heads.M.key/query/value`, `sa.proj`, `ffwd.net.0/2`, `ln1/ln2/ln_f`, `lm_head` | one Linear per head, no q/k/v bias; ReLU; `lm_head` has a bias; n_head is the number of heads M |

Saved as `torch.save(model.state_dict())` (a bare state_dict) or, in the book's chapter 5, as
`{"model_state_dict": ..., "optimizer_state_dict": ...}`. Per-head and separate q/k/v weights are
stacked into one `c_attn` (the query rows of every head, then the keys, then the values), which
is exactly what the course's concatenation of heads computes. nanoGPT's `shakespeare_char` is an
ordinary nanoGPT ckpt.pt (lpos.checkpoints.layouts.gpt2) whose 65 characters come from meta.pkl.
"""
from __future__ import annotations

import re

import torch

from lpos.checkpoints.errors import CheckpointError
from lpos.checkpoints.layouts.gpt2 import STATE_KEYS, WRAPPERS, from_state
from lpos.checkpoints.layouts.recognised import FileLayout, Recognised, key_name

LINEAR = {"weight": "weight", "bias": "bias"}  # a Linear's or LayerNorm's parameters, named as lpos names them
RASCHKA_NORM = {"scale": "weight", "shift": "bias"}  # the book's own LayerNorm


def parameter_names(modules: dict[str, str], parameters: dict[str, str] = LINEAR) -> dict[str, str]:
    """Parameter names, theirs -> lpos's, of modules renamed `modules` whose parameters are named `parameters`."""
    return {f"{theirs}.{p}": f"{ours}.{q}" for theirs, ours in modules.items() for p, q in parameters.items()}


# each course's names -> lpos's; the block keys are those after "trf_blocks.N." / "blocks.N."
RASCHKA = {"tok_emb.weight": "transformer.wte.weight", "pos_emb.weight": "transformer.wpe.weight",
           **parameter_names({"final_norm": "transformer.ln_f"}, RASCHKA_NORM),
           **parameter_names({"out_head": "lm_head"})}
RASCHKA_BLOCK = {**parameter_names({"att.out_proj": "attn.c_proj", "ff.layers.0": "mlp.c_fc",
                                    "ff.layers.2": "mlp.c_proj"}),
                 **parameter_names({"norm1": "ln_1", "norm2": "ln_2"}, RASCHKA_NORM)}
LECTURE = {"token_embedding_table.weight": "transformer.wte.weight",
           "position_embedding_table.weight": "transformer.wpe.weight",
           **parameter_names({"ln_f": "transformer.ln_f", "lm_head": "lm_head"})}
LECTURE_BLOCK = parameter_names({"sa.proj": "attn.c_proj", "ffwd.net.0": "mlp.c_fc", "ffwd.net.2": "mlp.c_proj",
                                 "ln1": "ln_1", "ln2": "ln_2"})
RASCHKA_QKV = re.compile(r"trf_blocks\.(\d+)\.att\.W_(query|key|value)\.(weight|bias)")
LECTURE_HEAD = re.compile(r"blocks\.(\d+)\.sa\.heads\.(\d+)\.(query|key|value)\.weight")
MASKS = re.compile(r"(trf_blocks\.\d+\.att\.mask|blocks\.\d+\.sa\.heads\.\d+\.tril)")  # causal masks saved as buffers


def unwrapped(state: dict) -> dict:
    """Keys without DistributedDataParallel's `module.` and torch.compile's `_orig_mod.`."""
    plain = {}
    for key, value in state.items():
        name = str(key)
        while name.startswith(WRAPPERS):
            name = name[name.index(".") + 1:]
        plain[name] = value
    return plain


def weights_of(payload: dict) -> dict | None:
    """The state_dict in a payload: the payload itself (all tensors) or a trainer's 'model_state_dict'."""
    if payload and all(isinstance(v, torch.Tensor) for v in payload.values()):
        return payload
    return next((payload[k] for k in STATE_KEYS if isinstance(payload.get(k), dict)), None)


def is_raschka(payload: dict) -> bool:
    state = weights_of(payload)
    return state is not None and "tok_emb.weight" in unwrapped(state)


def is_lecture(payload: dict) -> bool:
    state = weights_of(payload)
    return state is not None and "token_embedding_table.weight" in unwrapped(state)


def _rename(state: dict, names: dict, block_names: dict, block: re.Pattern) -> tuple[dict, list[str]]:
    """Tensors renamed by `names` and, inside blocks, `block_names`; what was left and the masks skipped."""
    renamed, ignored, masks = {}, [], 0
    for key, tensor in state.items():
        if MASKS.fullmatch(key):
            masks += 1
            continue
        if not isinstance(tensor, torch.Tensor):
            ignored.append(f"{key_name(key)} (not a tensor)")
            continue
        if key in names:
            renamed[names[key]] = tensor
        elif (m := block.fullmatch(key)) and m.group(2) in block_names:
            renamed[f"transformer.h.{m.group(1)}.{block_names[m.group(2)]}"] = tensor
        else:
            renamed[f"unknown.{key_name(key)}"] = tensor  # build_model names it as unexpected
    if masks:
        ignored.append(f"{masks} causal-mask buffers")
    return renamed, ignored


def _stacked(parts: dict, label: str, what: str) -> torch.Tensor:
    """Query, key and value tensors stacked into c_attn's rows, or CheckpointError if one is missing."""
    if set(parts) != {"query", "key", "value"}:
        raise CheckpointError(f"{label} has {what} without all of its query, key and value weights")
    return torch.cat([parts["query"], parts["key"], parts["value"]], dim=0)


def read_raschka(payload: dict, label: str) -> Recognised:
    weights = weights_of(payload)
    state = unwrapped(weights)
    qkv: dict[tuple[str, str], dict[str, torch.Tensor]] = {}
    rest = {}
    for key, tensor in state.items():
        if m := RASCHKA_QKV.fullmatch(key):
            qkv.setdefault((m.group(1), m.group(3)), {})[m.group(2)] = tensor
        else:
            rest[key] = tensor
    renamed, ignored = _rename(rest, RASCHKA, RASCHKA_BLOCK, re.compile(r"trf_blocks\.(\d+)\.(.+)"))
    for (layer, kind), parts in qkv.items():
        renamed[f"transformer.h.{layer}.attn.c_attn.{kind}"] = _stacked(parts, label, f"block {layer}")
    declared = {}
    config = payload.get("config") if isinstance(payload.get("config"), dict) else {}
    if isinstance(config.get("n_heads"), int):  # the book's GPT_CONFIG_124M, if saved beside the weights
        declared["n_head"] = config["n_heads"]
    extras = [key_name(k) for k in payload if k not in ("model_state_dict", "config")] if weights is not payload else []
    found = from_state(renamed, label, layout="Build a Large Language Model (From Scratch) GPTModel",
                       declared=declared, ignored=[*extras, *ignored])
    found.activation = "gelu_tanh"  # the book's GELU is the tanh approximation
    return found


def read_lecture(payload: dict, label: str) -> Recognised:
    state = unwrapped(weights_of(payload))
    heads: dict[str, dict[str, dict[int, torch.Tensor]]] = {}
    rest = {}
    for key, tensor in state.items():
        if m := LECTURE_HEAD.fullmatch(key):
            heads.setdefault(m.group(1), {}).setdefault(m.group(3), {})[int(m.group(2))] = tensor
        else:
            rest[key] = tensor
    renamed, ignored = _rename(rest, LECTURE, LECTURE_BLOCK, re.compile(r"blocks\.(\d+)\.(.+)"))
    counts = set()
    for layer, parts in heads.items():
        for kind, by_head in parts.items():
            if sorted(by_head) != list(range(len(by_head))):
                raise CheckpointError(f"{label}: block {layer}'s {kind} heads are not numbered 0 to {len(by_head) - 1}")
            counts.add(len(by_head))
        stacked = {kind: torch.cat([by_head[h] for h in sorted(by_head)], dim=0) for kind, by_head in parts.items()}
        renamed[f"transformer.h.{layer}.attn.c_attn.weight"] = _stacked(stacked, label, f"block {layer}")
    if len(counts) > 1:
        raise CheckpointError(f"{label}'s blocks have different numbers of heads ({sorted(counts)})")
    found = from_state(renamed, label, layout="Let's build GPT lecture (gpt.py)",
                       declared={"n_head": counts.pop()} if counts else {}, ignored=ignored)
    found.activation = "relu"  # the lecture's FeedForward: Linear, ReLU, Linear
    return found


FILE_LAYOUTS = (  # tried before the GPT-2 family's: a bare state_dict or trainer dict of these names is a course's
    FileLayout("Build a Large Language Model (From Scratch) GPTModel", is_raschka, read_raschka),
    FileLayout("Let's build GPT lecture", is_lecture, read_lecture),
)
