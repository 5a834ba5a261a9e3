"""Reading a torch file safely: size caps first, then `torch.load(weights_only=True)`.

`weights_only=True` refuses to unpickle anything but tensors and plain containers: a file that
tries to run code is refused, never executed. The one exception is a trainer's own config object
(a pickled `@dataclass GPTConfig`): the class the file names is never imported; a stand-in of ours
(PickledConfig) is built in its place and keeps plain values only. Before loading, the archive's
declared sizes are checked against a cap, so a zip bomb is refused unread. Files are
memory-mapped, so an optimizer state saved beside the weights is never read into memory.
"""
from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import pickle
import re
import threading
import zipfile
from pathlib import Path

import torch

from lpos import settings
from lpos.checkpoints.errors import CheckpointError

MAX_BYTES = settings.max_upload_mb() * 1024 * 1024  # LPOS_MAX_UPLOAD_MB
CONFIG_CLASS = re.compile(r"(?:[A-Za-z_]\w*\.)+[A-Za-z_]\w*(?:Config|Args)")  # src.model.gpt.GPTConfig
_SAFE_GLOBALS = threading.Lock()  # torch's allowlist is one global set: one stand-in load at a time
_PAGE, _MADV_DONTNEED = mmap.PAGESIZE, 4
try:
    _LIBC = ctypes.CDLL(None, use_errno=True) if os.uname().sysname == "Linux" else None
except (OSError, AttributeError):
    _LIBC = None


class PickledConfig:
    """Built in place of a trainer's own config class: numbers, text, True/False/None kept as
    `fields`, anything else dropped. Unpickling calls only this `__setstate__`; nothing of the
    file's class runs (it is never imported), and `__slots__` leaves no `__dict__` to overwrite."""

    __slots__ = ("fields",)
    source = ""  # the class the file names; set on the subclass made for each name

    def __setstate__(self, state) -> None:
        parts = state if isinstance(state, tuple) else (state,)  # (__dict__, __slots__ values) or __dict__
        values = {k: v for part in parts if isinstance(part, dict) for k, v in part.items()}
        plain = (bool, int, float, str, type(None))
        self.fields = {k: v for k, v in values.items() if type(k) is str and not k.startswith("_") and type(v) in plain}


def read_payload(path: Path, *, max_bytes: int = MAX_BYTES) -> dict:
    """The dict inside a torch file, loaded with weights_only=True after the size checks."""
    size = path.stat().st_size
    if size > max_bytes:
        raise CheckpointError(f"{path.name} is {size / 2**20:.0f} MB; the limit is {max_bytes / 2**20:.0f} MB")
    try:
        with zipfile.ZipFile(path) as archive:
            declared = sum(info.file_size for info in archive.infolist())
    except zipfile.BadZipFile:
        raise CheckpointError(f"{path.name} is not a PyTorch checkpoint (not a zip archive, or truncated)") from None
    if declared > max_bytes:
        raise CheckpointError(
            f"{path.name} unpacks to {declared / 2**20:.0f} MB, over the {max_bytes / 2**20:.0f} MB limit"
        )
    try:
        try:
            payload = _unpickled(path, [])  # most files (every lpos file) name no class: their pickle is read once
        except pickle.UnpicklingError as e:
            stand_ins = _config_stand_ins(path) if "Unsupported global" in str(e) else []
            if not stand_ins:
                raise
            payload = _unpickled(path, stand_ins)
    except pickle.UnpicklingError as e:
        if "Weights only load failed" not in str(e) or "Unsupported operand" in str(e):  # damaged, not refused
            raise CheckpointError(f"{path.name} could not be read (UnpicklingError): the file is damaged") from None
        raise CheckpointError(
            f"{path.name} contains Python objects other than tensors; lpos refuses to unpickle them"
        ) from None
    except Exception as e:  # truncated or corrupt archives raise many kinds of errors
        raise CheckpointError(f"{path.name} could not be read ({type(e).__name__}): the file is damaged") from None
    if not isinstance(payload, dict):
        raise CheckpointError(f"{path.name} does not hold a checkpoint dictionary")
    return payload


def _unpickled(path: Path, stand_ins: list[tuple[type, str]]):
    """torch.load with weights_only=True, the config classes of `stand_ins` (_config_stand_ins) allowed."""
    with _SAFE_GLOBALS if stand_ins else contextlib.nullcontext(), torch.serialization.safe_globals(stand_ins):
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)


def drop_file_pages(tensor: torch.Tensor) -> None:
    """Let go of the memory-mapped file pages under `tensor` once its values have been copied out,
    so a large model is not held twice (the copy and the file's pages) while the rest loads. Only
    pages wholly inside the tensor and backed by a file are dropped (madvise DONTNEED: read again
    from the file if ever touched); anonymous memory, which that would zero, is never touched.
    Linux only; elsewhere the pages go when the payload does."""
    if _LIBC is None or tensor.device.type != "cpu" or tensor.numel() == 0 or not tensor.is_contiguous():
        return
    start = tensor.data_ptr()
    end = start + tensor.numel() * tensor.element_size()
    first, last = -(-start // _PAGE) * _PAGE, end // _PAGE * _PAGE  # whole pages inside only
    if last <= first or not _file_backed(first, last):
        return
    _LIBC.madvise(ctypes.c_void_p(first), ctypes.c_size_t(last - first), _MADV_DONTNEED)


def _file_backed(first: int, last: int) -> bool:
    """Whether [first, last) lies in one private mapping of a file (/proc/self/maps: an inode)."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split()
                low, high = (int(x, 16) for x in fields[0].split("-"))
                if low <= first and last <= high:
                    return len(fields) >= 6 and fields[4] != "0" and fields[1].endswith("p")
    except (OSError, ValueError, IndexError):
        pass
    return False


def _config_stand_ins(path: Path) -> list[tuple[type, str]]:
    """A PickledConfig subclass for each config class the file names (read from its pickle's
    GLOBAL instructions without running them); every other global stays refused."""
    try:
        names = torch.serialization.get_unsafe_globals_in_checkpoint(str(path))
    except Exception:  # damaged: torch.load says how
        return []
    return [(type(name.rpartition(".")[2], (PickledConfig,), {"__slots__": (), "source": name}), name)
            for name in sorted(names) if CONFIG_CLASS.fullmatch(name)]
