"""The lab's `text` task: next-token prediction on the built-in story or on a learner's own text, on GPT-2's
tokenizer restricted to the tokens the text uses (the model's softmax runs over them only, as the shipped
models train). The last fifth of the tokens is held out: accuracy by length is measured there.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from lpos.corpus import story
from lpos.lab.tasks import Batch
from lpos.tokenizer import encode

MAX_TEXT_BYTES = 2**20  # 1 MB of UTF-8
HELD_OUT = 0.2  # the share of the tokens, at the end, kept for evaluation
BUILT_IN = "the built-in story"


class TextError(ValueError):
    """Text the lab cannot train on; the message is one sentence for the learner."""


def read_text(data: bytes | str, *, name: str = "the text") -> str:
    """The learner's text: UTF-8, at most 1 MB, with enough tokens to train on; TextError otherwise."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if len(raw) > MAX_TEXT_BYTES:
        raise TextError(f"{name} is {len(raw) / 2**20:.1f} MB; the lab takes at most 1 MB of text")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TextError(f"{name} is not UTF-8 text: save it as UTF-8 (plain .txt) and try again") from None
    if len(encode(text)) < 200:
        raise TextError(f"{name} is too short: give at least a few paragraphs (200 tokens or more)")
    return text


@dataclass(frozen=True)
class TextTask:
    """Windows of a text's GPT-2 tokens: training from the first four fifths, evaluation from the rest."""

    text: str
    source: str = BUILT_IN
    name: str = "text"
    label: str = "Text"

    @property
    def description(self) -> str:
        return (f"Next-token prediction on {self.source}, on GPT-2's tokenizer restricted to the tokens it uses. "
                "Accuracy is the share of held-out tokens predicted exactly.")

    @classmethod
    def built_in(cls) -> TextTask:
        return cls(story())

    def ids(self) -> torch.Tensor:
        return torch.tensor(encode(self.text))

    def split(self) -> tuple[torch.Tensor, torch.Tensor]:
        ids = self.ids()
        cut = int(len(ids) * (1 - HELD_OUT))
        return ids[:cut], ids[cut:]

    def vocabulary(self) -> torch.Tensor:
        return self.ids().unique()

    def batch(self, count: int, length: int, g: torch.Generator, *, exact: bool = False) -> Batch:
        """Random windows of `length` + 1 training tokens (`exact` is every task's keyword; windows are exact)."""
        train, _ = self.split()
        length = min(length, len(train) - 1)
        starts = torch.randint(0, len(train) - length, (count,), generator=g)
        windows = torch.stack([train[s: s + length + 1] for s in starts.tolist()])  # (B, T+1)
        return Batch(windows[:, :-1], windows[:, 1:], torch.ones(count, length, dtype=torch.bool))

    def held_out(self, count: int, length: int) -> Batch | None:
        """Up to `count` evenly spread windows of `length` held-out tokens; None when the held-out text is shorter."""
        _, held = self.split()
        if len(held) < length + 1:
            return None
        starts = torch.linspace(0, len(held) - length - 1, min(count, len(held) - length)).long().unique()
        windows = torch.stack([held[s: s + length + 1] for s in starts.tolist()])
        return Batch(windows[:, :-1], windows[:, 1:], torch.ones(len(starts), length, dtype=torch.bool))
