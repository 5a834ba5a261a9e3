"""Bring your own model: the sidebar's "Upload a model" box and what it does with the files.

Accepted: one torch file of any layout lpos.checkpoints reads (lpos, nanoGPT `ckpt.pt`, a
trainer's dict, a bare state_dict, GPT-2's `pytorch_model.bin`), or a Hugging Face GPT-2
`config.json` together with `model.safetensors` or `pytorch_model.bin`. The bytes are written to
a temporary folder of their own, read with `lpos.checkpoints.load` (never a full unpickle: a file
that would run code is refused) and the folder is deleted at once; then Streamlit's copy of the
bytes is dropped too, so only the model stays. A file that does not say its head count keeps its
bytes until the user picks one of the counts its width allows. The model lives only in this
session's `st.session_state["uploads"]` = {key: (model, meta)}: another session never sees it,
and it goes when the session ends.

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
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.scriptrunner import get_script_run_ctx

from lpos import checkpoints
from lpos.checkpoints import HF_WEIGHTS, CheckpointError
from lpos.layouts import NeedsHeadCount, head_counts
from lpos.model import GPT

CAP_ENV = "LPOS_MAX_UPLOAD_MB"
# The same number as server.maxUploadSize in .streamlit/config.toml. Streamlit's box prints its
# limit rounded to whole GB above 512 MB ("1GB per file"), so 1 GB is the cap that reads true there.
DEFAULT_CAP_MB = 1024
MAX_UPLOADS = 3  # per session: each model stays in memory while the session lives
TORCH_SUFFIXES = (".pt", ".pth", ".ckpt", ".bin")
HF_CONFIG = "config.json"
HF_FILES = (HF_CONFIG, *HF_WEIGHTS)
HF_FOLDER = "The Hugging Face upload"
ACCEPTED_TYPES = ["pt", "pth", "ckpt", "bin", "json", "safetensors"]
DROPPED = "lpos_bytes_dropped"  # set on a file in the box once read: its bytes are gone
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
    key: str  # "upload:<name>@<digest>", what the model box holds
    name: str  # what the user reads
    model: GPT
    meta: dict

    @property
    def summary(self) -> list[str]:
        """What the file was read as, its configuration and what was left unread (lpos.checkpoints.describe)."""
        return checkpoints.describe(self.model, self.meta)


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


def shown_mb(mb: int) -> str:
    """A limit as the upload box prints it: whole GB from 1,024 MB on."""
    return f"{mb // 1024} GB" if mb % 1024 == 0 else f"{mb:,} MB"


def load_upload(files: list[UploadedFile], *, n_head: int | None = None) -> Upload:
    """The model in `files`, checked; CheckpointError with one sentence for anything else
    (NeedsHeadCount when the file does not say n_head and none is given)."""
    limit = cap_mb()
    total = sum(int(f.size) for f in files)
    if total > limit * 2**20:
        raise CheckpointError(f"The upload is {math.ceil(total / 2**20):,} MB; the limit is {shown_mb(limit)} per model.")
    names = {safe_name(f.name): f for f in files}
    if len(files) == 1 and next(iter(names)).lower().endswith(TORCH_SUFFIXES):
        layout, shown = "file", next(iter(names))
    elif HF_CONFIG in names and len(names) == 2 and set(names) < set(HF_FILES):
        layout, shown = "folder", next(n for n in names if n != HF_CONFIG)
    elif set(names) in ({HF_CONFIG}, {"model.safetensors"}):
        missing = "model.safetensors or pytorch_model.bin" if HF_CONFIG in names else HF_CONFIG
        raise IncompleteUpload(f"A Hugging Face model needs {missing} too: select config.json and its weights together.")
    else:
        raise CheckpointError("Upload one .pt file (lpos, nanoGPT, a trainer's dict or a state_dict), or config.json "
                              "with model.safetensors or pytorch_model.bin (Hugging Face GPT-2); got "
                              f"{', '.join(sorted(names))[:200]}.")
    digest = hashlib.sha256()
    with tempfile.TemporaryDirectory(prefix="lpos-upload-") as folder:
        target = Path(folder) / HF_FOLDER  # its name is what messages call the model
        target.mkdir()
        for name, file in sorted(names.items()):
            data = file.getvalue()
            digest.update(name.encode() + b"\0" + data)
            (target / name).write_bytes(data)
            del data
        if n_head is not None:  # the same bytes read with another head count are another model
            digest.update(f"n_head={n_head}".encode())
        model, meta = checkpoints.load(target / shown if layout == "file" else target, n_head=n_head,
                                       max_bytes=limit * 2**20)
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


def files_to_load(files: list, seen: set[str]) -> list:
    """The box keeps every file added to it: load only what was just added. A Hugging Face file
    is loaded with the latest copy of each of its partners still holding its bytes."""
    files = [f for f in files if not getattr(f, DROPPED, False)]  # read already: its bytes are gone
    new = [f for f in files if f.file_id not in seen]
    if new and all(safe_name(f.name) in HF_FILES for f in new):
        return list({safe_name(f.name): f for f in files if safe_name(f.name) in HF_FILES}.values())
    return new


def _forget_bytes(files: list) -> None:
    """Drop Streamlit's copies of files already read: its file manager's record (as st.chat_input
    does with its files) and the box's UploadedFile's buffer (a BytesIO sharing the uploaded
    bytes: truncating it lets them go without a copy; closing it would break Streamlit's deepcopy
    of the box's value). The box would otherwise hold a 500 MB checkpoint's bytes beside its model
    for the whole session, and Streamlit copies them once more on every run."""
    ctx = get_script_run_ctx()
    if ctx is not None and isinstance(ctx.uploaded_file_mgr, MemoryUploadedFileManager):
        for file in files:
            ctx.uploaded_file_mgr.remove_file(session_id=ctx.session_id, file_id=file.file_id)
    for file in files:
        if callable(getattr(file, "truncate", None)):
            file.truncate(0)
        setattr(file, DROPPED, True)


def _on_upload() -> None:
    """Runs before the script when the box's files change: load, remember, select; or say why not."""
    in_box = st.session_state.get("upload") or []
    seen = st.session_state.setdefault("upload_seen", set())
    files = files_to_load(in_box, seen)
    seen.update(f.file_id for f in in_box)
    st.session_state.pop("upload_message", None)
    if not set(st.session_state.get("upload_pending") or []) <= {f.file_id for f in in_box}:
        st.session_state.pop("upload_pending")  # the file waiting for its head count was removed
    if files:  # else a file was removed from the box: the models stay
        _load(files)


def _on_head_count() -> None:
    """The head count was chosen for the file that did not say it: load that file again with it."""
    pending = st.session_state.get("upload_pending") or []
    files = [f for f in st.session_state.get("upload") or [] if f.file_id in pending]
    if not files:
        st.session_state.pop("upload_pending", None)
        st.session_state["upload_message"] = ("error", "That file is no longer in the box: add it again.")
        return
    _load(files, n_head=st.session_state.get("upload_heads"))


def _load(files: list, *, n_head: int | None = None) -> None:
    st.session_state.pop("upload_message", None)
    st.session_state.pop("upload_pending", None)
    try:
        upload = load_upload(files, n_head=n_head)
    except IncompleteUpload as e:  # its partner may come next: keep the bytes
        st.session_state["upload_message"] = ("info", str(e))
        return
    except NeedsHeadCount as e:  # keep the bytes until a head count is chosen
        st.session_state.update(upload_pending=[f.file_id for f in files], upload_width=e.width,
                                upload_message=("info", f"{e}. Choose it below; the model in use has not changed."))
        return
    except CheckpointError as e:
        _forget_bytes(files)
        st.session_state["upload_message"] = ("error", f"{str(e).rstrip('.')}. The model in use has not changed.")
        return
    _forget_bytes(files)
    uploads = st.session_state.setdefault("uploads", {})
    uploads.pop(upload.key, None)
    uploads[upload.key] = (upload.model, upload.meta)
    while len(uploads) > MAX_UPLOADS:
        uploads.pop(next(iter(uploads)))  # the oldest goes first
    st.session_state["model"] = upload.key
    st.session_state["scheme"] = upload.model.config.position
    st.session_state["upload_message"] = (
        "success", f"Loaded {upload.name}. Only you can see it; it is gone when you close this tab.", upload.summary)


def uploader() -> None:
    """The upload box, its last message and what the model was read as (called inside the sidebar)."""
    from lpos.ui.guards import literal  # (guards imports lpos.ui.state, which imports this module)

    limit = cap_mb()
    st.file_uploader(
        "Upload a model", type=ACCEPTED_TYPES, accept_multiple_files=True, key="upload", on_change=_on_upload,
        max_upload_size=limit,
        help="A .pt/.pth/.ckpt/.bin: lpos, nanoGPT ckpt.pt, a trainer's dict ('model', 'optimizer', 'config'), "
             "a bare state_dict or GPT-2's pytorch_model.bin; or a Hugging Face GPT-2 config.json with "
             f"model.safetensors or pytorch_model.bin (select both). Up to {shown_mb(limit)}. "
             "It stays in this browser session only.",
    )
    st.caption(f"Up to {shown_mb(limit)} per model; only this browser tab can see it.")
    kind, message, *details = st.session_state.get("upload_message", (None, None))
    if kind == "error":
        st.error(message, icon=":material/error:")
    elif kind == "info":
        st.info(message, icon=":material/info:")
    elif kind == "success":
        st.success(message, icon=":material/check_circle:")
        for line in details[0] if details else []:
            st.caption(literal(line))  # key names from the file, shown as the characters they are
    if st.session_state.get("upload_pending"):
        width = st.session_state["upload_width"]
        st.selectbox("Attention heads in this model", head_counts(width), index=None, key="upload_heads",
                     placeholder="choose the head count", on_change=_on_head_count,
                     help=f"The n_head your trainer used (its width, {width}, divides evenly into heads)."
                          + (f" GPT-2's heads are 64 wide: {width // 64} at this width." if width % 64 == 0 else ""))
