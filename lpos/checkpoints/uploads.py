"""Reading models a user uploads, without Streamlit: size checks, which files make a model, the
digest that names it, and the meta that is safe to show.

Accepted: one torch file of any layout lpos.checkpoints reads (lpos, nanoGPT `ckpt.pt`, a
trainer's dict, a bare state_dict, GPT-2's `pytorch_model.bin`), or a Hugging Face GPT-2
`config.json` together with `model.safetensors` or `pytorch_model.bin`. The bytes are written to
a temporary folder of their own, read with `lpos.checkpoints.load` (never a full unpickle: a file
that would run code is refused) and the folder is deleted at once. A model whose vocabulary is
not GPT-2's comes with its tokenizer file (`is_tokenizer_file`: meta.pkl, tokenizer.json, a
`.model`, a character model's training text), in the same upload or, after NeedsTokenizer, the next.

The key is an upload's model reference (lpos.checkpoints.reference), "upload:<name>@<digest>": the
digest of the bytes keeps two sessions' different files of the same name apart in caches shared by
the process (`st.cache_data` keyed by model key).
The Streamlit side (the box, the session's models) is lpos.ui.upload.
"""
from __future__ import annotations

import hashlib
import math
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from lpos import vocab
from lpos.checkpoints.errors import CheckpointError
from lpos.checkpoints.layouts import LAYOUT_NAMES, TORCH_SUFFIXES
from lpos.checkpoints.layouts.huggingface import FOLDER_LAYOUTS, HF_CONFIG, HF_WEIGHTS
from lpos.checkpoints.reading import describe, load
from lpos.checkpoints.reference import ModelRef
from lpos.model import GPT
from lpos.tokenizer import Tokenizer
from lpos.vocab.huggingface import TOKENIZER_JSON

HF_FILES = (HF_CONFIG, *HF_WEIGHTS)
HF_FOLDER_LAYOUT = FOLDER_LAYOUTS[0]  # the folder an upload may be: Hugging Face GPT-2's
HF_FOLDER = "The Hugging Face upload"
NUMBER_META = ("val_loss", "unigram_val_loss", "val_oov_share", "tokens_trained", "steps", "wall_seconds",
               "iter_num", "best_val_loss", "loss")


class IncompleteUpload(CheckpointError):
    """Half of a Hugging Face pair: not wrong, just not finished."""


class UploadedFile(Protocol):
    """What st.file_uploader hands over (and what tests pass in)."""

    name: str
    size: int

    def getvalue(self) -> bytes: ...


@dataclass(frozen=True)
class Upload:
    key: str  # its ModelRef's text, "upload:<name>@<digest>": what the model box holds
    name: str  # what the user reads
    model: GPT
    meta: dict

    @property
    def summary(self) -> list[str]:
        """What the file was read as, its configuration and what was left unread (lpos.checkpoints.describe)."""
        return describe(self.model, self.meta)


def safe_name(name: str) -> str:
    """A file name the user sent, reduced to letters, digits, '.', '-' and '_' (never a path)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", Path(str(name).replace("\\", "/")).name).lstrip(".")
    return name[-80:] or "upload"


def shown_mb(mb: int) -> str:
    """A limit as the upload box prints it: whole GB from 1,024 MB on."""
    return f"{mb // 1024} GB" if mb % 1024 == 0 else f"{mb:,} MB"


def is_tokenizer_file(name: str) -> bool:
    """Whether an uploaded file's name is one of a tokenizer format's (lpos.vocab.FORMATS)."""
    return safe_name(name).lower().endswith(vocab.SUFFIXES)


def read_upload(files: list[UploadedFile], *, limit_mb: int, n_head: int | None = None) -> Upload:
    """The model in `files` (at most `limit_mb` MB in all), checked; CheckpointError with one
    sentence for anything else (NeedsHeadCount when the file does not say n_head and none is given,
    NeedsTokenizer when its vocabulary is not GPT-2's and no tokenizer file came with it)."""
    total = sum(int(f.size) for f in files)
    if total > limit_mb * 2**20:
        raise CheckpointError(f"The upload is {math.ceil(total / 2**20):,} MB; the limit is {shown_mb(limit_mb)} per model.")
    names = {safe_name(f.name): f for f in files}
    in_folder = HF_CONFIG in names  # a Hugging Face folder finds its tokenizer.json on its own
    tokenizers = [n for n in names if is_tokenizer_file(n) and not (in_folder and n == TOKENIZER_JSON)]
    if len(tokenizers) > 1:
        raise CheckpointError(f"Upload one tokenizer file with a model; got {', '.join(sorted(tokenizers))[:200]}.")
    if tokenizers and len(names) == 1:
        raise IncompleteUpload(f"Upload one .pt file (or a Hugging Face folder's files) with {tokenizers[0]}: a tokenizer "
                               "or a training text on its own is not a model.")
    tokenizer = tokenizers[0] if tokenizers else None
    model_names = {n: f for n, f in names.items() if n != tokenizer}
    if len(model_names) == 1 and next(iter(model_names)).lower().endswith(TORCH_SUFFIXES):
        layout, shown = "file", next(iter(model_names))
    elif in_folder and len(weights := set(model_names) - {TOKENIZER_JSON}) == 2 and weights < set(HF_FILES):
        layout, shown = "folder", next(n for n in model_names if n not in (HF_CONFIG, TOKENIZER_JSON))
    elif set(model_names) - {TOKENIZER_JSON} in ({HF_CONFIG}, {"model.safetensors"}):
        missing = "model.safetensors or pytorch_model.bin" if HF_CONFIG in names else HF_CONFIG
        raise IncompleteUpload(f"A Hugging Face model needs {missing} too: select config.json and its weights together.")
    else:
        raise CheckpointError(f"Upload one .pt file (or {', '.join(TORCH_SUFFIXES[1:])}) in a layout lpos reads "
                              f"({LAYOUT_NAMES}), or {HF_FOLDER_LAYOUT.files} (a {HF_FOLDER_LAYOUT.name}); got "
                              f"{', '.join(sorted(names))[:200]}.")
    digest = hashlib.sha256()
    # the model may keep the copy's pages as its weights (load's `mapped`): removed here, they stay readable until it
    # goes; where a mapped file cannot be removed (not on Linux), the system's temporary folder cleaning takes it
    with tempfile.TemporaryDirectory(prefix="lpos-upload-", ignore_cleanup_errors=True) as folder:
        target = Path(folder) / HF_FOLDER  # its name is what messages call the model
        target.mkdir()
        for name, file in sorted(names.items()):
            data = file.getvalue()  # the box's own bytes, not a copy: nothing here may join them to anything
            digest.update(name.encode() + b"\0")
            digest.update(data)
            (target / name).write_bytes(data)
            del data
        if n_head is not None:  # the same bytes read with another head count are another model
            digest.update(f"n_head={n_head}".encode())
        model, meta = load(target / shown if layout == "file" else target, n_head=n_head, max_bytes=limit_mb * 2**20,
                           tokenizer=target / tokenizer if tokenizer else None, mapped=True)
    return Upload(key=str(ModelRef.upload(shown, digest.hexdigest())), name=shown, model=model, meta=clean_meta(meta))


def clean_meta(meta: dict) -> dict:
    """Keep only meta the pages can read safely: an uploaded file's meta is data from a stranger."""
    clean = {}
    for key in NUMBER_META:
        value = meta.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            clean[key] = value
    if isinstance(meta.get("tokenizer"), Tokenizer):  # built by lpos from the file's data, never the file's object
        clean["tokenizer"] = meta["tokenizer"]
    for key in ("source", "machine"):
        if isinstance(meta.get(key), str):
            clean[key] = meta[key][:200]
    if isinstance(meta.get("ignored"), list):
        clean["ignored"] = [str(item)[:80] for item in meta["ignored"][:12]]
    counts = meta.get("token_counts")
    if isinstance(counts, dict):
        try:
            clean["token_counts"] = {int(k): int(v) for k, v in counts.items()}
        except (TypeError, ValueError, OverflowError):
            pass
    by_length = meta.get("loss_by_length")
    if isinstance(by_length, dict) and all(isinstance(v, dict) for v in by_length.values()):
        try:
            clean["loss_by_length"] = {
                int(k): {"loss": None if v.get("loss") is None else float(v["loss"]), "note": str(v.get("note", ""))[:200]}
                for k, v in by_length.items()
            }
        except (TypeError, ValueError, OverflowError):
            pass
    return clean
