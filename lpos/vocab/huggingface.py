"""A Hugging Face `tokenizer.json`, read and run by the `tokenizers` library (Rust: a JSON
file is data to it, nothing in it runs).

Special tokens are never added (no BOS/EOS the user did not type). A character the vocabulary
lacks becomes the unknown token in `tokenizers`; lpos names it instead (UnknownCharacters), from
the unknown tokens' character offsets. Byte-level vocabularies (GPT-2's style) know every byte.
"""
from __future__ import annotations

import functools
import json
import re
from pathlib import Path

from lpos.vocab.base import Tokenizer, TokenizerError, TokenizerFormat, check_vocab_size, piece_labels, read_capped

TOKENIZER_JSON = "tokenizer.json"
BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")  # a byte-fallback token (Llama's, SentencePiece-style BPE)


@functools.cache
def byte_level_alphabet() -> dict[str, int]:
    """The byte-level BPE's character for each byte (GPT-2's bytes_to_unicode), reversed: printable
    bytes stand for themselves, the others are shifted to 256 and up."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


def token_bytes(token: str) -> bytes | None:
    """The bytes a vocabulary entry stands for, when that can be read from its spelling: a byte-level
    entry ("Ġthe", "âĢ") or a byte-fallback one ("<0xE2>"); None otherwise."""
    byte = BYTE_TOKEN.fullmatch(token)
    if byte:
        return bytes([int(byte.group(1), 16)])
    alphabet = byte_level_alphabet()
    return bytes(alphabet[c] for c in token) if token and all(c in alphabet for c in token) else None


class HuggingFaceTokenizer(Tokenizer):
    kind = "huggingface"

    def __init__(self, text: str, *, source: str):
        from tokenizers import Tokenizer as RustTokenizer

        try:
            json.loads(text)  # a clear message for broken JSON before the library's own
            self.tokenizer = RustTokenizer.from_str(text)
        except Exception as e:
            raise TokenizerError(f"{source} could not be read as a Hugging Face tokenizer "
                                 f"({type(e).__name__}: {str(e)[:120]})") from None
        self.text, self.source = text, source
        vocab = self.tokenizer.get_vocab(with_added_tokens=True)
        self.vocab_size = check_vocab_size(max(vocab.values(), default=-1) + 1, source)
        model = json.loads(text).get("model") or {}
        unk = model.get("unk_token") if isinstance(model, dict) else None
        self.unk_id = vocab.get(unk) if isinstance(unk, str) else None
        self.name = f"{source} ({self.vocab_size:,} tokens)"

    def _run(self, text: str):
        return self.tokenizer.encode(text, add_special_tokens=False)

    def _encode(self, text: str) -> list[int]:
        return list(self._run(text).ids)

    def _unknown(self, text: str) -> list[str]:
        if self.unk_id is None:
            return []
        encoding = self._run(text)
        return [c for i, (start, end) in zip(encoding.ids, encoding.offsets) if i == self.unk_id for c in text[start:end]]

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def token_strings(self, ids: list[int]) -> list[str]:
        return piece_labels([self._piece(i) for i in ids])

    def _piece(self, i: int) -> bytes:
        """Token i's bytes: its text, or for a piece of a character (decoded as U+FFFD) the bytes it stands for."""
        text = self.tokenizer.decode([i], skip_special_tokens=False) or (self.tokenizer.id_to_token(i) or "")
        data = token_bytes(self.tokenizer.id_to_token(i) or "") if "\ufffd" in text else None
        return data if data is not None else text.encode()

    def to_data(self) -> dict:
        return {"kind": self.kind, "json": self.text, "source": self.source}

    @classmethod
    def from_data(cls, data: dict) -> HuggingFaceTokenizer:
        return cls(str(data["json"]), source=str(data.get("source", TOKENIZER_JSON))[:80])


def read_tokenizer_json(path: Path) -> HuggingFaceTokenizer:
    try:
        text = read_capped(path, what="tokenizer.json").decode("utf-8")
    except UnicodeDecodeError:
        raise TokenizerError(f"{path.name} is not UTF-8 text, so it is not a tokenizer.json") from None
    return HuggingFaceTokenizer(text, source=path.name)


FORMAT = TokenizerFormat(f"a Hugging Face {TOKENIZER_JSON}", (TOKENIZER_JSON,), lambda head, suffix: suffix == ".json",
                         read_tokenizer_json)
