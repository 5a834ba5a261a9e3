"""GPT-2 byte-pair encoding, offline.

The merge ranks ship with the package (`lpos/assets/r50k_base.tiktoken`, see
`lpos/assets/README.md`), are loaded with tiktoken's own loader and checked against
tiktoken's expected sha256, so ids equal `tiktoken.get_encoding("gpt2")` with no network.
Text that spells a special token (``<|endoftext|>``) is encoded as ordinary text: a learner's
sentence is data, never a control sequence.

A model may speak another tokenizer: `load_tokenizer(path)` reads nanoGPT's meta.pkl, a Hugging
Face tokenizer.json (or a folder holding one), a SentencePiece or minbpe `.model`, or a text file
whose characters are the vocabulary (lpos.vocab, one module per format); `GPT2` is the default
`Tokenizer`, and `from_data` rebuilds any of them from what an lpos file stores.
"""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import tiktoken
from tiktoken.load import load_tiktoken_bpe

from lpos import vocab
from lpos.vocab.base import MAX_TOKENIZER_BYTES, Tokenizer, TokenizerError, UnknownCharacters, piece_labels, visible
from lpos.vocab.characters import CharacterTokenizer
from lpos.vocab.huggingface import TOKENIZER_JSON, HuggingFaceTokenizer
from lpos.vocab.minbpe import MinbpeTokenizer
from lpos.vocab.sentencepiece import SentencePieceTokenizer

RANKS_PATH = Path(__file__).parent / "assets" / "r50k_base.tiktoken"
RANKS_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
# the pre-tokeniser regex of GPT-2 (tiktoken_ext.openai_public.r50k_pat_str)
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
END_OF_TEXT = "<|endoftext|>"
END_OF_TEXT_ID = 50256
VOCAB_SIZE = 50257


@functools.cache
def encoding() -> tiktoken.Encoding:
    """The GPT-2 encoding built from the bundled ranks (loaded once per process)."""
    # tiktoken's loader checks the hash too, but it may read a cached copy; check the file itself
    if hashlib.sha256(RANKS_PATH.read_bytes()).hexdigest() != RANKS_SHA256:
        raise ValueError(f"hash mismatch: {RANKS_PATH} is damaged; reinstall lpos")
    ranks = load_tiktoken_bpe(str(RANKS_PATH), expected_hash=RANKS_SHA256)
    return tiktoken.Encoding(
        name="gpt2",
        pat_str=GPT2_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={END_OF_TEXT: END_OF_TEXT_ID},
        explicit_n_vocab=VOCAB_SIZE,
    )


def encode(text: str) -> list[int]:
    """Token ids of `text`; special-token spellings are plain text; "" gives []."""
    return encoding().encode_ordinary(text)


def token_strings(ids: list[int]) -> list[str]:
    """The text of each token. A token holding part of a multi-byte character (GPT-2 splits most
    emoji and CJK characters into byte pieces) shows those bytes, and the character they belong to
    when the neighbouring tokens complete it: "‹F0 9F of 😀›" (lpos.vocab.base.piece_labels)."""
    return piece_labels([encoding().decode_single_token_bytes(i) for i in ids])


def decode(ids: list[int]) -> str:
    return encoding().decode(ids)


class GPT2Tokenizer(Tokenizer):
    """GPT-2's BPE (the module's functions) as a Tokenizer: every byte is a token, so no text is unknown."""

    kind = "gpt2"
    name = "GPT-2"
    vocab_size = VOCAB_SIZE

    def _encode(self, text: str) -> list[int]:
        return encode(text)

    def decode(self, ids: list[int]) -> str:
        return decode(list(ids))

    def token_strings(self, ids: list[int]) -> list[str]:
        return token_strings(list(ids))

    def to_data(self) -> dict:
        return {"kind": self.kind}


GPT2 = GPT2Tokenizer()
STORED_KINDS = {"gpt2": lambda data: GPT2, **{kind.kind: kind.from_data for kind in (
    CharacterTokenizer, MinbpeTokenizer, HuggingFaceTokenizer, SentencePieceTokenizer)}}  # Tokenizer.to_data's "kind"
TOKENIZER_FILES = vocab.DESCRIBED  # "nanoGPT's meta.pkl, a Hugging Face tokenizer.json, …": the formats lpos.vocab declares


def load_tokenizer(path: str | Path) -> Tokenizer:
    """The tokenizer in a file (or a folder holding tokenizer.json), recognised by its name and
    first bytes; TokenizerError with one sentence for anything else."""
    path = Path(path)
    if path.is_dir():
        if not (path / TOKENIZER_JSON).is_file():
            raise TokenizerError(f"{path.name} holds no {TOKENIZER_JSON}")
        path = path / TOKENIZER_JSON
    if not path.is_file():
        raise TokenizerError(f"no tokenizer file {path.name!r}: give {TOKENIZER_FILES}")
    if path.stat().st_size > MAX_TOKENIZER_BYTES:
        raise TokenizerError(f"{path.name} is over the {MAX_TOKENIZER_BYTES // 2**20} MB limit for a tokenizer file")
    with path.open("rb") as file:
        head = file.read(16)
    suffix = path.suffix.lower()
    for found in vocab.FORMATS:
        if found.sniff(head, suffix):
            return found.read(path)
    raise TokenizerError(f"{path.name} is not a tokenizer lpos reads: give {TOKENIZER_FILES}")


def from_data(data) -> Tokenizer:
    """The tokenizer an lpos file stores (`Tokenizer.to_data`); TokenizerError if it is damaged."""
    if not isinstance(data, dict) or data.get("kind") not in STORED_KINDS:
        kind = data.get("kind") if isinstance(data, dict) else type(data).__name__
        raise TokenizerError(f"the stored tokenizer is of an unknown kind {str(kind)[:40]!r}")
    try:
        return STORED_KINDS[data["kind"]](data)
    except TokenizerError:
        raise
    except (KeyError, TypeError, ValueError) as e:
        raise TokenizerError(f"the stored tokenizer is damaged ({type(e).__name__})") from None


__all__ = ["END_OF_TEXT", "END_OF_TEXT_ID", "GPT2", "TOKENIZER_FILES", "VOCAB_SIZE", "Tokenizer", "TokenizerError",
           "UnknownCharacters", "decode", "encode", "from_data", "load_tokenizer", "token_strings", "visible"]
