"""Bring your own model: the sidebar's "Upload a model" box and what it does with the files.

Accepted: an lpos `.pt`, a nanoGPT `ckpt.pt`, or a Hugging Face GPT-2 `config.json` together
with `model.safetensors`. The bytes are written to a temporary folder of their own, read with
`lpos.checkpoints.load` (never a full unpickle: a file that would run code is refused) and the
folder is deleted at once. The model lives only in this session's `st.session_state["uploads"]`
= {key: (model, meta)}: another session never sees it, and it goes when the session ends.

The key is "upload:<name>@<digest>": the digest of the bytes keeps two sessions' different files
of the same name apart in caches shared by the process (`st.cache_data` keyed by model key).
"""
from __future__ import annotations

import hashlib
import math
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import streamlit as st

from lpos import checkpoints
from lpos.checkpoints import CheckpointError
from lpos.model import GPT

CAP_ENV = "LPOS_MAX_UPLOAD_MB"
DEFAULT_CAP_MB = 600  # the same number as server.maxUploadSize in .streamlit/config.toml
MAX_UPLOADS = 3  # per session: each model stays in memory while the session lives
TORCH_SUFFIXES = (".pt", ".pth", ".ckpt", ".bin")
HF_FILES = ("config.json", "model.safetensors")
HF_FOLDER = "The Hugging Face upload"
ACCEPTED_TYPES = ["pt", "pth", "ckpt", "bin", "json", "safetensors"]
NUMBER_META = ("val_loss", "unigram_val_loss", "val_oov_share", "tokens_trained", "steps", "wall_seconds",
               "iter_num", "best_val_loss")


class IncompleteUpload(CheckpointError):
    """Half of a Hugging Face pair: not wrong, just not finished."""


class UploadedFile(Protocol):
    """What st.file_uploader hands over (and what tests pass in)."""

    name: str
    size: int

    def getvalue(self) -> bytes: ...


@dataclass(frozen=True)
class Upload:
    key: str  # "upload:<name>@<digest>", what the model box holds
    name: str  # what the user reads
    model: GPT
    meta: dict


def cap_mb() -> int:
    """The upload limit in MB: LPOS_MAX_UPLOAD_MB, and never above Streamlit's own server.maxUploadSize."""
    try:
        cap = int(os.environ.get(CAP_ENV, DEFAULT_CAP_MB))
    except ValueError:
        cap = DEFAULT_CAP_MB
    server_cap = st.get_option("server.maxUploadSize")
    return max(1, min(cap, int(server_cap))) if server_cap else max(1, cap)


def safe_name(name: str) -> str:
    """A file name the user sent, reduced to letters, digits, '.', '-' and '_' (never a path)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", Path(str(name).replace("\\", "/")).name).lstrip(".")
    return name[-80:] or "upload"


def load_upload(files: list[UploadedFile]) -> Upload:
    """The model in `files`, checked; CheckpointError with one sentence for anything else."""
    limit = cap_mb()
    total = sum(int(f.size) for f in files)
    if total > limit * 2**20:
        raise CheckpointError(f"The upload is {math.ceil(total / 2**20):,} MB; the limit is {limit} MB per model.")
    names = {safe_name(f.name): f for f in files}
    if len(files) == 1 and next(iter(names)).lower().endswith(TORCH_SUFFIXES):
        layout, shown = "file", next(iter(names))
    elif set(names) == set(HF_FILES):
        layout, shown = "folder", "model.safetensors"
    elif set(names) < set(HF_FILES):
        missing = next(n for n in HF_FILES if n not in names)
        raise IncompleteUpload(f"A Hugging Face model needs {missing} too: select config.json and model.safetensors together.")
    else:
        raise CheckpointError("Upload one .pt file (lpos or nanoGPT), or config.json and model.safetensors together "
                              f"(Hugging Face GPT-2); got {', '.join(sorted(names))[:200]}.")
    digest = hashlib.sha256()
    with tempfile.TemporaryDirectory(prefix="lpos-upload-") as folder:
        target = Path(folder) / HF_FOLDER  # its name is what messages call the model
        target.mkdir()
        for name, file in sorted(names.items()):
            data = file.getvalue()
            digest.update(name.encode() + b"\0" + data)
            (target / name).write_bytes(data)
        model, meta = checkpoints.load(target / shown if layout == "file" else target, max_bytes=limit * 2**20)
    return Upload(key=f"upload:{shown}@{digest.hexdigest()[:12]}", name=shown, model=model, meta=clean_meta(meta))


def clean_meta(meta: dict) -> dict:
    """Keep only meta the pages can read safely: an uploaded file's meta is data from a stranger."""
    clean = {}
    for key in NUMBER_META:
        value = meta.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            clean[key] = value
    for key in ("source", "machine"):
        if isinstance(meta.get(key), str):
            clean[key] = meta[key][:200]
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


def files_to_load(files: list, seen: set[str]) -> list:
    """The box keeps every file added to it: load only what was just added. A Hugging Face file
    is loaded with the latest copy of its partner, whenever that was added."""
    new = [f for f in files if f.file_id not in seen]
    if new and all(safe_name(f.name) in HF_FILES for f in new):
        return list({safe_name(f.name): f for f in files if safe_name(f.name) in HF_FILES}.values())
    return new


def _on_upload() -> None:
    """Runs before the script when the box's files change: load, remember, select; or say why not."""
    in_box = st.session_state.get("upload") or []
    seen = st.session_state.setdefault("upload_seen", set())
    files = files_to_load(in_box, seen)
    seen.update(f.file_id for f in in_box)
    st.session_state.pop("upload_message", None)
    if not files:  # a file was removed from the box: the models stay
        return
    try:
        upload = load_upload(files)
    except IncompleteUpload as e:
        st.session_state["upload_message"] = ("info", str(e))
        return
    except CheckpointError as e:
        st.session_state["upload_message"] = ("error", f"{str(e).rstrip('.')}. The model in use has not changed.")
        return
    uploads = st.session_state.setdefault("uploads", {})
    uploads.pop(upload.key, None)
    uploads[upload.key] = (upload.model, upload.meta)
    while len(uploads) > MAX_UPLOADS:
        uploads.pop(next(iter(uploads)))  # the oldest goes first
    st.session_state["model"] = upload.key
    st.session_state["scheme"] = upload.model.config.position
    c = upload.model.config
    st.session_state["upload_message"] = (
        "success", f"Loaded {upload.name}: {c.position} positions, {c.n_layer} layers, width {c.n_embd}, "
                   f"{c.block_size} position rows. Only you can see it; it is gone when you close this tab.")


def uploader() -> None:
    """The upload box and its last message (called inside the sidebar)."""
    limit = cap_mb()
    st.file_uploader(
        "Upload a model", type=ACCEPTED_TYPES, accept_multiple_files=True, key="upload", on_change=_on_upload,
        max_upload_size=limit,
        help=f"An lpos .pt, a nanoGPT ckpt.pt, or a Hugging Face GPT-2 config.json + model.safetensors "
             f"(select both). Up to {limit} MB. It stays in this browser session only.",
    )
    # the box itself rounds its limit to whole GB above 500 MB ("1GB per file"): say the real one
    st.caption(f"Up to {limit} MB per model; only this browser tab can see it.")
    kind, message = st.session_state.get("upload_message", (None, None))
    if kind == "error":
        st.error(message, icon=":material/error:")
    elif kind == "info":
        st.info(message, icon=":material/info:")
    elif kind == "success":
        st.success(message, icon=":material/check_circle:")
