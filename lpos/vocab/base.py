"""What every tokenizer offers, and what goes wrong with a tokenizer file.

A `Tokenizer` turns text into ids and back, shows each token as readable text, and says how big
its vocabulary is. Text holding characters the vocabulary lacks is an `UnknownCharacters` error
that names them; `encode_known` drops them instead and says how many went (what the pages show).
`to_data` gives the tokenizer as plain data (dicts, lists, str, bytes, numbers) that an lpos file
stores and `torch.load(weights_only=True)` reads back.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
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

    def left_out_sentence(self, text: str, *, of: str = "the sidebar text", end: str = ".") -> str:
        """What `encode_known` leaves out of `text`, as a sentence: how many characters and which (the first 20);
        "" when it leaves nothing out. `of` names the text for the reader."""
        dropped = self.encode_known(text)[1]
        if not dropped:
            return ""
        missing = sorted(set(self._unknown(text)))
        shown = ", ".join(f"“{visible(c)}”" for c in missing[:20]) + (f" and {len(missing) - 20} more" if len(missing) > 20 else "")
        return (f"{dropped:,} character{'s' if dropped != 1 else ''} of {of} {'are' if dropped != 1 else 'is'} "
                f"not in {self.name} and {'were' if dropped != 1 else 'was'} left out: {shown}{end}")

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


@dataclass(frozen=True)
class TokenizerFormat:
    """One file format a tokenizer comes in, as its module declares it (lpos.vocab.FORMATS gathers them in the
    order `lpos.tokenizer.load_tokenizer` tries them); every suffix list and error text is built from these."""

    described: str  # what the user reads in a list of formats: "nanoGPT's meta.pkl"
    suffixes: tuple[str, ...]  # the name endings an upload or a shared folder takes as this format (lower case)
    sniff: Callable[[bytes, str], bool]  # (the file's first 16 bytes, its lower-case suffix) -> is it this format?
    read: Callable[[Path], Tokenizer]


def visible(token: str) -> str:
    """Token text with whitespace made visible, for chips and axis labels; the spaces that separate a byte
    label's parts ("‹F0 9F of 🐶›") stay spaces, so they never read as spaces of the token."""
    parts = re.split(r"(‹[^›‹]*›)", token)
    return "".join(part if part.startswith("‹") and part.endswith("›") else
                   part.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥") for part in parts)


def piece_labels(pieces: list[bytes]) -> list[str]:
    """Each token's text from its bytes: UTF-8 where they decode; a piece of a character split across
    tokens shows its bytes in ‹›, with the character when the neighbouring pieces complete it:
    [b"\\xf0\\x9f\\x98", b"\\x80"] -> ["‹F0 9F 98 of 😀›", "‹80 of 😀›"]. Never U+FFFD, which would make
    every such piece read alike; every tokenizer's `token_strings` draws its byte pieces here."""
    joined, labels, start = b"".join(pieces), [], 0
    for piece in pieces:
        labels.append(_piece_text(joined, start, start + len(piece)))
        start += len(piece)
    return labels


def _character_at(data: bytes, i: int) -> tuple[int, int]:
    """The span [a, b) of the UTF-8 character covering byte i of `data` (one byte when it is not valid)."""
    a = i
    while a > 0 and i - a < 3 and 0x80 <= data[a] < 0xC0:
        a -= 1
    lead = data[a]  # the lead byte says how long its character is: never take a following space along
    length = 1 if lead < 0x80 else 2 if 0xC0 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else 4 if 0xF0 <= lead < 0xF8 else 0
    if length and a + length > i:
        try:
            data[a : a + length].decode("utf-8")
            return a, a + length
        except UnicodeDecodeError:
            pass
    return i, i + 1


def _piece_text(data: bytes, start: int, end: int) -> str:
    try:
        return data[start:end].decode("utf-8")
    except UnicodeDecodeError:
        pass
    out, i = [], start
    while i < end:
        a, b = _character_at(data, i)
        if a >= start and b <= end:
            try:
                out.append(data[a:b].decode("utf-8"))
            except UnicodeDecodeError:  # a byte of a character this text does not complete
                hexed = f"{data[a]:02X}"
                out[-1:] = [out[-1][:-1] + " " + hexed + "›"] if out and out[-1].endswith("›") and " of " not in out[-1] \
                    else out[-1:] + [f"‹{hexed}›"]
        else:  # this token holds only some bytes of the character
            inside = " ".join(f"{x:02X}" for x in data[max(a, start) : min(b, end)])
            whole = data[a:b]
            try:
                out.append(f"‹{inside} of {whole.decode('utf-8')}›")
            except UnicodeDecodeError:
                out.append(f"‹{inside}›")
        i = min(b, end)
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
