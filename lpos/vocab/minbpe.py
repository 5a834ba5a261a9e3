"""Karpathy's minbpe: a byte-level BPE whose `.model` file is text.

The file: a version line `minbpe v1`; the split pattern (empty for BasicTokenizer, which merges
across the whole text); the number of special tokens, then one `<token> <id>` line each; then
one merge per line, `<id1> <id2>`, the i-th merge making token 256 + i. Encoding splits the text
with the pattern, turns each piece into its UTF-8 bytes (ids 0-255) and repeatedly merges the
adjacent pair whose merge came first, as minbpe's `encode_ordinary` does: special-token spellings
stay plain text. Every byte is a token, so no text is unknown.
"""
from __future__ import annotations

from pathlib import Path

import regex

from lpos.vocab.base import Tokenizer, TokenizerError, TokenizerFormat, check_vocab_size, piece_labels, read_capped

VERSION = "minbpe v1"
MAX_MERGES = 1_000_000
SPLIT_SECONDS = 5  # a hostile pattern can backtrack for ever; regex stops it


class MinbpeTokenizer(Tokenizer):
    kind = "minbpe"

    def __init__(self, *, pattern: str, merges: list[tuple[int, int]], special: dict[str, int], source: str):
        try:
            self.split = regex.compile(pattern) if pattern else None
        except (regex.error, RecursionError, OverflowError) as e:
            raise TokenizerError(f"{source}'s split pattern is not a regular expression ({str(e)[:80]})") from None
        self.pattern, self.merges, self.special, self.source = pattern, list(merges), dict(special), source
        self.ranks = {pair: 256 + i for i, pair in enumerate(self.merges)}  # (a, b) -> the id it makes
        pieces = [bytes([i]) for i in range(256)]
        for i, (a, b) in enumerate(self.merges):
            if not (0 <= a < 256 + i and 0 <= b < 256 + i):
                raise TokenizerError(f"{source}'s merge {i + 1} joins token {max(a, b)}, which is not made yet")
            pieces.append(pieces[a] + pieces[b])
        self.pieces = pieces
        if any(not len(pieces) <= i < MAX_MERGES + 256 for i in special.values()):
            raise TokenizerError(f"{source}'s special tokens must have ids after its {len(pieces):,} byte and merge tokens")
        self.vocab_size = check_vocab_size(max([len(pieces) - 1, *self.special.values()]) + 1, source)
        self.special_ids = {i: s for s, i in self.special.items()}
        self.name = f"minbpe {source} ({self.vocab_size:,})"

    def _encode(self, text: str) -> list[int]:
        try:
            chunks = self.split.findall(text, timeout=SPLIT_SECONDS) if self.split is not None else [text]
        except TimeoutError:
            raise TokenizerError(f"{self.source}'s split pattern took over {SPLIT_SECONDS} s on this text") from None
        ids = []
        for chunk in chunks:
            ids.extend(self._merge(list(chunk.encode("utf-8"))))
        return ids

    def _merge(self, ids: list[int]) -> list[int]:
        while len(ids) >= 2:
            pairs = {(a, b) for a, b in zip(ids, ids[1:]) if (a, b) in self.ranks}
            if not pairs:
                return ids
            pair = min(pairs, key=self.ranks.__getitem__)  # the earliest merge first
            merged, i, new = [], 0, self.ranks[pair]
            while i < len(ids):
                if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
                    merged.append(new)
                    i += 2
                else:
                    merged.append(ids[i])
                    i += 1
            ids = merged
        return ids

    def _bytes(self, i: int) -> bytes:
        return self.special_ids[i].encode() if i in self.special_ids else self.pieces[i]

    def decode(self, ids: list[int]) -> str:
        return b"".join(self._bytes(i) for i in ids).decode("utf-8", errors="replace")

    def token_strings(self, ids: list[int]) -> list[str]:
        return piece_labels([self._bytes(i) for i in ids])

    def to_data(self) -> dict:
        return {"kind": self.kind, "pattern": self.pattern, "merges": [list(m) for m in self.merges],
                "special": dict(self.special), "source": self.source}

    @classmethod
    def from_data(cls, data: dict) -> MinbpeTokenizer:
        return cls(pattern=str(data["pattern"]), merges=[(int(a), int(b)) for a, b in data["merges"]],
                   special={str(k): int(v) for k, v in dict(data["special"]).items()},
                   source=str(data.get("source", "minbpe"))[:80])


def is_minbpe(head: bytes) -> bool:
    return head.startswith(VERSION.encode())


def read_minbpe(path: Path) -> MinbpeTokenizer:
    """A minbpe `.model` file, each line checked; TokenizerError says which line is wrong."""
    try:
        lines = read_capped(path, what="minbpe model").decode("utf-8").split("\n")
    except UnicodeDecodeError:
        raise TokenizerError(f"{path.name} is not UTF-8 text, so it is not a minbpe model") from None
    if lines[0].strip() != VERSION:
        raise TokenizerError(f"{path.name} does not start with '{VERSION}', so it is not a minbpe model")
    if len(lines) < 3:
        raise TokenizerError(f"{path.name} ends before its special-token count")
    pattern = lines[1].strip()
    try:
        n_special = int(lines[2])
        if not 0 <= n_special <= len(lines) - 3:
            raise ValueError
        special = {}
        for line in lines[3 : 3 + n_special]:
            token, number = line.rsplit(" ", 1)
            special[token] = int(number)
        merges = [tuple(int(x) for x in line.split()) for line in lines[3 + n_special :] if line.strip()]
    except ValueError:
        raise TokenizerError(f"{path.name} has a line that is not '<token> <id>' or '<id> <id>'") from None
    if any(len(m) != 2 for m in merges) or len(merges) > MAX_MERGES:
        raise TokenizerError(f"{path.name}'s merges are not pairs of ids (at most {MAX_MERGES:,} of them)")
    return MinbpeTokenizer(pattern=pattern, merges=merges, special=special, source=path.name)


FORMAT = TokenizerFormat("a minbpe .model", (".model",), lambda head, suffix: is_minbpe(head), read_minbpe)
