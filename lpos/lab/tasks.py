"""The lab's tasks, each declared once: how a sample is written, which of its tokens are scored, and the one or
two sentences the page shows.

Every task but `text` writes characters from a small alphabet, one token per character (a CharacterTokenizer
over the task's `characters`). A sample starts at position 0 of its window and is padded with PAD up to the
window; padding is never scored. Accuracy is the share of scored tokens the model predicts exactly, each given
the true text before it (teacher forcing, argmax).

- copy:    n letters, `|`, the same n letters: each answer sits n + 1 places after the letter it copies, and n
           changes from sample to sample.
- reverse: n letters, `|`, the same letters backwards: the answer j places after `|` is the letter j places
           before it, a mirror rather than a fixed shift.
- back:    K random letters, then every letter repeats the one K places back: one fixed distance, nothing else.
- count:   each letter of `abcd` followed by how many times it has occurred so far (its last digit): the
           quantity CoPE counts with its gates.
- text:    next-token prediction on a text, on GPT-2's tokenizer restricted to the tokens the text uses
           (lpos.lab.text).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

LETTERS = "abcdefghijklmnop"
SEPARATOR = "|"
PAD = "."  # fills a sample up to its window; never scored
BACK = 4  # the distance the `back` task looks back
COUNTED = "abcd"  # the `count` task's letters: few, so each recurs often


@dataclass(frozen=True)
class Batch:
    x: torch.Tensor  # (B, T) inputs
    y: torch.Tensor  # (B, T) next-token targets
    scored: torch.Tensor  # (B, T) bool: the targets accuracy and the loss count


class Task:
    """A synthetic task over characters. Subclasses set the attributes and `write` one sample."""

    name: str = ""
    label: str = ""
    description: str = ""  # one or two sentences for the page
    characters: str = ""  # the vocabulary, PAD included; its order is the token ids'
    example_length: int = 21  # characters of the example the page shows

    def write(self, length: int, g: torch.Generator, *, exact: bool) -> tuple[str, list[bool]]:
        """One sample of at most `length` characters (`exact`: as close to `length` as the task allows; else its
        size is drawn) and, per character, whether predicting it is scored."""
        raise NotImplementedError

    def encode(self, text: str) -> list[int]:
        return [self.characters.index(c) for c in text]

    def batch(self, count: int, length: int, g: torch.Generator, *, exact: bool = False) -> Batch:
        """`count` samples of at most `length` characters, each in a window of `length` tokens: inputs, targets
        (the sample shifted by one, padded) and which targets are scored."""
        xs, ys, scored = [], [], []
        for _ in range(count):
            text, marks = self.write(length, g, exact=exact)
            pad = length + 1 - len(text)
            ids = self.encode(text + PAD * pad)
            marks = marks + [False] * pad
            xs.append(ids[:-1])
            ys.append(ids[1:])
            scored.append(marks[1:])
        return Batch(torch.tensor(xs), torch.tensor(ys), torch.tensor(scored))

    def example(self, seed: int = 0) -> str:
        text, _ = self.write(self.example_length, torch.Generator().manual_seed(seed), exact=True)
        return text


def letters(n: int, g: torch.Generator, alphabet: str = LETTERS) -> str:
    return "".join(alphabet[i] for i in torch.randint(len(alphabet), (n,), generator=g).tolist())


def half(length: int, g: torch.Generator, *, exact: bool) -> int:
    """n for a sample of n letters, a separator and n more, in `length` characters: the most that fit when
    `exact`, else drawn uniformly from 1 to that."""
    most = max(1, (length - 1) // 2)
    return most if exact else int(torch.randint(1, most + 1, (1,), generator=g))


class Copy(Task):
    name, label = "copy", "Copy"
    description = (f"A sample is n letters from `{LETTERS}`, `{SEPARATOR}`, then the same n letters again. Each answer "
                   "is the letter n + 1 places back, and n changes from sample to sample, so the model must know where "
                   "the separator and the answer sit.")
    characters = PAD + SEPARATOR + LETTERS

    def write(self, length, g, *, exact):
        n = half(length, g, exact=exact)
        shown = letters(n, g)
        return shown + SEPARATOR + shown, [False] * (n + 1) + [True] * n


class Reverse(Task):
    name, label = "reverse", "Reverse"
    description = (f"n letters, `{SEPARATOR}`, then the same letters backwards. The answer j places after the "
                   "separator is the letter j places before it: a mirror around the separator, not a fixed shift.")
    characters = PAD + SEPARATOR + LETTERS

    def write(self, length, g, *, exact):
        n = half(length, g, exact=exact)
        shown = letters(n, g)
        return shown + SEPARATOR + shown[::-1], [False] * (n + 1) + [True] * n


class Back(Task):
    name, label = "back", f"{BACK} places back"
    description = (f"{BACK} random letters, then every letter repeats the letter {BACK} places back. One fixed "
                   "distance and nothing else: a scheme that knows how far apart two tokens are has all it needs.")
    characters = PAD + LETTERS

    def write(self, length, g, *, exact):
        start = letters(BACK, g)
        text = (start * (length // BACK + 1))[:length]
        return text, [i >= BACK for i in range(length)]


class Count(Task):
    name, label = "count", "Count so far"
    description = (f"Letters from `{COUNTED}`, each followed by how many times it has occurred so far (its last "
                   "digit). The answer depends on how many earlier tokens match, not on where they sit: what CoPE "
                   "counts with its gates.")
    characters = PAD + COUNTED + "0123456789"

    def write(self, length, g, *, exact):
        seen = dict.fromkeys(COUNTED, 0)
        text, marks = [], []
        for letter in letters(length // 2, g, COUNTED):
            seen[letter] += 1
            text += [letter, str(seen[letter] % 10)]
            marks += [False, True]
        return "".join(text), marks


TASKS: dict[str, Task] = {task.name: task for task in (Copy(), Reverse(), Back(), Count())}
TEXT = "text"  # next-token prediction on a text (lpos.lab.text): not a Task of characters
TASK_NAMES = (*TASKS, TEXT)


def check_task(name: str) -> str:
    if name not in TASK_NAMES:
        raise ValueError(f"unknown lab task {name!r}; choose one of {sorted(TASK_NAMES)}")
    return name
