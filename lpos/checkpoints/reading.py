"""Loading a model by name or path: a shipped checkpoint, a torch file of any known layout, or a
folder; and the three lines that say what was loaded.

Whatever is wrong with a file, `load` raises CheckpointError with one sentence. meta["tokenizer"]
is the Tokenizer the model speaks: the one given, else the one the file or its folder carries
(an lpos file's own, a tokenizer.json beside config.json, a tokenizer.model beside a
llama2.c ckpt.pt or model.bin), else GPT-2's when the vocabulary is
GPT-2's; any other vocabulary without a tokenizer is NeedsTokenizer.
"""
from __future__ import annotations

from pathlib import Path

from lpos.checkpoints import layouts
from lpos.checkpoints.build import build_model, model_config, takes_mapped
from lpos.checkpoints.errors import CheckpointError
from lpos.checkpoints.families import block_sentence, position_practice
from lpos.checkpoints.layouts import Recognised
from lpos.checkpoints.layouts.llama import tokenizer_beside
from lpos.checkpoints.layouts.llama2c import is_model_bin, read_model_bin
from lpos.checkpoints.lpos_format import is_lpos, read_lpos
from lpos.checkpoints.payload import MAX_BYTES, read_payload
from lpos.model import GPT
from lpos.tokenizer import Tokenizer, TokenizerError, load_tokenizer

# The shipped models: installed with the package (setup.py maps the top-level checkpoints/ folder to
# lpos/checkpoints/shipped), else the checkout's own checkpoints/ (run from the repository, or `pip install -e .`)
_INSTALLED = Path(__file__).resolve().parent / "shipped"
CHECKPOINT_DIR = _INSTALLED if _INSTALLED.is_dir() else Path(__file__).resolve().parent.parent.parent / "checkpoints"


def available(folder: Path = CHECKPOINT_DIR) -> list[str]:
    """Names of the shipped checkpoints (files `checkpoints/<name>.pt`; of `folder`, if given)."""
    return sorted(p.stem for p in Path(folder).glob("*.pt") if "." not in p.stem)  # not *.resume.pt


def load(name_or_path: str | Path, *, n_head: int | None = None, tokenizer: Tokenizer | str | Path | None = None,
         max_bytes: int = MAX_BYTES, float32: bool = False, mapped: bool = False,
         shared_table: bool = False) -> tuple[GPT, dict]:
    """A model in eval mode and its meta, from a shipped name, a torch file of any layout in
    lpos.checkpoints.layouts, or a Hugging Face folder. `n_head` is used only when the file does
    not say it; `tokenizer` (a Tokenizer or a tokenizer file) replaces any the file carries. A Hugging Face
    folder stored in bfloat16 or float16 keeps its blocks' matrices in that precision (half the memory;
    every activation is still float32) unless `float32`. `mapped`: the file is the caller's own and is never
    written again (an upload's copy in a temporary folder), so a torch file that holds little but float32 weights
    keeps them as its memory-mapped pages, which the kernel can drop and read again from disk, instead of copying
    them (build.takes_mapped; a folder's and llama2.c's weights always stay mapped). `shared_table`: an lpos file's
    trained token rows are held over the token table every model of its seed shares (build.build_model), as the
    app holds its models; the numbers are the same, but the model's state_dict names those rows, not a table."""
    tokenizer = _tokenizer(tokenizer)
    name = str(name_or_path)
    path = CHECKPOINT_DIR / f"{name}.pt" if name in available() else Path(name_or_path)
    if path.is_dir():
        found = layouts.recognise_folder(path, max_bytes=max_bytes, float32=float32)
        model, meta = _import(found, path.name, n_head, max_bytes, tokenizer)
    elif path.is_file() and is_model_bin(path):  # llama2.c's raw export: bytes, never unpickled
        model, meta = _import(read_model_bin(path, max_bytes), path.name, n_head, max_bytes, tokenizer)
    elif path.is_file():
        payload = read_payload(path, max_bytes=max_bytes)
        mapped_bytes = path.stat().st_size if mapped else None
        if is_lpos(payload):
            model, meta = read_lpos(payload, path.name, max_bytes, tokenizer=tokenizer, mapped_bytes=mapped_bytes,
                                    shared_table=shared_table)
        else:
            found = layouts.recognise(payload, path.name)
            if found.values is not None and found.tokenizer is None:  # llama2.c's ckpt.pt: a tokenizer.model beside it
                found.tokenizer = tokenizer_beside(path.parent)
            payload.clear()  # the optimizer state and other extras go now, before a model is built
            model, meta = _import(found, path.name, n_head, max_bytes, tokenizer, mapped_bytes=mapped_bytes)
    elif path.suffix or len(path.parts) > 1:  # it reads as a path: say that the file is not there
        raise CheckpointError(f"{name}: no such file or folder (the shipped models are {', '.join(available())})")
    else:
        raise CheckpointError(f"no checkpoint named {name!r}: use one of {available()} or a file path")
    model.eval()
    return model, meta


def describe(model: GPT, meta: dict) -> list[str]:
    """What was loaded, in three lines: the layout, the configuration, what was left unread."""
    c = model.config
    lines = [f"read as: {meta.get('source', 'lpos checkpoint')}",
             f"{_counted(c.n_layer, 'layer')}, {_counted(c.n_head, 'head')}, width {c.n_embd}, "
             f"{_counted(c.block_size, 'position row')}, vocabulary {c.vocab_size:,}, "
             f"head {'tied to the token table' if c.tied else 'untied (its own rows)'}, {_parameters(model.num_params())}"]
    block = block_sentence(c)  # a Llama's, Qwen's, Gemma's or GPT-NeoX's; None for GPT-2's
    if block is not None or "model_type" in meta:  # block_size is the length it was trained on, not a table's rows
        lines[1] = lines[1].replace(_counted(c.block_size, "position row"), f"trained on {c.block_size:,} positions")
        lines[2:2] = [line for line in (block, "positions: " + "; ".join(position_practice(c))) if line]
    tokenizer = meta.get("tokenizer")
    if isinstance(tokenizer, Tokenizer) and not tokenizer.is_gpt2:
        lines.append(f"tokenizer: {tokenizer.name}, {tokenizer.vocab_size:,} tokens")
    if meta.get("ignored"):
        lines.append(f"ignored: {', '.join(meta['ignored'])}")
    return lines


def _counted(count: int, thing: str) -> str:
    """"1 layer", "6 layers", "1,024 position rows"."""
    return f"{count:,} {thing}{'' if count == 1 else 's'}"


def _parameters(count: int) -> str:
    """"3.3M parameters", "263K parameters" (llama2.c's stories260K), "896 parameters": never "0.0M"."""
    if count >= 1_000_000:
        return f"{count / 1e6:,.1f}M parameters"
    return f"{count / 1e3:,.0f}K parameters" if count >= 10_000 else f"{count:,} parameters"


def _tokenizer(tokenizer: Tokenizer | str | Path | None) -> Tokenizer | None:
    if tokenizer is None or isinstance(tokenizer, Tokenizer):
        return tokenizer
    try:
        return load_tokenizer(tokenizer)
    except TokenizerError as e:
        raise CheckpointError(str(e)) from None


def _import(found: Recognised, label: str, n_head: int | None, max_bytes: int,
            tokenizer: Tokenizer | None = None, *, mapped_bytes: int | None = None) -> tuple[GPT, dict]:
    if tokenizer is None and found.tokenizer is not None:
        tokenizer = _tokenizer(found.tokenizer)
    values = layouts.config_values(found, n_head=n_head, label=label)
    config, tokenizer = model_config(values, label, max_bytes, tokenizer=tokenizer,
                                     memory_checked=found.values is not None)  # Llamas and families weigh their own
    rows = found.state["transformer.wte.weight"].shape[0] if "transformer.wte.weight" in found.state else 0
    padding = [f"token rows {config.vocab_size:,}-{rows - 1:,} (padding, never a token)"] if rows > config.vocab_size else []
    model = build_model(config, found.state, label, in_place=found.values is not None or takes_mapped(found.state, mapped_bytes))
    return model, {"source": found.layout, **found.meta, "ignored": (found.ignored + padding)[:12], "tokenizer": tokenizer}
