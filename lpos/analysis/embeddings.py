"""What the embedding layer does to a sentence: token rows, position rows, their sum."""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from lpos.model import GPT
from lpos.tokenizer import GPT2, Tokenizer, visible


@dataclass(frozen=True)
class EmbeddingView:
    ids: list[int]
    tokens: list[str]  # token text, whitespace made visible
    token_rows: np.ndarray  # (T, C)
    position_rows: np.ndarray | None  # (T, C), None for rope / alibi / none
    summed_rows: np.ndarray  # (T, C)
    counts: list[int | None]  # training count per token; None when the model has no counts
    tokenizer_name: str = "GPT-2"  # whose ids these are (a learner's model has its own vocabulary)
    table_rows: list[int] | None = None  # the table row each position reads, where that is not the position itself


@dataclass(frozen=True)
class RepeatedToken:
    token: str
    positions: tuple[int, int]  # first two positions where it occurs
    token_rows_max_difference: float  # 0.0: the same row looked up twice
    summed_cosine: float  # cosine similarity of the two summed rows (1.0 when nothing is added)
    occurrences: int = 2  # how many times the token occurs in the sentence
    table_rows: tuple[int, int] | None = None  # the table rows added at the two positions, where they are not the positions


class TokenCounts(Mapping):
    """Per-token training counts, token id -> count, held as two sorted arrays: 0.2 MB for the
    shipped models' 11,678 tokens, where a dict of Python ints takes about 1 MB."""

    __slots__ = ("ids", "counts")

    def __init__(self, counts: Mapping):
        ids = np.fromiter((int(k) for k in counts), dtype=np.int64, count=len(counts))
        values = np.fromiter((int(v) for v in counts.values()), dtype=np.int64, count=len(counts))
        order = np.argsort(ids)
        self.ids, self.counts = ids[order], values[order]

    def __getitem__(self, token_id: int) -> int:
        i = int(np.searchsorted(self.ids, token_id))
        if i < len(self.ids) and self.ids[i] == token_id:
            return int(self.counts[i])
        raise KeyError(token_id)

    def __iter__(self) -> Iterator[int]:
        return (int(i) for i in self.ids)

    def __len__(self) -> int:
        return len(self.ids)


def token_counts(meta: dict) -> Mapping[int, int] | None:
    """Per-token training counts from a checkpoint's meta, or None if it has none."""
    counts = meta.get("token_counts")
    if counts is None or isinstance(counts, TokenCounts):
        return counts
    return TokenCounts(counts)


@torch.no_grad()
def embedding_view(model: GPT, ids: list[int], *, counts: dict[int, int] | None = None,
                   tokenizer: Tokenizer = GPT2) -> EmbeddingView:
    parts = model.embed_parts(torch.tensor([ids], dtype=torch.long))
    read = model.scheme.input_positions(model.config, len(ids), 0) if parts.position is not None else None  # (T,)
    return EmbeddingView(
        ids=list(ids),
        tokens=[visible(t) for t in tokenizer.token_strings(ids)],
        token_rows=parts.token[0].numpy(),
        position_rows=None if parts.position is None else parts.position.numpy(),
        summed_rows=parts.total[0].numpy(),
        counts=[counts.get(i, 0) for i in ids] if counts is not None else [None] * len(ids),
        tokenizer_name=tokenizer.name,
        table_rows=None if read is None or torch.equal(read, torch.arange(len(ids))) else read.tolist(),
    )


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    denominator = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / denominator if denominator else 0.0


def repeated_tokens(view: EmbeddingView) -> list[RepeatedToken]:
    """Every token id that occurs more than once, compared at its first two positions."""
    first: dict[int, int] = {}
    found = []
    for position, token_id in enumerate(view.ids):
        if token_id in first and all(r.positions[0] != first[token_id] for r in found):
            i, j = first[token_id], position
            found.append(
                RepeatedToken(
                    token=view.tokens[i],
                    positions=(i, j),
                    token_rows_max_difference=float(np.abs(view.token_rows[i] - view.token_rows[j]).max()),
                    summed_cosine=cosine(view.summed_rows[i], view.summed_rows[j]),
                    occurrences=view.ids.count(token_id),
                    table_rows=(view.table_rows[i], view.table_rows[j]) if view.table_rows else None,
                )
            )
        first.setdefault(token_id, position)
    return found


def times(count: int) -> str:
    """"once", "twice", "three times", "12 times"."""
    words = {1: "once", 2: "twice", 3: "three times", 4: "four times", 5: "five times"}
    return words.get(count, f"{count} times")


def positions_said(repeat: RepeatedToken) -> str:
    """"positions 2 and 6", with the table rows added there when they are not the positions."""
    i, j = repeat.positions
    rows = f" (table rows {repeat.table_rows[0]:,} and {repeat.table_rows[1]:,})" if repeat.table_rows else ""
    return f"positions {i} and {j}{rows}"


def repeat_sentence(repeat: RepeatedToken, *, literal=lambda text: text) -> str:
    """A repeated token in words, as the Embeddings page and the lesson say it: its real count, its first two
    positions, its identical token rows, and its summed rows, identical too where nothing is added at the input
    (`literal` escapes the token text for Markdown)."""
    where = f"at {positions_said(repeat)}" if repeat.occurrences == 2 else f"at its first two, {positions_said(repeat)}"
    summed = (f"and nothing is added, so the summed rows are identical too (cosine {repeat.summed_cosine:.4f})"
              if repeat.summed_cosine > 0.9995 else
              f"different summed rows: cosine similarity {repeat.summed_cosine:.4f}. The position row is what tells "
              "them apart")
    return (f"“{literal(repeat.token)}” occurs {times(repeat.occurrences)}; {where}: identical token rows (largest "
            f"difference {repeat.token_rows_max_difference:g}), {summed}.")


def untrained_rows_sentence(view: EmbeddingView, *, trained_rows: int | None, model: str) -> str | None:
    """Why the position rows from `trained_rows` on look blank, measured: `model` trained on windows of at most
    that many tokens, so those rows never received a gradient. None when the sentence reaches no such row."""
    if trained_rows is None or view.position_rows is None or len(view.ids) <= trained_rows:
        return None
    lengths = np.linalg.norm(view.position_rows, axis=1)  # (T,)
    return (f"{model} trained on windows of at most {trained_rows} tokens: the position rows from {trained_rows} on "
            f"never received a gradient and are still their random starting rows, only shrunk by weight decay: "
            f"{lengths[trained_rows:].mean() / lengths[:trained_rows].mean():.2f}× as long as the trained rows here on "
            "average, so they are nearly blank (Similarity and neighbours shows the whole table).")


def never_seen(view: EmbeddingView) -> list[int]:
    """Positions whose token never occurred in training: their rows are still random init."""
    return [p for p, count in enumerate(view.counts) if count == 0]


def rows_frame(view: EmbeddingView) -> pd.DataFrame:
    """Long table of every number drawn: one row per (position, part), one column per dimension."""
    parts = {"token": view.token_rows, "position": view.position_rows, "sum": view.summed_rows}
    frames = []
    for part, rows in parts.items():
        if rows is None:
            continue
        frame = pd.DataFrame(rows, columns=[f"d{c}" for c in range(rows.shape[1])])
        frame.insert(0, "part", part)
        frame.insert(0, "id", view.ids)
        frame.insert(0, "token", view.tokens)
        frame.insert(0, "position", range(len(view.ids)))
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def row_norms(view: EmbeddingView) -> pd.DataFrame:
    """Per token: id and the L2 norms of its token, position and summed rows (the CLI's inspect)."""
    norms = lambda rows: np.linalg.norm(rows, axis=1) if rows is not None else [None] * len(view.ids)  # noqa: E731
    return pd.DataFrame(
        {
            "position": range(len(view.ids)),
            "token": view.tokens,
            "id": view.ids,
            "token_norm": norms(view.token_rows),
            "position_norm": norms(view.position_rows),
            "sum_norm": norms(view.summed_rows),
        }
    )


def lookalike_tokens(view: EmbeddingView) -> list[tuple[int, int]]:
    """Positions of tokens that read as the same word but are different ids ("The" and "␣the"):
    BPE keeps case and the leading space, so their token rows differ too."""
    seen: dict[str, tuple[int, int]] = {}
    pairs = []
    for position, (token, token_id) in enumerate(zip(view.tokens, view.ids)):
        word = token.replace("␣", "").strip().lower()
        if not word or "‹" in word:  # byte pieces of characters are not words: never "the same word"
            continue
        if word in seen and seen[word][1] != token_id:
            pairs.append((seen[word][0], position))
        seen.setdefault(word, (position, token_id))
    return pairs


def position_share(view: EmbeddingView) -> float | None:
    """The largest |value| in the position rows over the largest in all three tables, the colour scale's
    end: 0.11 for the shipped sinusoidal model (its rows are scaled by 0.028), whose position rows are then
    nearly white. None when nothing is added."""
    if view.position_rows is None or not len(view.ids):
        return None
    limit = max(float(np.abs(rows).max()) for rows in (view.token_rows, view.position_rows, view.summed_rows))
    return float(np.abs(view.position_rows).max()) / limit if limit else None
