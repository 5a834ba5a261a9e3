"""The offline GPT-2 tokenizer: ids against published values and an independent BPE, the
bundled file's checksum, special-token spellings as plain text, and the decode round trip."""
from __future__ import annotations

import base64
import functools
import shutil

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from lpos import tokenizer
from lpos.tokenizer import END_OF_TEXT_ID, decode, encode, token_strings, visible

# The pre-tokeniser of OpenAI's original gpt-2/src/encoder.py (not tiktoken's rewrite of it).
ORIGINAL_GPT2_PATTERN = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


@functools.cache
def ranks() -> dict[bytes, int]:
    """token bytes -> id, read straight from the bundled file (one `base64 rank` per line)."""
    table = {}
    for line in tokenizer.RANKS_PATH.read_text().splitlines():
        token, rank = line.split()
        table[base64.b64decode(token)] = int(rank)
    return table


def reference_encode(text: str) -> list[int]:
    """Byte-level BPE written out slowly: split with GPT-2's regex, then repeatedly merge the
    adjacent pair whose merged bytes have the lowest rank."""
    table = ranks()
    ids = []
    for chunk in ORIGINAL_GPT2_PATTERN.findall(text):
        parts = [bytes([b]) for b in chunk.encode("utf-8")]
        while len(parts) > 1:
            candidates = [(table.get(parts[i] + parts[i + 1]), i) for i in range(len(parts) - 1)]
            candidates = [(rank, i) for rank, i in candidates if rank is not None]
            if not candidates:
                break
            _, i = min(candidates)
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        ids += [table[p] for p in parts]
    return ids


# ids published for tiktoken.get_encoding("gpt2") (and GPT-2's own encoder)
PUBLISHED = {
    "The cat sat": [464, 3797, 3332],
    "hello world": [31373, 995],
    "Hello, I'm a language model.": [15496, 11, 314, 1101, 257, 3303, 2746, 13],
}


@pytest.mark.parametrize("text", sorted(PUBLISHED))
def test_published_ids(text):
    assert encode(text) == PUBLISHED[text]


def test_separator_encoding_matches_published_ids():
    # Raschka, "Build a Large Language Model (From Scratch)", ch. 2, with allowed_special: the
    # separator is an id of its own between the two texts' ids, as lpos.corpus joins stories
    before, after = "Hello, do you like tea? ", " In the sunlit terracesof someunknownPlace."
    assert encode(before) + [END_OF_TEXT_ID] + encode(after) == [
        15496, 11, 466, 345, 588, 8887, 30, 220, 50256, 554, 262, 4252, 18250, 8812, 2114, 1659, 617, 34680, 27271, 13
    ]


@pytest.mark.parametrize(
    "text",
    [
        "The cat sat on the mat.",
        "emoji 😀👍🏽 and a family 👨‍👩‍👧",
        "日本語のテキストと中文文本",
        "مرحبا بالعالم",
        "Привет, мир! Ёжик",
        "  leading spaces, trailing spaces   ",
        "tabs\tand\nnew\n\nlines\r\n",
        "it's we're they've I'd you'll I'm",
        "numbers 1234567 and 3.14159",
    ],
)
def test_ids_equal_an_independent_bpe(text):
    ids = encode(text)
    assert ids == reference_encode(text)
    assert decode(ids) == text


def test_multibyte_characters_split_into_byte_tokens():
    ids = encode("😀")
    assert len(ids) == 2  # four UTF-8 bytes, no single token for the whole emoji
    assert b"".join(tokenizer.encoding().decode_single_token_bytes(i) for i in ids) == "😀".encode()
    assert token_strings(ids) == ["‹F0 9F 98 of 😀›", "‹80 of 😀›"]  # byte pieces, with their character
    assert token_strings(ids[:1]) == ["‹F0 9F 98›"]  # alone, the bytes only: never U+FFFD
    # two emoji whose first pieces agree: the same first token, different labels for the different second ones
    first, second = token_strings(encode("😀😎")), token_strings(encode("😎"))
    assert first[1] != second[1] and "😎" in second[1]


def test_end_of_text_spelling_is_ordinary_text():
    ids = encode("<|endoftext|>")
    assert END_OF_TEXT_ID not in ids
    assert ids == reference_encode("<|endoftext|>")
    assert len(ids) > 1
    assert decode(ids) == "<|endoftext|>"


def test_empty_text():
    assert encode("") == []
    assert token_strings([]) == []


def test_token_strings_and_visible():
    ids = encode("The cat sat")
    assert token_strings(ids) == ["The", " cat", " sat"]
    assert [visible(t) for t in token_strings(encode("a b\n\tc"))] == ["a", "␣b", "↵", "⇥", "c"]
    assert visible(" x\n\t") == "␣x↵⇥"


def test_bundled_file_checksum(tmp_path, monkeypatch):
    # lpos hashes the file itself, so a good copy in tiktoken's cache cannot stand in for a damaged file
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "cache"))
    good = tmp_path / "good.tiktoken"
    shutil.copy(tokenizer.RANKS_PATH, good)
    bad = tmp_path / "bad.tiktoken"
    data = bytearray(good.read_bytes())
    data[100] = ord("A") if data[100] != ord("A") else ord("B")  # one changed byte
    bad.write_bytes(bytes(data))

    tokenizer.encoding.cache_clear()
    try:
        monkeypatch.setattr(tokenizer, "RANKS_PATH", good)
        assert encode("The cat sat") == [464, 3797, 3332]
        tokenizer.encoding.cache_clear()
        monkeypatch.setattr(tokenizer, "RANKS_PATH", bad)
        with pytest.raises(ValueError, match="[Hh]ash mismatch"):
            encode("The cat sat")
    finally:
        tokenizer.encoding.cache_clear()  # the next caller rebuilds from the real file


def test_vocabulary_size():
    assert tokenizer.encoding().n_vocab == tokenizer.VOCAB_SIZE == 50257
    assert len(ranks()) == 50256  # every id but <|endoftext|>


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_round_trip(text):
    assert decode(encode(text)) == text


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=40))
def test_arbitrary_text_matches_the_independent_bpe(text):
    assert encode(text) == reference_encode(text)


def test_byte_labels_take_no_space_along_and_keep_their_separators():
    from lpos.tokenizer import token_strings, visible  # noqa: PLC0415

    shown = [visible(t) for t in token_strings(encode("猫 ヌ and 🐶"))]
    assert shown[:5] == ["‹E7 of 猫›", "‹8C of 猫›", "‹AB of 猫›", "␣‹E3 83 of ヌ›", "‹8C of ヌ›"]
    assert "‹F0 9F of 🐶›" in shown[-3:] or any(s.endswith("‹F0 9F of 🐶›") for s in shown)


def test_left_out_sentence_names_the_characters():
    from lpos.vocab.characters import CharacterTokenizer  # noqa: PLC0415

    tokenizer = CharacterTokenizer(list("abcdefghijklmnopqrstuvwxyz .\n"), source="meta.pkl")
    text = "café né ok"
    said = tokenizer.left_out_sentence(text)
    assert tokenizer.left_out_sentence("ok") == "" and said == "2 characters of the sidebar text are not in characters of meta.pkl (29) and were left out: “é”."
