"""What goes wrong with a model file, as exceptions whose message is one sentence for the user."""
from __future__ import annotations


class CheckpointError(ValueError):
    """A file that cannot be used as a model; the message is one sentence for the user."""


class NeedsHeadCount(CheckpointError):
    """The file does not say n_head; `width` is what it must divide."""

    def __init__(self, label: str, width: int):
        self.width = width
        choices = ", ".join(str(n) for n in head_counts(width))
        super().__init__(f"{label} does not say how many attention heads it has: give n_head, one of {choices} "
                         f"(the numbers that divide its width, {width})")


class NeedsTokenizer(CheckpointError):
    """The model's vocabulary is not GPT-2's and no tokenizer came with it; `rows` is its size."""

    def __init__(self, label: str, rows: int, files: str):
        self.rows = rows
        super().__init__(f"{label} has a vocabulary of {rows:,} rows, not GPT-2's 50,257 tokens, so it needs its own "
                         f"tokenizer: give {files}")


def head_counts(width: int) -> list[int]:
    """The head counts a width allows: its divisors (at most 64 of them are offered)."""
    return [n for n in range(1, min(width, 4096) + 1) if width % n == 0][:64]


def as_dict(value, label: str, what: str) -> dict:
    """`value` as a dict, or CheckpointError naming the part of the file that is not one."""
    if not isinstance(value, dict):
        raise CheckpointError(f"{label}: {what} is not a dictionary, so this is not a usable checkpoint")
    return dict(value)
