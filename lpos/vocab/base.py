"""What every tokenizer offers, and what goes wrong with a tokenizer file.

A `Tokenizer` turns text into ids and back, shows each token as readable text, and says how big
its vocabulary is. Text holding characters the vocabulary lacks is an `UnknownCharacters` error
that names them; `encode_known` drops them instead and says how many went (what the pages show).
`to_data` gives the tokenizer as plain data (dicts, lists, str, bytes, numbers) that an lpos file
stores and `torch.load(weights_only=True)` reads back.
"""
from __future__ import annotations

from pathlib import Path

MAX_TOKENIZER_BYTES = 64 * 2**20  # a 256k-token tokenizer.json is ~20 MB; anything bigger is not a tokenizer
MAX_VOCAB = 1_000_000  # ids a tokenizer may declare: more is a damaged or hostile file


class TokenizerError(ValueError):
    """A tokenizer file lpos cannot use, or text it cannot encode; the message is one sentence for the user."""


class UnknownCharacters(TokenizerError):
    """Text with characters the vocabulary lacks; `characters` lists them (each once, in order)."""

    def __init__(self, name: str, characters: str, count: int):
        self.characters, self.count = characters, count
        shown = ", ".join(repr(c) for c in characters[:8]) + (", …" if len(characters) > 8 else "")
        super().__init__(f"the text has {count:,} character{'s' if count != 1 else ''} that {name}'s vocabulary "
                         f"lacks: {shown}")


class Tokenizer:
    """Text -> ids -> text. Subclasses set `name`, `kind`, `vocab_size` and implement `_encode`
    (raising UnknownCharacters), `_unknown` (the characters it cannot encode), `decode`,
    `token_strings` and `to_data`."""

    name: str  # what the user reads: "GPT-2", "characters of meta.pkl (65)"
    kind: str  # gpt2 | characters | minbpe | huggingface | sentencepiece
    vocab_size: int  # ids run 0..vocab_size-1

    @property
    def is_gpt2(self) -> bool:
        return self.kind == "gpt2"

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`; special-token spellings are plain text; UnknownCharacters names
        any character the vocabulary lacks."""
        unknown = self._unknown(text)
        if unknown:
            raise UnknownCharacters(self.name, "".join(dict.fromkeys(unknown)), len(unknown))
        return self._encode(text)

    def encode_known(self, text: str) -> tuple[list[int], int]:
        """The ids of `text` without the characters the vocabulary lacks, and how many were dropped."""
        unknown = set(self._unknown(text))
        kept = "".join(c for c in text if c not in unknown) if unknown else text
        return self._encode(kept), len(text) - len(kept)

    def _encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def _unknown(self, text: str) -> list[str]:
        """Every character of `text` the vocabulary cannot encode (with repeats); [] when all can."""
        return []

    def decode(self, ids: list[int]) -> str:
        raise NotImplementedError

    def token_strings(self, ids: list[int]) -> list[str]:
        """The text of each token (spaces and newlines as themselves: `lpos.tokenizer.visible`
        shows them); a piece of a multi-byte character shows its bytes, "‹E2 80›" (`readable_bytes`),
        so two different pieces never read alike."""
        raise NotImplementedError

    def to_data(self) -> dict:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<Tokenizer {self.name}: {self.vocab_size:,} tokens>"


def readable_bytes(data: bytes) -> str:
    """A token's bytes as text: UTF-8 where they decode, and each run of bytes that does not (a piece of a
    character split across tokens) as its hex values in ‹›: b" \\xe2\\x80" -> " ‹E2 80›". U+FFFD would make
    every such piece read alike."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    out, loose, i = [], [], 0
    while i < len(data):
        for n in (1, 2, 3, 4):
            try:
                character = data[i:i + n].decode("utf-8")
            except UnicodeDecodeError:
                continue
            if loose:
                out.append("‹" + " ".join(loose) + "›")
                loose = []
            out.append(character)
            i += n
            break
        else:
            loose.append(f"{data[i]:02X}")
            i += 1
    if loose:
        out.append("‹" + " ".join(loose) + "›")
    return "".join(out)


def read_capped(path: Path, *, what: str) -> bytes:
    """The bytes of a tokenizer file, or TokenizerError if it is missing or over the cap."""
    try:
        size = path.stat().st_size
    except OSError:
        raise TokenizerError(f"{path.name} could not be read: no such file") from None
    if size > MAX_TOKENIZER_BYTES:
        raise TokenizerError(f"{path.name} is {size / 2**20:,.0f} MB; a {what} is at most "
                             f"{MAX_TOKENIZER_BYTES // 2**20} MB")
    return path.read_bytes()


def check_vocab_size(size: int, label: str) -> int:
    if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= MAX_VOCAB:
        raise TokenizerError(f"{label} declares {str(size)[:20]} tokens; a tokenizer has 1 to {MAX_VOCAB:,}")
    return size
