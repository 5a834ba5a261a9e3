"""A character vocabulary: one token per character, as Karpathy's lecture and nanoGPT's
shakespeare_char build it (`chars = sorted(set(text))`, `stoi = {ch: i}`).

Two files give it: nanoGPT's `meta.pkl` (`{"vocab_size", "itos", "stoi"}`, a plain pickle), or
a text file (the training text, or the characters themselves) whose sorted distinct characters
are the vocabulary. A pickle can name any Python callable, so `meta.pkl` is read by an
unpickler that builds plain containers, strings and numbers only: any class, function or
reduce in the file is refused before it is looked up, so nothing in it runs.
"""
from __future__ import annotations

import io
import pickle
from pathlib import Path

from lpos.vocab.base import Tokenizer, TokenizerError, TokenizerFormat, check_vocab_size, read_capped

PLAIN = (dict, list, tuple, set, frozenset, str, bytes, int, float, bool, type(None))


class PlainUnpickler(pickle.Unpickler):
    """An unpickler that never looks up a global: classes, functions, reduce (which needs a
    callable from a global), extensions and persistent ids are all refused."""

    def find_class(self, module: str, name: str):
        raise TokenizerError(f"the pickle asks for {str(module)[:60]}.{str(name)[:60]}; lpos reads only plain "
                             "dictionaries, lists, strings and numbers from it, so it was not read")

    def persistent_load(self, pid):
        raise TokenizerError("the pickle refers to outside objects; lpos reads only plain data from it")


def load_plain_pickle(data: bytes, label: str):
    """The plain data in pickle bytes, or TokenizerError; nothing named in the file runs."""
    try:
        value = PlainUnpickler(io.BytesIO(data)).load()
    except TokenizerError as e:
        raise TokenizerError(f"{label}: {e}") from None
    except Exception as e:  # damaged: truncated, bad opcodes, a BUILD on a plain object, too deep
        raise TokenizerError(f"{label} could not be read ({type(e).__name__}): it is not a plain pickle") from None
    _check_plain(value, label)
    return value


def _check_plain(value, label: str) -> None:
    seen, stack = set(), [value]
    while stack:
        item = stack.pop()
        if type(item) not in PLAIN:
            raise TokenizerError(f"{label} holds a {type(item).__name__}; lpos reads only plain data from it")
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)


class CharacterTokenizer(Tokenizer):
    kind = "characters"

    def __init__(self, characters: list[str], *, source: str):
        if not characters or any(not isinstance(c, str) or len(c) != 1 for c in characters):
            raise TokenizerError(f"{source}'s tokens are not single characters, so it is not a character vocabulary")
        if len(set(characters)) != len(characters):
            raise TokenizerError(f"{source} gives one character two ids")
        self.characters = list(characters)
        self.stoi = {c: i for i, c in enumerate(self.characters)}
        self.vocab_size = check_vocab_size(len(self.characters), source)
        self.name = f"characters of {source} ({self.vocab_size:,})"
        self.source = source

    def _encode(self, text: str) -> list[int]:
        return [self.stoi[c] for c in text]

    def _unknown(self, text: str) -> list[str]:
        return [c for c in text if c not in self.stoi]

    def decode(self, ids: list[int]) -> str:
        return "".join(self.characters[i] for i in ids)

    def token_strings(self, ids: list[int]) -> list[str]:
        return [self.characters[i] for i in ids]

    def to_data(self) -> dict:
        return {"kind": self.kind, "characters": "".join(self.characters), "source": self.source}

    @classmethod
    def from_data(cls, data: dict) -> CharacterTokenizer:
        return cls(list(str(data["characters"])), source=str(data.get("source", "characters"))[:80])


def read_meta_pickle(path: Path) -> CharacterTokenizer:
    """nanoGPT's meta.pkl: itos (id -> character), checked against stoi and vocab_size."""
    meta = load_plain_pickle(read_capped(path, what="meta.pkl"), path.name)
    if not isinstance(meta, dict) or not isinstance(meta.get("itos"), dict):
        raise TokenizerError(f"{path.name} has no 'itos' dictionary, so it is not nanoGPT's meta.pkl")
    itos = meta["itos"]
    if any(type(k) is not int for k in itos) or set(itos) != set(range(len(itos))):
        raise TokenizerError(f"{path.name}'s 'itos' ids are not 0 to {len(itos) - 1}")
    characters = [itos[i] for i in range(len(itos))]
    stoi = meta.get("stoi")
    if stoi is not None and stoi != {c: i for i, c in enumerate(characters)}:
        raise TokenizerError(f"{path.name}'s 'stoi' and 'itos' disagree")
    if meta.get("vocab_size", len(characters)) != len(characters):
        raise TokenizerError(f"{path.name} says vocab_size {str(meta['vocab_size'])[:20]} but lists {len(characters)} characters")
    return CharacterTokenizer(characters, source=path.name)


def read_text_vocabulary(path: Path) -> CharacterTokenizer:
    """A text file's distinct characters, sorted: the vocabulary `sorted(set(text))` of its text."""
    try:
        text = read_capped(path, what="text file").decode("utf-8")
    except UnicodeDecodeError:
        raise TokenizerError(f"{path.name} is not UTF-8 text, so it cannot give a character vocabulary") from None
    if not text:
        raise TokenizerError(f"{path.name} is empty, so it gives no characters")
    return CharacterTokenizer(sorted(set(text)), source=path.name)


META_PICKLE = TokenizerFormat("nanoGPT's meta.pkl", (".pkl",),
                              lambda head, suffix: suffix == ".pkl" or head.startswith(b"\x80"),  # pickle protocol 2 on
                              read_meta_pickle)
TRAINING_TEXT = TokenizerFormat("the training text (.txt) of a character-level model", (".txt",),
                                lambda head, suffix: suffix in (".txt", ".text", ""), read_text_vocabulary)
