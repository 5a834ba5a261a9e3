"""The lpos format: one file, a plain dict readable with `torch.load(weights_only=True)`.

{"format": "lpos", "version": 1, "config": {...GPTConfig fields}, "state_dict": {...},
"meta": {...}}. When a model was trained over a corpus vocabulary (`model.output_vocab`), only
those token rows are stored (`transformer.wte.ids` and `transformer.wte.rows`, float16); every
other row is its initial value, rebuilt from `config.init_seed`. That keeps a shipped file under
8 MB and makes "a token never seen keeps its random row" literally true. A model on a tokenizer
other than GPT-2's carries it in meta["tokenizer"] as plain data (`Tokenizer.to_data`: strings,
numbers, bytes), so the file alone gives the same encodings; reading it gives the `Tokenizer` back.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from lpos.checkpoints.build import build_model, model_config, takes_mapped
from lpos.checkpoints.errors import CheckpointError, as_dict
from lpos.model import GPT
from lpos.tokenizer import Tokenizer, TokenizerError, from_data

FORMAT_VERSION = 1


def is_lpos(payload: dict) -> bool:
    return payload.get("format") == "lpos"


def save(model: GPT, meta: dict, path: str | Path) -> None:
    """Write `model` and `meta` to `path` in the lpos format (atomically: never half a file)."""
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
        "meta": plain_meta(meta),
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(payload, tmp)
    tmp.replace(path)  # never leave a half-written checkpoint behind


def plain_meta(meta: dict) -> dict:
    """meta with its Tokenizer as plain data; GPT-2's, the default, is left out."""
    tokenizer = meta.get("tokenizer")
    meta = {k: v for k, v in meta.items() if k != "tokenizer"}
    if isinstance(tokenizer, Tokenizer) and not tokenizer.is_gpt2:
        meta["tokenizer"] = tokenizer.to_data()
    return meta


def read_lpos(payload: dict, label: str, max_bytes: int, *, tokenizer: Tokenizer | None = None,
              mapped_bytes: int | None = None, shared_table: bool = False) -> tuple[GPT, dict]:
    """The model and meta of an lpos payload; meta["tokenizer"] the Tokenizer it speaks (`tokenizer`
    if given, else the one the file carries, else GPT-2's). `mapped_bytes`: the size of the file the payload is
    mapped from when its tensors may stay the model's weights (lpos.checkpoints.reading.load's `mapped`:
    build.takes_mapped), as a Llama's always do. `shared_table`: build_model's."""
    if payload.get("version") != FORMAT_VERSION:
        raise CheckpointError(f"{label} is lpos format version {payload.get('version')}; this lpos reads {FORMAT_VERSION}")
    meta = as_dict(payload.get("meta", {}), label, "meta")
    if tokenizer is None and meta.get("tokenizer") is not None:
        try:
            tokenizer = from_data(meta["tokenizer"])
        except TokenizerError as e:
            raise CheckpointError(f"{label}: {e}") from None
    config, meta["tokenizer"] = model_config(as_dict(payload.get("config"), label, "config"), label, max_bytes,
                                             tokenizer=tokenizer)
    state = as_dict(payload.get("state_dict"), label, "state_dict")
    return build_model(config, state, label, in_place=config.mlp != "standard" or takes_mapped(state, mapped_bytes),
                       shared_table=shared_table), meta
