"""From configuration values and renamed tensors to a GPT: every check before anything is built.

A configuration is checked before any model is built (sizes are positive whole numbers, the
vocabulary fits its tokenizer, the float32 weights fit under the cap), so a small file cannot ask
for more memory than the cap. The tokenizer is GPT-2's unless one is given; a model may have more
token rows than its tokenizer has tokens (padding: nanoGPT's 50,304) and those rows are dropped,
never offered; fewer rows than tokens is refused. Every weight then comes from the file, except the token rows an lpos
file leaves out: those are rebuilt from `config.init_seed`, as the model drew them.
"""
from __future__ import annotations

import torch

from lpos.checkpoints.errors import CheckpointError, NeedsTokenizer
from lpos.checkpoints.payload import drop_file_pages
from lpos.layers import parameter_count
from lpos.meta_device import shapes_only
from lpos.model import GPT, GPTConfig, initial_token_table
from lpos.token_table import SharedTokenTable, shared_initial_table
from lpos.tokenizer import GPT2, TOKENIZER_FILES, VOCAB_SIZE, Tokenizer

SIZE_FIELDS = ("n_layer", "n_head", "n_embd", "block_size")
HELD_DTYPES = (torch.bfloat16, torch.float16)  # precisions a block's matrices are held in as a file stores them
MAX_PADDED_VOCAB = 51200  # GPT-2's 50,257 rounded up to a multiple of 1,024: more rows is another tokenizer


def check_vocabulary(rows: int, label: str, tokenizer: Tokenizer | None = None) -> Tokenizer:
    """The tokenizer a model of `rows` token rows speaks: `tokenizer` when its tokens fit the rows;
    without one, GPT-2's when the rows are GPT-2's 50,257, perhaps padded (nanoGPT: 50,304), else
    NeedsTokenizer naming the files that work."""
    if tokenizer is None:
        if not VOCAB_SIZE <= rows <= MAX_PADDED_VOCAB:
            raise NeedsTokenizer(label, rows, TOKENIZER_FILES)
        return GPT2
    if rows < tokenizer.vocab_size:
        raise CheckpointError(f"the tokenizer {tokenizer.name} has {tokenizer.vocab_size:,} tokens but {label} has "
                              f"only {rows:,} token rows, so they were not trained together")
    return tokenizer


def model_config(values: dict, label: str, max_bytes: int, *, tokenizer: Tokenizer | None = None,
                 memory_checked: bool = False) -> tuple[GPTConfig, Tokenizer]:
    """A GPTConfig from a file's values and the tokenizer it speaks (check_vocabulary), or
    CheckpointError saying which value is unusable. `memory_checked`: the layout has already weighed the
    weights as it will hold them (a Llama or Hugging Face family kept in bfloat16), so they are not weighed
    again as float32."""
    try:
        values = dict(values)
        tokenizer = check_vocabulary(int(values.get("vocab_size") or 0), label, tokenizer)
        values["vocab_size"] = tokenizer.vocab_size  # padding rows (nanoGPT: 50,304) are never tokens
        for field in SIZE_FIELDS:
            value = values.get(field, getattr(GPTConfig, field))
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise CheckpointError(f"{label} has an unsupported configuration: {field} is "
                                      f"{str(value)[:20]!r}, not a positive whole number")
        for field in ("bias", "tied", "head_bias"):
            if not isinstance(values.get(field, True), bool):
                raise CheckpointError(f"{label} has an unsupported configuration: {field} is "
                                      f"{str(values[field])[:20]!r}, not True or False")
        if values.get("qkv_bias") is not None and not isinstance(values["qkv_bias"], bool):
            raise CheckpointError(f"{label} has an unsupported configuration: qkv_bias is "
                                  f"{str(values['qkv_bias'])[:20]!r}, not True, False or None")
        config = GPTConfig.from_dict(values)
    except CheckpointError:
        raise
    except (TypeError, ValueError, ArithmeticError) as e:
        raise CheckpointError(f"{label} has an unsupported configuration: {str(e)[:200]}") from None
    if not memory_checked:
        _check_memory(config, label, max_bytes)
    return config, tokenizer


def _check_memory(config: GPTConfig, label: str, max_bytes: int) -> None:
    """Refuse, before building anything, a configuration whose float32 weights exceed the cap:
    a small file may declare a huge model (lpos rebuilds untrained token rows from a seed)."""
    parameters = parameter_count(config)  # table(s), blocks (12 C^2 each for GPT-2's shape), the scheme's own
    if 4 * parameters > max_bytes:
        raise CheckpointError(f"{label} declares a model of {parameters / 1e6:,.0f} million parameters "
                              f"({4 * parameters / 2**20:,.0f} MB in memory), over the {max_bytes / 2**20:.0f} MB limit")


def takes_mapped(state: dict, file_bytes: int | None) -> bool:
    """Whether a model keeps `state`'s tensors, mapped from a file of `file_bytes` (None: not the caller's to keep),
    as its weights (build_model's in_place): when every floating-point one is float32, as a GPT-2 block takes
    them, and the file holds little else (at most an eighth more, and 1 MB): a trainer's file with its
    optimizer's state, twice the weights, is copied out instead, so that its whole file is not kept on disk
    for as long as the model lives."""
    floats = [value for value in state.values() if isinstance(value, torch.Tensor) and value.is_floating_point()]
    weights = sum(value.numel() * value.element_size() for value in floats)
    return (file_bytes is not None and all(value.dtype == torch.float32 for value in floats)
            and file_bytes <= weights * 1.125 + 2**20)


def build_model(config: GPTConfig, state: dict, label: str, *, in_place: bool = False,
                shared_table: bool = False) -> GPT:
    """The model with every weight from `state` (lpos names), each checked for its shape.
    in_place: the model takes state's float32 tensors as its own weights (built on the meta
    device, nothing allocated), so a large model's weights are held once, not twice.
    shared_table: a tied lpos file's trained token rows are held over the initial table every model of
    its init_seed shares (SharedTokenTable), as GPT.share_token_table would after a dense build, without
    building, comparing and dropping a dense table of its own; the same numbers."""
    try:
        if in_place:
            with shapes_only():
                model = GPT(config, init_weights=False)
        else:
            model = GPT.empty(config)  # every weight comes from the file, so none is drawn
    except (TypeError, ValueError, RuntimeError) as e:  # e.g. a dropout that is not a number
        raise CheckpointError(f"{label} has an unsupported configuration: {str(e)[:200]}") from None
    shared = shared_table and config.tied and not in_place and "transformer.wte.ids" in state
    if shared:
        ids, rows = _token_rows(config, state, label)
        model.output_vocab = ids
        model.transformer.wte = SharedTokenTable(shared_initial_table(config.init_seed, config.vocab_size, config.n_embd),
                                                 ids, rows.to(torch.float32, copy=True))
        model.lm_head = None  # output_logits reads the shared table's rows
    elif "transformer.wte.ids" in state:
        model.output_vocab = _rebuild_token_table(config, state, label)
    for key in ("transformer.wte.weight", "lm_head.weight", "lm_head.bias"):
        if isinstance(state.get(key), torch.Tensor) and state[key].ndim in (1, 2):
            state[key] = state[key][: config.vocab_size]  # nanoGPT's padding rows are never tokens
    if config.tied and not shared:
        head, table = state.get("lm_head.weight"), state.get("transformer.wte.weight")
        if isinstance(head, torch.Tensor) and not (isinstance(table, torch.Tensor) and head.shape == table.shape
                                                   and torch.equal(head, table)):
            raise CheckpointError(f"{label} says its head is tied to the token table, but lm_head.weight holds other values")
        state["lm_head.weight"] = table
    expected = {key: value for key, value in model.state_dict().items()
                if not (shared and key.startswith("transformer.wte."))}  # the shared table's rows: set above
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(str(key)[:80] for key in set(state) - set(expected))
    if missing or unexpected:
        raise CheckpointError(f"{label} does not match the architecture: missing {missing[:3]}, unexpected {unexpected[:3]}")
    for key, tensor in state.items():
        if not isinstance(tensor, torch.Tensor) or tensor.shape != expected[key].shape:
            shape = tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
            raise CheckpointError(f"{label}: {key} has shape {shape}, expected {tuple(expected[key].shape)}")
    if in_place:  # bfloat16 and float16 matrices stay as stored (lpos.layers.Linear reads them); the rest float32
        model.load_state_dict({k: v if v.dtype in HELD_DTYPES and v.ndim == 2 else v.float() for k, v in state.items()},
                              assign=True)
    else:  # one tensor at a time, each file's pages let go once copied: the weights are held once
        targets, done = model.state_dict(keep_vars=True), set()
        with torch.no_grad():
            for key, tensor in state.items():
                if id(targets[key]) in done:  # a tied head: the table it is, already read
                    continue
                done.add(id(targets[key]))
                if key == "transformer.wte.weight" and model.output_vocab is not None:
                    targets[key].data = tensor  # the table rebuilt from the seed: fresh, taken as it is
                else:
                    targets[key].copy_(tensor)
                    drop_file_pages(tensor)
    if in_place and config.tied:
        model.lm_head.weight = model.transformer.wte.weight  # one parameter again, as GPT ties it
    return model


def _token_rows(config: GPTConfig, state: dict, label: str) -> tuple[torch.Tensor, torch.Tensor]:
    """An lpos file's trained token ids and rows (`transformer.wte.ids`, `.rows`), taken out of `state` and checked."""
    ids, rows = state.pop("transformer.wte.ids"), state.pop("transformer.wte.rows", None)
    if (not isinstance(ids, torch.Tensor) or not isinstance(rows, torch.Tensor) or ids.ndim != 1
            or ids.dtype not in (torch.int32, torch.int64) or rows.shape != (len(ids), config.n_embd)
            or (ids.numel() and not 0 <= int(ids.min()) <= int(ids.max()) < config.vocab_size)):
        raise CheckpointError(f"{label} has token rows of the wrong shape")
    return ids.long(), rows


def _rebuild_token_table(config: GPTConfig, state: dict, label: str) -> torch.Tensor:
    """An lpos file's trained rows put into the initial table, rebuilt from config.init_seed, as
    `transformer.wte.weight`; returns the trained ids."""
    ids, rows = _token_rows(config, state, label)
    table = initial_token_table(config)  # the initial rows, rebuilt from config.init_seed
    table[ids] = rows.float()
    state["transformer.wte.weight"] = table
    return ids
