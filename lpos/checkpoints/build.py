"""From configuration values and renamed tensors to a GPT: every check before anything is built.

A configuration is checked before any model is built (sizes are positive whole numbers, the
vocabulary is GPT-2's, the float32 weights fit under the cap), so a small file cannot ask for
more memory than the cap. Every weight then comes from the file, except the token rows an lpos
file leaves out: those are rebuilt from `config.init_seed`, as the model drew them.
"""
from __future__ import annotations

import torch

from lpos.checkpoints.errors import CheckpointError
from lpos.model import GPT, GPTConfig, initial_token_table
from lpos.tokenizer import VOCAB_SIZE

SIZE_FIELDS = ("n_layer", "n_head", "n_embd", "block_size")
MAX_PADDED_VOCAB = 51200  # GPT-2's 50,257 rounded up to a multiple of 1,024: more rows is another tokenizer


def check_vocabulary(rows: int, label: str) -> None:
    """GPT-2's tokens, perhaps padded (nanoGPT: 50,304 rows); anything else is another tokenizer."""
    if rows < VOCAB_SIZE:
        raise CheckpointError(f"{label} has a vocabulary of {rows}; lpos needs GPT-2's {VOCAB_SIZE} tokens")
    if rows > MAX_PADDED_VOCAB:
        raise CheckpointError(f"{label} has a vocabulary of {rows:,} rows; lpos reads GPT-2's {VOCAB_SIZE:,} tokens "
                              f"(padded to at most {MAX_PADDED_VOCAB:,} rows), so it was trained with another tokenizer")


def model_config(values: dict, label: str, max_bytes: int) -> GPTConfig:
    """A GPTConfig from a file's values, or CheckpointError saying which value is unusable."""
    try:
        values = dict(values)
        check_vocabulary(int(values.get("vocab_size") or 0), label)
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


def build_model(config: GPTConfig, state: dict, label: str) -> GPT:
    """The model with every weight from `state` (lpos names), each checked for its shape."""
    try:
        model = GPT.empty(config)  # every weight comes from the file, so none is drawn
    except (TypeError, ValueError, RuntimeError) as e:  # e.g. a dropout that is not a number
        raise CheckpointError(f"{label} has an unsupported configuration: {str(e)[:200]}") from None
    if "transformer.wte.ids" in state:
        model.output_vocab = _rebuild_token_table(config, state, label)
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


def _rebuild_token_table(config: GPTConfig, state: dict, label: str) -> torch.Tensor:
    """An lpos file's trained rows (`transformer.wte.ids`, `.rows`) put into the initial table,
    rebuilt from config.init_seed, as `transformer.wte.weight`; returns the trained ids."""
    ids, rows = state.pop("transformer.wte.ids"), state.pop("transformer.wte.rows", None)
    if (not isinstance(ids, torch.Tensor) or not isinstance(rows, torch.Tensor) or ids.ndim != 1
            or ids.dtype not in (torch.int32, torch.int64) or rows.shape != (len(ids), config.n_embd)
            or (ids.numel() and not 0 <= int(ids.min()) <= int(ids.max()) < config.vocab_size)):
        raise CheckpointError(f"{label} has token rows of the wrong shape")
    table = initial_token_table(config)  # the initial rows, rebuilt from config.init_seed
    table[ids] = rows.float()
    state["transformer.wte.weight"] = table
    return ids.long()
