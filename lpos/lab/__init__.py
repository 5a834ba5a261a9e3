"""The lab: train a tiny GPT of any registered position scheme on a task that needs positions, watch it learn,
and test it past its training window. The same engine serves the command line (`python -m lpos lab`), the Lab
page and Python:

    from lpos import lab
    model, meta = lab.train(lab.LabArgs(task="copy", scheme="rope", window=32))
    lab.summary(meta)["accuracy_by_length"]      # {16: ..., 32: ..., ..., 128: ...}: None past a table
    lab.save(model, meta, "run.pt")              # lpos.checkpoints.load("run.pt") opens it

Modules: tasks (the character tasks), text (the text task), measure (accuracy by length, the scheme's picture),
training (presets, caps, the loop), runs (runs in worker processes, a bounded queue; or an RQ queue on Redis),
job (what a worker process runs: `python -m lpos.lab.job`, or an RQ job).
"""
from __future__ import annotations

import io
import tempfile
from pathlib import Path

from lpos import checkpoints
from lpos.lab.measure import Picture, evaluation_lengths
from lpos.lab.tasks import TASK_NAMES, TASKS, TEXT, Task
from lpos.lab.text import TextError, TextTask, read_text
from lpos.lab.training import PRESETS, Caps, LabArgs, Preset, Progress, train, twins
from lpos.model import GPT

SUMMARY_KEYS = ("scheme", "task", "window", "preset", "seed", "steps", "seconds", "stopped", "accuracy_by_length")


def summary(meta: dict) -> dict:
    """A run as the CLI prints it: scheme, task, window, preset, seed, steps, seconds, stopped (None or why) and
    accuracy_by_length (evaluation length -> accuracy from 0 to 1; None where the scheme cannot read that far)."""
    run = meta["lab"]
    return {"scheme": run["scheme"], "task": run["task"], "window": run["window"], "preset": run["preset"],
            "seed": run["seed"], "steps": run["steps_done"], "seconds": run["seconds"], "stopped": run["stopped"],
            "accuracy_by_length": {int(k): v for k, v in run["accuracy_by_length"].items()}}


def save(model: GPT, meta: dict, path: str | Path) -> None:
    """The run as an lpos checkpoint: its tokenizer, its timeline and meta["lab"] inside."""
    checkpoints.save(model, meta, path)


def checkpoint_bytes(model: GPT, meta: dict) -> bytes:
    """The run's lpos checkpoint as bytes (a download, or a worker's answer)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.pt"
        save(model, meta, path)
        return path.read_bytes()


def load_bytes(data: bytes, *, name: str = "run.pt") -> tuple[GPT, dict]:
    """The model and meta of checkpoint bytes (checkpoint_bytes' inverse), through lpos.checkpoints.load."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_bytes(io.BytesIO(data).getvalue())
        model, meta = checkpoints.load(path)
        model.eval()
        return model, meta


__all__ = ["PRESETS", "SUMMARY_KEYS", "TASKS", "TASK_NAMES", "TEXT", "Caps", "LabArgs", "Picture", "Preset",
           "Progress", "Task", "TextError", "TextTask", "checkpoint_bytes", "evaluation_lengths", "load_bytes",
           "read_text", "save", "summary", "train", "twins"]
