"""Loading a model by name or path: a shipped checkpoint, a torch file of any known layout, or a
folder; and the three lines that say what was loaded.

Whatever is wrong with a file, `load` raises CheckpointError with one sentence.
"""
from __future__ import annotations

from pathlib import Path

from lpos.checkpoints import layouts
from lpos.checkpoints.build import build_model, model_config
from lpos.checkpoints.errors import CheckpointError
from lpos.checkpoints.layouts import Recognised
from lpos.checkpoints.lpos_format import is_lpos, read_lpos
from lpos.checkpoints.payload import MAX_BYTES, read_payload
from lpos.model import GPT

CHECKPOINT_DIR = Path(__file__).resolve().parent.parent.parent / "checkpoints"


def available() -> list[str]:
    """Names of the shipped checkpoints (files `checkpoints/<name>.pt`)."""
    return sorted(p.stem for p in CHECKPOINT_DIR.glob("*.pt") if "." not in p.stem)  # not *.resume.pt


def load(name_or_path: str | Path, *, n_head: int | None = None, max_bytes: int = MAX_BYTES) -> tuple[GPT, dict]:
    """A model in eval mode and its meta, from a shipped name, a torch file of any layout in
    lpos.checkpoints.layouts, or a Hugging Face folder. `n_head` is used only when the file does
    not say it."""
    name = str(name_or_path)
    path = CHECKPOINT_DIR / f"{name}.pt" if name in available() else Path(name_or_path)
    if path.is_dir():
        model, meta = _import(layouts.recognise_folder(path, max_bytes=max_bytes), path.name, n_head, max_bytes)
    elif path.is_file():
        payload = read_payload(path, max_bytes=max_bytes)
        if is_lpos(payload):
            model, meta = read_lpos(payload, path.name, max_bytes)
        else:
            found = layouts.recognise(payload, path.name)
            payload.clear()  # the optimizer state and other extras go now, before a model is built
            model, meta = _import(found, path.name, n_head, max_bytes)
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


def _import(found: Recognised, label: str, n_head: int | None, max_bytes: int) -> tuple[GPT, dict]:
    config = model_config(layouts.config_values(found, n_head=n_head, label=label), label, max_bytes)
    model = build_model(config, found.state, label)
    return model, {"source": found.layout, **found.meta, "ignored": found.ignored[:12]}
