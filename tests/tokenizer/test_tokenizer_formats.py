"""Each tokenizer format lpos reads, its `encode` compared with the original library's (`tokenizers`,
`sentencepiece`), with the `stoi` mapping (character vocabularies) or with minbpe's algorithm
written out here, on text with spaces, newlines, punctuation and a character the vocabulary
lacks (which the message names). Every tokenizer survives `torch.save` as plain data."""
from __future__ import annotations

import io
import pickle

import pytest
import torch

from lpos.tokenizer import GPT2, TokenizerError, UnknownCharacters, encode, from_data, load_tokenizer

TRAINING = ("First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak!\n"
            "You are all resolved rather to die than to famish?\n") * 4
TEXT = "Before we speak,\n  hear me: all resolved!"
LACKING = "é"


def round_trip(tokenizer):
    buffer = io.BytesIO()
    torch.save({"tokenizer": tokenizer.to_data()}, buffer)
    buffer.seek(0)
    return from_data(torch.load(buffer, weights_only=True)["tokenizer"])


def check_common(tokenizer, text=TEXT):
    ids = tokenizer.encode(text)
    assert all(0 <= i < tokenizer.vocab_size for i in ids)
    again = round_trip(tokenizer)
    assert again.encode(text) == ids and again.vocab_size == tokenizer.vocab_size and again.name == tokenizer.name
    return ids


def test_gpt2_is_the_default():
    assert GPT2.encode(TEXT) == encode(TEXT) and GPT2.vocab_size == 50257 and GPT2.is_gpt2
    assert GPT2.token_strings(GPT2.encode(" hear")) == [" hear"]


@pytest.mark.parametrize("source", ["meta.pkl", "input.txt"])
def test_character_vocabulary(tmp_path, source):
    chars = sorted(set(TRAINING))
    stoi = {ch: i for i, ch in enumerate(chars)}
    if source == "meta.pkl":
        with open(tmp_path / source, "wb") as f:
            pickle.dump({"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": stoi}, f)
    else:
        (tmp_path / source).write_text(TRAINING)
    tokenizer = load_tokenizer(tmp_path / source)
    assert tokenizer.kind == "characters" and tokenizer.vocab_size == len(chars)
    ids = check_common(tokenizer)
    assert ids == [stoi[ch] for ch in TEXT]
    assert tokenizer.decode(ids) == TEXT and tokenizer.token_strings(ids[:2]) == ["B", "e"]
    with pytest.raises(UnknownCharacters, match=f"1 character that .*lacks: '{LACKING}'"):
        tokenizer.encode(f"caf{LACKING} speak")
    assert tokenizer.encode_known(f"caf{LACKING}{LACKING} speak") == ([stoi[ch] for ch in "caf speak"], 2)


def hf_tokenizer(*, unknown: bool):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    if unknown:  # a BPE over the training text's characters: anything else is [UNK]
        tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
        tokenizer.decoder = decoders.Metaspace()
        trainer = trainers.BpeTrainer(vocab_size=120, special_tokens=["[UNK]"])
    else:  # byte level, as GPT-2's own: every byte is a token
        tokenizer = Tokenizer(models.BPE())
        tokenizer.normalizer = normalizers.NFC()
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator([TRAINING], trainer=trainer)
    return tokenizer


@pytest.mark.parametrize("unknown", [False, True])
def test_hugging_face_tokenizer_json(tmp_path, unknown):
    original = hf_tokenizer(unknown=unknown)
    original.save(str(tmp_path / "tokenizer.json"))
    tokenizer = load_tokenizer(tmp_path)  # a folder holding tokenizer.json
    ids = check_common(tokenizer)
    assert ids == original.encode(TEXT, add_special_tokens=False).ids
    assert tokenizer.vocab_size == original.get_vocab_size()
    text = f"caf{LACKING} speak"
    if unknown:
        with pytest.raises(UnknownCharacters, match=f"lacks: '{LACKING}'"):
            tokenizer.encode(text)
        ids, dropped = tokenizer.encode_known(text)
        assert dropped == 1 and ids == original.encode("caf speak", add_special_tokens=False).ids
    else:  # byte level: nothing is unknown, and the chips spell the text back
        assert "".join(tokenizer.token_strings(ids)) == TEXT
        assert tokenizer.encode(text) == original.encode(text, add_special_tokens=False).ids
        assert tokenizer.decode(tokenizer.encode(text)) == text


def test_sentencepiece_model(tmp_path):
    sentencepiece = pytest.importorskip("sentencepiece")
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(TRAINING.splitlines()), model_writer=model,
                                             vocab_size=60, character_coverage=1.0, model_type="bpe",
                                             minloglevel=2)
    (tmp_path / "tok.model").write_bytes(model.getvalue())
    original = sentencepiece.SentencePieceProcessor(model_proto=model.getvalue())
    tokenizer = load_tokenizer(tmp_path / "tok.model")
    assert tokenizer.kind == "sentencepiece" and tokenizer.vocab_size == 60
    ids = check_common(tokenizer)
    assert ids == original.encode(TEXT)
    # SentencePiece's normaliser folds the newline and the double space; "▁" shows as the space it is
    assert "".join(tokenizer.token_strings(ids)) == " " + original.decode(ids) == " Before we speak, hear me: all resolved!"
    with pytest.raises(UnknownCharacters, match=f"lacks: '{LACKING}'"):
        tokenizer.encode(f"caf{LACKING} speak")
    assert tokenizer.encode_known(f"caf{LACKING} speak") == (original.encode("caf speak"), 1)


def minbpe_train(text: str, merges: int, pattern) -> list[tuple[int, int]]:
    """minbpe's training: count adjacent pairs within chunks, merge the most frequent, repeat."""
    chunks = [list(c.encode()) for c in (pattern.findall(text) if pattern else [text])]
    found = []
    for i in range(merges):
        counts = {}
        for ids in chunks:
            for pair in zip(ids, ids[1:]):
                counts[pair] = counts.get(pair, 0) + 1
        if not counts:
            break
        pair = max(counts, key=counts.get)
        found.append(pair)
        chunks = [minbpe_merge(ids, pair, 256 + i) for ids in chunks]
    return found


def minbpe_merge(ids, pair, new):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def minbpe_encode(text: str, merges: list, pattern) -> list[int]:
    """minbpe's encode_ordinary: per chunk, merge the lowest-ranked pair present until none is."""
    ranks = {pair: 256 + i for i, pair in enumerate(merges)}
    ids_out = []
    for chunk in (pattern.findall(text) if pattern else [text]):
        ids = list(chunk.encode())
        while len(ids) >= 2:
            pair = min(zip(ids, ids[1:]), key=lambda p: ranks.get(p, float("inf")))
            if pair not in ranks:
                break
            ids = minbpe_merge(ids, pair, ranks[pair])
        ids_out += ids
    return ids_out


@pytest.mark.parametrize("pattern", ["", r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""])
def test_minbpe_model(tmp_path, pattern):
    import regex

    compiled = regex.compile(pattern) if pattern else None
    merges = minbpe_train(TRAINING, 40, compiled)
    lines = ["minbpe v1", pattern, "1", "<|endoftext|> 296", *(f"{a} {b}" for a, b in merges)]
    (tmp_path / "mine.model").write_text("\n".join(lines) + "\n")
    tokenizer = load_tokenizer(tmp_path / "mine.model")
    assert tokenizer.kind == "minbpe" and tokenizer.vocab_size == 297
    text = TEXT + f" caf{LACKING} <|endoftext|>"  # bytes: nothing is unknown; the special spelling is text
    ids = check_common(tokenizer, text)
    assert ids == minbpe_encode(text, merges, compiled)
    assert len(ids) < len(text.encode())  # the merges did something
    assert tokenizer.decode(ids) == text and "".join(tokenizer.token_strings(ids)).startswith("Before")


def test_unknown_file_kinds(tmp_path):
    (tmp_path / "weights.npz").write_bytes(b"PK\x03\x04")
    with pytest.raises(TokenizerError, match="is not a tokenizer lpos reads: give nanoGPT's meta.pkl"):
        load_tokenizer(tmp_path / "weights.npz")
    with pytest.raises(TokenizerError, match="no tokenizer file 'nowhere.json'"):
        load_tokenizer(tmp_path / "nowhere.json")
