"""Bring your own model: the sidebar's "Upload a model" box and what it does with the files.

Reading the files is lpos.checkpoints.uploads (no Streamlit there); this module is the box: its
cap, which of its files are new, and the session's models. After a file is read, Streamlit's
copy of its bytes is dropped too, so only the model stays. A file that does not say its head
count keeps its bytes until the user picks one of the counts its width allows. The model lives
only in this session's `st.session_state["uploads"]` = {key: (model, meta)}: another session
never sees it, and it goes when the session ends. A model whose vocabulary is not GPT-2's and that
came without its tokenizer keeps its bytes too, until its tokenizer file is added to the box. A model whose loss
on the built-in story is worse than an even guess is loaded with a warning that its tokenizer is probably not its
own (`tokenizer_doubt`), repeated on every page while it is chosen (lpos.ui.state).
"""
from __future__ import annotations


import streamlit as st
import torch
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.scriptrunner import get_script_run_ctx

from lpos import settings, vocab
from lpos.analysis.lengths import loss_along_text, training_length, wrong_tokenizer_sentence
from lpos.checkpoints import CheckpointError, NeedsHeadCount, NeedsTokenizer, head_counts
from lpos.checkpoints.layouts import LAYOUT_NAMES, TORCH_SUFFIXES
from lpos.checkpoints.uploads import (HF_FILES, HF_FOLDER_LAYOUT, IncompleteUpload, Upload, UploadedFile,
                                      is_tokenizer_file, read_upload, safe_name, shown_mb)
from lpos.corpus import story
from lpos.ui.models import LoadedModel, release_idle_models
from lpos.ui.text import literal

# The same number as server.maxUploadSize in .streamlit/config.toml. Streamlit's box prints its
# limit rounded to whole GB above 512 MB ("1GB per file"), so 1 GB is the cap that reads true there.
DEFAULT_CAP_MB = settings.DEFAULT_UPLOAD_MB
MAX_UPLOADS = 3  # per session: each model stays in memory while the session lives
# the box's file types: a model file of any layout, a Hugging Face folder's files, a tokenizer of any format
ACCEPTED_TYPES = sorted({name.rsplit(".", 1)[-1] for name in (*TORCH_SUFFIXES, *HF_FILES, *vocab.SUFFIXES)})
DROPPED = "lpos_bytes_dropped"  # set on a file in the box once read: its bytes are gone


def cap_mb() -> int:
    """The upload limit in MB: LPOS_MAX_UPLOAD_MB, and never above Streamlit's own server.maxUploadSize."""
    cap = settings.max_upload_mb()
    server_cap = st.get_option("server.maxUploadSize")
    return max(1, min(cap, int(server_cap))) if server_cap else max(1, cap)


def load_upload(files: list[UploadedFile], *, n_head: int | None = None) -> Upload:
    """The model in `files`, read under the box's cap (lpos.checkpoints.uploads.read_upload)."""
    return read_upload(files, limit_mb=cap_mb(), n_head=n_head)


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
    # A file whose bytes _forget_bytes gave back comes back as Streamlit's DeletedFile (no name, no bytes)
    in_box = [f for f in st.session_state.get("upload") or [] if hasattr(f, "name")]
    seen = st.session_state.setdefault("upload_seen", set())
    files = files_to_load(in_box, seen)
    seen.update(f.file_id for f in in_box)
    st.session_state.pop("upload_message", None)
    if not set(st.session_state.get("upload_pending") or []) <= {f.file_id for f in in_box}:
        st.session_state.pop("upload_pending")  # the file waiting for its head count was removed
    waiting = [f for f in in_box if f.file_id in (st.session_state.get("upload_needs_tokenizer") or [])]
    if files and waiting and all(is_tokenizer_file(f.name) for f in files):  # the tokenizer it asked for
        files = [f for f in waiting if f not in files] + files
    elif files and not all(is_tokenizer_file(f.name) for f in files):  # a tokenizer added before its model
        files += [f for f in in_box if is_tokenizer_file(f.name) and f not in files and not getattr(f, DROPPED, False)]
    if files:  # else a file was removed from the box: the models stay
        _load(files)
    elif waiting:  # the refused tokenizer was taken out: the model still waits, and the box says so again
        st.session_state["upload_message"] = ("info", f"{', '.join(f.name for f in waiting)} is kept: add the tokenizer "
                                              "it was trained with to the box. The model in use has not changed.")


def _keep_for_its_tokenizer(files: list, *, n_head: int | None) -> bool:
    """After a refusal of a model with a tokenizer: whether the model alone only asks for a tokenizer. Then
    its bytes are kept, waiting for the right one as when none came (upload_needs_tokenizer), and only the
    refused tokenizer's are given back."""
    tokenizers = [f for f in files if is_tokenizer_file(f.name)]
    models = [f for f in files if f not in tokenizers]
    if not tokenizers or not models:
        return False
    try:
        load_upload(models, n_head=n_head)
    except NeedsTokenizer:
        _forget_bytes(tokenizers)
        st.session_state["upload_needs_tokenizer"] = [f.file_id for f in models]
        return True
    except CheckpointError:
        return False
    return False  # it loads without the tokenizer: the refusal stands as it was


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
    st.session_state.pop("upload_needs_tokenizer", None)
    release_idle_models()  # before the file's weights are built beside its bytes, not after
    try:
        upload = load_upload(files, n_head=n_head)
    except IncompleteUpload as e:  # its partner may come next: keep the bytes
        st.session_state["upload_message"] = ("info", str(e))
        return
    except NeedsHeadCount as e:  # keep the bytes until a head count is chosen
        st.session_state.update(upload_pending=[f.file_id for f in files], upload_width=e.width,
                                upload_message=("info", f"{e}. Choose it below; the model in use has not changed."))
        return
    except NeedsTokenizer as e:  # keep the model's bytes until its tokenizer is added
        st.session_state.update(upload_needs_tokenizer=[f.file_id for f in files if not is_tokenizer_file(f.name)],
                                upload_message=("info", f"{e}. Add it to the box; the model in use has not changed."))
        return
    except CheckpointError as e:
        if _keep_for_its_tokenizer(files, n_head=n_head):  # the tokenizer was the wrong one: the model waits
            models = ", ".join(f.name for f in files if not is_tokenizer_file(f.name))
            st.session_state["upload_message"] = ("error", f"{str(e).rstrip('.')}. {models} is kept: add the "
                                                   "tokenizer it was trained with to the box. The model in use has "
                                                   "not changed.")
            return
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
    doubts = st.session_state.setdefault("upload_doubts", {})  # shown on every page while the model is chosen
    doubts[upload.key] = tokenizer_doubt(upload)
    for key in set(doubts) - set(uploads):
        del doubts[key]
    loaded = f"Loaded {upload.name}. Only you can see it; it is gone when you close this tab."
    st.session_state["upload_message"] = (("warning", f"{loaded} {doubts[upload.key]}") if doubts[upload.key] else
                                          ("success", loaded)) + (upload.summary,)


def tokenizer_doubt(upload: Upload) -> str:
    """lpos.analysis.lengths.wrong_tokenizer_sentence for a trained model on its own tokenizer, on the built-in story
    ("" when it reads the story better than an even guess). A tokenizer of the right size and the wrong content
    loads without complaint and every page draws: only the loss gives it away. The story is read up to the model's
    training length (at most 256 tokens), and only when the tokenizer keeps nearly all of it: a model whose
    vocabulary lacks most of the story's characters was trained on other text, and its loss there proves nothing."""
    model, tokenizer = upload.model, upload.meta.get("tokenizer")
    if tokenizer is None or tokenizer.is_gpt2 or not LoadedModel(upload.key, upload.name, model, upload.meta).trained:
        return ""
    text = story()
    ids, dropped = tokenizer.encode_known(text)
    if dropped > len(text) // 10 or len(ids) < 2:
        return ""
    read = ids[: min(training_length(upload.meta, model), 256) + 1]
    with torch.no_grad():  # the upload callback runs with autograd on: build no graph
        curve = loss_along_text(model, read)
    said = wrong_tokenizer_sentence(curve, model, source=str(upload.meta.get("source", "")),
                                    text=f"the first {len(read):,} tokens of the built-in story")
    return said and f"{said} Upload the model again together with the tokenizer it was trained with."


def uploader() -> None:
    """The upload box, its last message and what the model was read as (called inside the sidebar, first of
    its controls: on a 1366×768 laptop everything below the page list and the sentence is below the fold).
    A folded expander, one line high; it opens by itself while there is a message or a question to answer."""
    kind, message, *details = st.session_state.get("upload_message", (None, None))
    with st.expander("Upload your own model", icon=":material/upload:",
                     expanded=kind is not None or bool(st.session_state.get("upload_pending"))):
        _upload_box(kind, message, details)


def _upload_box(kind: str | None, message: str | None, details: list) -> None:
    limit = cap_mb()
    st.file_uploader(
        "Upload a model", type=ACCEPTED_TYPES, accept_multiple_files=True, key="upload", on_change=_on_upload,
        max_upload_size=limit,
        help=f"A {'/'.join(TORCH_SUFFIXES)} file: {LAYOUT_NAMES}, or llama2.c's model.bin; or a Hugging Face "
             f"GPT-2 folder's {HF_FOLDER_LAYOUT.files} (select them together, and tokenizer.json if it has its own). "
             f"A model on its own vocabulary needs its tokenizer with it: {vocab.DESCRIBED}. "
             f"Up to {shown_mb(limit)}. It stays in this browser session only.",
    )
    st.caption(f"Up to {shown_mb(limit)} per model; only this browser tab can see it. Once read, it joins the "
               "Model box below.")
    if kind == "error":
        st.error(message, icon=":material/error:")
    elif kind == "info":
        st.info(message, icon=":material/info:")
    elif kind in ("success", "warning"):  # loaded; a warning when its tokenizer is in doubt (tokenizer_doubt)
        if kind == "success":
            st.success(message, icon=":material/check_circle:")
        else:
            st.warning(message, icon=":material/warning:")
        for line in details[0] if details else []:
            st.caption(literal(line))  # key names from the file, shown as the characters they are
    if st.session_state.get("upload_pending"):
        width = st.session_state["upload_width"]
        st.selectbox("Attention heads in this model", head_counts(width), index=None, key="upload_heads",
                     placeholder="choose the head count", on_change=_on_head_count,
                     help=f"The n_head your trainer used (its width, {width}, divides evenly into heads)."
                          + (f" GPT-2's heads are 64 wide: {width // 64} at this width." if width % 64 == 0 else ""))
