"""GPT-2 byte-pair encoding, offline.

The merge ranks ship with the package (`lpos/assets/r50k_base.tiktoken`, see
`lpos/assets/README.md`), are loaded with tiktoken's own loader and checked against
tiktoken's expected sha256, so ids equal `tiktoken.get_encoding("gpt2")` with no network.
Text that spells a special token (``<|endoftext|>``) is encoded as ordinary text: a learner's
sentence is data, never a control sequence.
"""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import tiktoken
from tiktoken.load import load_tiktoken_bpe

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
    """The text of each token; bytes that are part of a multi-byte character show as U+FFFD."""
    enc = encoding()
    return [enc.decode_single_token_bytes(i).decode("utf-8", errors="replace") for i in ids]


def visible(token: str) -> str:
    """Token text with whitespace made visible, for chips and axis labels."""
    return token.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥")


def decode(ids: list[int]) -> str:
    return encoding().decode(ids)
