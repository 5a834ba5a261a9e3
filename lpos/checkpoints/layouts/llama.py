"""Llama-shaped models (llama2.c, Hugging Face LlamaForCausalLM) renamed to lpos's names.

Every Llama layout reads its tensors under llama2.c's names (`tok_embeddings.weight`,
`layers.N.attention.wq.weight`, `layers.N.feed_forward.w1.weight`, `layers.N.attention_norm.weight`,
`norm.weight`, `output.weight`, ...) through a `fetch(name)` that gives one float32 tensor at a
time, and `assemble` puts them in an lpos GPT's places: wq, wk, wv stacked into `c_attn` (query
rows, then key rows, then value rows), w1/w2/w3 into the block's SwiGLU, the norms into ln_1,
ln_2 and ln_f. This module also reads the Hugging Face folder (`config.json` with
`model_type: "llama"` beside `model.safetensors`, or shards listed in
`model.safetensors.index.json`): bfloat16 and float16 weights become float32 one tensor at a time,
and the query and key rows of each head are permuted from Hugging Face's rotate_half pairs
(i, i + hs/2) to the adjacent pairs (2i, 2i+1) lpos, Meta and llama2.c rotate.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import torch

from lpos.checkpoints.errors import CheckpointError
from lpos.checkpoints.layouts.hf_rope import rope_values
from lpos.checkpoints.layouts.recognised import FolderLayout, Recognised
from lpos.layers import parameter_count
from lpos.model import GPTConfig

MAX_CONFIG_BYTES = 1024 * 1024
MAX_SIZE = 1 << 20  # no width, layer count, head count or vocabulary of a real model is over a million
HF_SINGLE, HF_INDEX = "model.safetensors", "model.safetensors.index.json"
TOKENIZER_NAMES = ("tokenizer.json", "tokenizer.model")  # Hugging Face's, SentencePiece's (llama2.c, Meta)
HF_NAMES = {  # Hugging Face's names -> llama2.c's; "{i}" is the layer
    "model.embed_tokens.weight": "tok_embeddings.weight",
    "model.norm.weight": "norm.weight",
    "lm_head.weight": "output.weight",
    "model.layers.{i}.self_attn.q_proj.weight": "layers.{i}.attention.wq.weight",
    "model.layers.{i}.self_attn.k_proj.weight": "layers.{i}.attention.wk.weight",
    "model.layers.{i}.self_attn.v_proj.weight": "layers.{i}.attention.wv.weight",
    "model.layers.{i}.self_attn.o_proj.weight": "layers.{i}.attention.wo.weight",
    "model.layers.{i}.mlp.gate_proj.weight": "layers.{i}.feed_forward.w1.weight",
    "model.layers.{i}.mlp.down_proj.weight": "layers.{i}.feed_forward.w2.weight",
    "model.layers.{i}.mlp.up_proj.weight": "layers.{i}.feed_forward.w3.weight",
    "model.layers.{i}.input_layernorm.weight": "layers.{i}.attention_norm.weight",
    "model.layers.{i}.post_attention_layernorm.weight": "layers.{i}.ffn_norm.weight",
}


def llama_values(*, vocab_size: int, dim: int, hidden_dim: int, n_layers: int, n_heads: int, n_kv_heads: int,
                 max_seq_len: int, norm_eps: float, tied: bool, rope_base: float = 10000.0) -> dict:
    """GPTConfig values of a Llama with these sizes."""
    return dict(vocab_size=vocab_size, n_embd=dim, mlp_hidden=hidden_dim, n_layer=n_layers, n_head=n_heads,
                n_kv_head=n_kv_heads, block_size=max_seq_len, norm_eps=norm_eps, tied=tied, rope_base=rope_base,
                position="rope", norm="rmsnorm", mlp="swiglu", bias=False)


def held_bytes(config: GPTConfig, *, half: bool) -> int:
    """The bytes a model's weights take held: float32, or with `half` its blocks' matrices in two bytes each
    (a bfloat16 or float16 file kept as stored; the token table and the head stay float32)."""
    parameters = parameter_count(config)
    tables = (1 if config.tied else 2) * config.vocab_size * config.n_embd
    return 4 * parameters - (2 * (parameters - tables) if half else 0)


def stored_half(hf: dict, float32: bool) -> bool:
    """Whether a config.json's weights are stored in bfloat16 or float16 and will be held so."""
    return not float32 and str(hf.get("dtype") or hf.get("torch_dtype")) in ("bfloat16", "float16")


def check_sizes(values: dict, label: str, max_bytes: int, *, half: bool = False) -> GPTConfig:
    """The GPTConfig of a Llama's declared sizes, refused (before anything is read or allocated)
    when a size is not a positive whole number under a million, the heads do not divide the
    width, or the weights as held (`held_bytes`) would pass `max_bytes`."""
    for field in ("vocab_size", "n_embd", "mlp_hidden", "n_layer", "n_head", "n_kv_head", "block_size"):
        value = values[field]
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_SIZE:
            raise CheckpointError(f"{label} declares {field} = {str(value)[:20]}, not a whole number from 1 to {MAX_SIZE:,}")
    if values["n_embd"] % values["n_head"] or values["n_head"] % values["n_kv_head"]:
        raise CheckpointError(f"{label} declares {values['n_head']} heads and {values['n_kv_head']} key/value heads "
                              f"over a width of {values['n_embd']}: the heads must divide the width and the "
                              "key/value heads the heads")
    if (values["n_embd"] // values["n_head"]) % 2:
        raise CheckpointError(f"{label} has an odd head size, {values['n_embd'] // values['n_head']}; RoPE turns pairs")
    if not (isinstance(values["norm_eps"], float) and 0 < values["norm_eps"] < 1):
        raise CheckpointError(f"{label} declares a norm epsilon of {str(values['norm_eps'])[:20]}, not between 0 and 1")
    if not (isinstance(values["rope_base"], float) and 1 < values["rope_base"] < 1e12):
        raise CheckpointError(f"{label} declares a RoPE base of {str(values['rope_base'])[:20]}, not a number over 1")
    config = GPTConfig.from_dict(values)
    check_memory(config, label, max_bytes, half=half)
    return config


def check_memory(config: GPTConfig, label: str, max_bytes: int, *, half: bool) -> None:
    held = held_bytes(config, half=half)
    if held > max_bytes:
        raise CheckpointError(f"{label} declares a model of {parameter_count(config) / 1e6:,.0f} million parameters "
                              f"({held / 2**20:,.0f} MB in memory), over the {max_bytes / 2**20:.0f} MB limit "
                              "(LPOS_MAX_UPLOAD_MB raises it)")


def assemble(config: GPTConfig, fetch: Callable[[str], torch.Tensor], label: str) -> dict:
    """lpos's state dict of a Llama from `fetch(llama2c_name)` (float32 tensors, one at a time),
    each checked for its shape."""
    C, hs = config.n_embd, config.n_embd // config.n_head
    kv, hidden, V = config.n_kv_head * hs, config.mlp_hidden, config.vocab_size

    def get(name: str, shape: tuple[int, ...]) -> torch.Tensor:
        tensor = fetch(name)
        if tuple(tensor.shape) != shape:
            raise CheckpointError(f"{label}: {name} has shape {tuple(tensor.shape)}, expected {shape}")
        return tensor

    state = {"transformer.wte.weight": get("tok_embeddings.weight", (V, C)),
             "transformer.ln_f.weight": get("norm.weight", (C,))}
    if not config.tied:
        state["lm_head.weight"] = get("output.weight", (V, C))
    for i in range(config.n_layer):
        block, source = f"transformer.h.{i}.", f"layers.{i}."
        state[block + "attn.c_attn.weight"] = torch.cat([  # (C + 2 kv, C): query rows, key rows, value rows
            get(source + "attention.wq.weight", (C, C)), get(source + "attention.wk.weight", (kv, C)),
            get(source + "attention.wv.weight", (kv, C))])
        state[block + "attn.c_proj.weight"] = get(source + "attention.wo.weight", (C, C))
        state[block + "mlp.w1.weight"] = get(source + "feed_forward.w1.weight", (hidden, C))
        state[block + "mlp.w2.weight"] = get(source + "feed_forward.w2.weight", (C, hidden))
        state[block + "mlp.w3.weight"] = get(source + "feed_forward.w3.weight", (hidden, C))
        state[block + "ln_1.weight"] = get(source + "attention_norm.weight", (C,))
        state[block + "ln_2.weight"] = get(source + "ffn_norm.weight", (C,))
    return state


def adjacent_pairs(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Rows (n_heads * hs, C) of a query or key projection reordered from Hugging Face's
    rotate_half pairs (j, j + hs/2) to adjacent pairs (2j, 2j + 1): within each head, row 2j
    takes row j and row 2j + 1 takes row j + hs/2. Queries and keys move alike, so every
    score, and the model's logits, stay as they were."""
    hs = weight.shape[0] // n_heads
    order = torch.arange(hs).view(2, hs // 2).T.reshape(hs)  # 0, hs/2, 1, hs/2 + 1, ...
    return weight.view(n_heads, hs, -1)[:, order].reshape(weight.shape)  # (n_heads * hs, C)


def tokenizer_beside(folder: Path) -> Path | None:
    """The tokenizer file that came with a model in `folder`, if any."""
    return next((folder / name for name in TOKENIZER_NAMES if (folder / name).is_file()), None)


def read_json(path: Path, label: str) -> dict:
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise CheckpointError(f"{label}: {path.name} is over {MAX_CONFIG_BYTES // 1024} kB, so it is not a model configuration")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise CheckpointError(f"{label}: {path.name} could not be read ({type(e).__name__})") from None
    if not isinstance(value, dict):
        raise CheckpointError(f"{label}: {path.name} does not hold a JSON object")
    return value


def is_hf_llama(folder: Path) -> bool:
    config = folder / "config.json"
    try:
        return config.is_file() and config.stat().st_size <= MAX_CONFIG_BYTES and \
            json.loads(config.read_text(encoding="utf-8")).get("model_type") == "llama"
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return False


def hf_values(hf: dict, label: str) -> dict:
    """GPTConfig values from a Llama config.json, its RoPE read as lpos.checkpoints.layouts.hf_rope reads
    every family's (Llama 3.1 and 3.2 rescale with llama3); what lpos cannot reproduce is refused by name."""
    if hf.get("hidden_act", "silu") != "silu":
        raise CheckpointError(f"{label} uses hidden_act {str(hf.get('hidden_act'))[:20]!r}; a Llama's SwiGLU uses silu")
    if hf.get("attention_bias") or hf.get("mlp_bias"):
        raise CheckpointError(f"{label} has biases in its attention or feed-forward; lpos reads Llamas without them")
    heads, width = hf.get("num_attention_heads"), hf.get("hidden_size")
    if hf.get("head_dim") is not None and isinstance(heads, int) and isinstance(width, int) and heads \
            and hf["head_dim"] != width // heads:
        raise CheckpointError(f"{label} has head_dim {hf['head_dim']}, not its width over its heads; lpos cannot read it")
    layers = hf.get("num_hidden_layers")
    rope = rope_values(hf, ["full_attention"] * (layers if isinstance(layers, int) and 0 < layers <= MAX_SIZE else 1),
                       label=label)
    values = llama_values(vocab_size=hf.get("vocab_size"), dim=width, hidden_dim=hf.get("intermediate_size"),
                          n_layers=layers, n_heads=heads, n_kv_heads=hf.get("num_key_value_heads") or heads,
                          max_seq_len=hf.get("max_position_embeddings", 2048),
                          norm_eps=as_float(hf.get("rms_norm_eps", 1e-6)),
                          tied=bool(hf.get("tie_word_embeddings", False)), rope_base=rope.pop("rope_base"))
    return {**values, **rope}


def as_float(value):
    """A JSON number as a float; anything else as it is (check_sizes names it)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def shard_files(folder: Path, label: str) -> list[Path]:
    """The safetensors files of a folder: model.safetensors, or the shards its index names
    (plain file names inside the folder only)."""
    if (folder / HF_SINGLE).is_file():
        return [folder / HF_SINGLE]
    if not (folder / HF_INDEX).is_file():
        raise CheckpointError(f"{label} has config.json but neither {HF_SINGLE} nor {HF_INDEX}")
    weight_map = read_json(folder / HF_INDEX, label).get("weight_map")
    if not isinstance(weight_map, dict):
        raise CheckpointError(f"{label}: {HF_INDEX} has no weight_map")
    names = sorted({str(name) for name in weight_map.values()})
    for name in names:
        if Path(name).name != name or not name.endswith(".safetensors") or not (folder / name).is_file():
            raise CheckpointError(f"{label}: {HF_INDEX} names {name[:60]!r}, which is not a .safetensors file in the folder")
    return [folder / name for name in names]


def held_words(dtypes: set[str], float32: bool) -> str:
    """How a folder's weights are held, after the precisions it stores: "" for float32 files."""
    low = sorted(dtypes - {"float32"})
    if not low:
        return ""
    return " read as float32" if float32 else f" (the blocks' matrices held in {', '.join(low)}, the rest float32)"


def read_hf_llama(folder: Path, max_bytes: int, *, float32: bool = False) -> Recognised:
    from safetensors import safe_open

    label = folder.name
    hf = read_json(folder / "config.json", label)
    values = hf_values(hf, label)
    config = check_sizes(values, label, max_bytes, half=stored_half(hf, float32))
    files = shard_files(folder, label)
    if sum(f.stat().st_size for f in files) > max_bytes:
        raise CheckpointError(f"{label}'s weights are over the {max_bytes / 2**20:.0f} MB limit")
    where: dict[str, Path] = {}
    try:
        for file in files:
            with safe_open(str(file), framework="pt") as handle:
                where.update({key: file for key in handle.keys()})
    except Exception as e:  # a damaged header raises many kinds of errors
        raise CheckpointError(f"{label}: {file.name} could not be read ({type(e).__name__}): the file is damaged") from None
    renamed = {theirs.format(i=i): ours.format(i=i) for theirs, ours in HF_NAMES.items()
               for i in (range(config.n_layer) if "{i}" in theirs else [0])}
    theirs_of = {ours: theirs for theirs, ours in renamed.items()}
    tied_note = []
    if config.tied and "lm_head.weight" in where:
        tied_note = ["lm_head.weight (the token table again: the head is tied)"]

    def fetch(name: str) -> torch.Tensor:
        key = theirs_of[name]
        if key not in where:
            raise CheckpointError(f"{label} has no {key}, so it is not a complete Llama")
        try:
            with safe_open(str(where[key]), framework="pt") as handle:
                tensor = handle.get_tensor(key)
        except Exception as e:
            raise CheckpointError(f"{label}: {key} could not be read ({type(e).__name__}): the file is damaged") from None
        if not tensor.is_floating_point():
            raise CheckpointError(f"{label}: {key} holds {tensor.dtype}, not floating-point weights")
        if float32 or tensor.ndim != 2 or name in ("tok_embeddings.weight", "output.weight"):
            tensor = tensor.float()  # one float32 tensor at a time (a no-op on float32 files)
        if name.endswith(("wq.weight", "wk.weight")) and tensor.ndim == 2:
            heads = config.n_head if name.endswith("wq.weight") else config.n_kv_head
            if tensor.shape[0] % heads == 0 and (tensor.shape[0] // heads) % 2 == 0:
                tensor = adjacent_pairs(tensor, heads)
        return tensor

    state = assemble(config, fetch, label)
    ignored = tied_note + sorted(key for key in where if key not in renamed)[:8]
    dtypes = {str(hf.get("dtype") or hf.get("torch_dtype") or "float32")}
    layout = (f"Hugging Face Llama folder (config.json + {', '.join(f.name for f in files[:3])}"
              f"{' ...' if len(files) > 3 else ''}; {', '.join(dtypes)}{held_words(dtypes, float32)}; "
              "query and key rows turned from rotate_half to adjacent pairs)")
    meta = {"training_length": values["block_size"], "rope_base": values["rope_base"]}
    return Recognised(layout, state, {}, "gelu", meta, ignored, tokenizer=tokenizer_beside(folder), values=values)


FOLDER_LAYOUTS = (FolderLayout("Hugging Face Llama folder", is_hf_llama, read_hf_llama,
                               f"a config.json of model_type llama and {HF_SINGLE} or {HF_INDEX} with its shards"),)
