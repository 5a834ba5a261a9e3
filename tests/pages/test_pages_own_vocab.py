"""The Embeddings page's sentences about tokens hold for a model on its own vocabulary.

With no repeated token the page compares two tokens that read as the same word, and says how they
differ in the model's own tokens: a character model's "T" and "t" differ in case only, and no leading
space is in any of its tokens, where GPT-2 keeps case and the leading space. The sentence and the "Try ..."
suggestion are checked, in AppTest runs over a temporary LPOS_CHECKPOINT_DIR, against what the
model's own tokenizer does: a character vocabulary (the lecture's), and a small byte-level BPE of
its own (Hugging Face `tokenizers`, 300 tokens) under a random-weight lpos GPT.
"""
from __future__ import annotations

from collections import Counter

import pytest
import torch
from conftest import app_test
from test_courses import CHARS, TEXT, converted_character_model

from lpos.checkpoints import save
from lpos.cli import main
from lpos.figures.embeddings import REPEAT_EXAMPLE, lookalike_difference, repeat_example
from lpos.model import GPT, GPTConfig
from lpos.tokenizer import GPT2, load_tokenizer, visible

BPE_TEXT = (TEXT + "\nThe dog saw the cat and the man. The man bit the dog. Then the cat ran.\n") * 20


def own_bpe(path, vocab_size: int = 300):
    """A byte-level BPE of the learner's own, trained on BPE_TEXT and saved as tokenizer.json."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>"])
    tokenizer.train_from_iterator([BPE_TEXT], trainer=trainer)
    tokenizer.save(str(path))
    return load_tokenizer(path)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """A shared folder with the lecture's character model (chars.pt) and a random GPT on its own BPE (bpe.pt)."""
    folder = tmp_path_factory.mktemp("own_vocab_sentences")
    out = converted_character_model(folder)
    bpe = own_bpe(folder / "tokenizer.json")
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=bpe.vocab_size, block_size=64, n_layer=2, n_head=2, n_embd=32)).eval()
    save(model, {"tokenizer": bpe, "iter_num": 10}, out / "bpe.pt")
    return out, bpe


def lookalike_box(at) -> str:
    boxes = [box.value for box in at.info if "read as the same word" in box.value or "No token occurs" in box.value]
    assert len(boxes) == 1, [box.value for box in at.info]
    return boxes[0]


def test_the_difference_is_read_from_the_two_tokens():
    assert lookalike_difference("The", "␣the") == "in case and in the leading space"
    assert lookalike_difference("T", "t") == "in case"
    assert lookalike_difference("␣dog", "dog") == "in the leading space"


def test_the_example_is_counted_in_the_model_s_own_tokens(tmp_path):
    assert repeat_example(GPT2) == ("␣the", 2)
    (tmp_path / "input.txt").write_text(TEXT)
    characters = load_tokenizer(tmp_path / "input.txt")
    token, count = repeat_example(characters)
    kept = [c for c in REPEAT_EXAMPLE if c in CHARS]
    assert len(token) == 1 and count == Counter(kept)[token] == max(Counter(c for c in kept if c != " ").values())


def test_a_character_model_says_case_only(shared, monkeypatch):
    folder, _ = shared
    monkeypatch.setenv("LPOS_CHECKPOINT_DIR", str(folder))
    at = app_test(model="dir:chars.pt", scheme="learned", text="Ss")  # no repeat; "S" and "s" read alike
    assert not at.exception, [e.value for e in at.exception]
    chosen = at.session_state["selection"]
    assert chosen.model.tokenizer.kind == "characters" and chosen.ids == [CHARS.index("S"), CHARS.index("s")]
    said = lookalike_box(at)
    assert "“S”" in said and "“s”" in said and "differ in case, so" in said
    assert "GPT-2" not in said and "leading space" not in said and "␣the" not in said
    token, count = repeat_example(chosen.model.tokenizer)
    times = "twice" if count == 2 else f"{count} times"
    assert f"in the model's tokens, “{token}” occurs {times}." in said and "the same letter" in said
    assert f"tokenizer, {chosen.model.tokenizer.name}, gives them different ids" in said


def test_a_model_on_its_own_bpe_says_what_its_tokens_are(shared, monkeypatch):
    folder, bpe = shared
    monkeypatch.setenv("LPOS_CHECKPOINT_DIR", str(folder))
    at = app_test(model="dir:bpe.pt", scheme="learned", text="The the")
    assert not at.exception, [e.value for e in at.exception]
    chosen = at.session_state["selection"]
    assert chosen.model.tokenizer.kind == "huggingface" and chosen.ids == bpe.encode("The the")
    tokens = [visible(t) for t in bpe.token_strings(chosen.ids)]
    assert len(set(chosen.ids)) == len(chosen.ids) and "The" in tokens and "␣the" in tokens, tokens
    said = lookalike_box(at)
    assert "differ in case and in the leading space" in said and f"tokenizer, {bpe.name}, gives" in said
    assert "the same word" in said
    token, count = repeat_example(bpe)
    ids, _ = bpe.encode_known(REPEAT_EXAMPLE)
    assert Counter(ids)[bpe.encode_known(token.replace("␣", " "))[0][0]] == count > 1


def test_the_chips_key_names_the_newline_when_a_chip_shows_one(shared, monkeypatch):
    """A character model's newline is a chip of its own ("↵"); the chips' key says what it is."""
    from lpos.analysis.embeddings import embedding_view
    from lpos.checkpoints import load
    from lpos.figures.embeddings import chips_title

    folder, _ = shared
    model, meta = load(folder / "chars.pt")
    tokenizer = meta["tokenizer"]
    with_newline = embedding_view(model, tokenizer.encode("All:\nSpeak"), tokenizer=tokenizer)
    assert "↵" in with_newline.tokens
    assert chips_title(with_newline).startswith("10 tokens: text (␣ = space, ↵ = newline) and id in the model's own "
                                                "vocabulary")
    assert chips_title(with_newline).endswith(f"; vocabulary: {tokenizer.name}")
    without = embedding_view(model, tokenizer.encode("All: Speak"), tokenizer=tokenizer)
    assert "↵ = newline" not in chips_title(without)


def test_inspect_shows_the_model_s_own_tokens(shared, capsys):
    """`python -m lpos inspect` on a character model lists its characters, not GPT-2's tokens of the same ids."""
    folder, _ = shared
    assert main(["inspect", "--checkpoint", str(folder / "chars.pt"), "--json", "Speak!"]) == 0
    import json

    rows = json.loads(capsys.readouterr().out)
    assert [r["token"] for r in rows] == list("Speak!") and [r["id"] for r in rows] == [CHARS.index(c) for c in "Speak!"]


def test_the_model_card_keeps_its_section_on_other_models():
    """checkpoints/README.md is rewritten by `python -m lpos card`: its list of layouts and tokenizers comes
    from lpos.card, so a rewrite keeps it, and the file holds it now."""
    from lpos.card import OTHER_MODELS
    from conftest import ROOT

    assert OTHER_MODELS in (ROOT / "checkpoints" / "README.md").read_text()
    for layout in ("GPTModel", "model_state_dict", "gpt.py", "meta.pkl", "tokenizer.json", "minbpe", "SentencePiece"):
        assert layout in OTHER_MODELS


# Pieces of a character split across tokens: each shows its bytes and the character its neighbours complete,
# as GPT-2's chips do ("‹F0 of 😀›": one renderer, lpos.vocab.base.piece_labels), never U+FFFD, which would
# make every such piece read alike (Order blindness' top-5 table, the chips).
EMOJI_BYTES = ["‹F0 of 😀›", "‹9F of 😀›", "‹98 of 😀›", "‹80 of 😀›"]  # "😀" is F0 9F 98 80 in UTF-8


def test_byte_pieces_of_a_hugging_face_bpe_show_their_bytes(shared):
    _, bpe = shared
    ids = bpe.encode("😀")
    assert len(ids) == 4 and bpe.token_strings(ids) == EMOJI_BYTES
    assert bpe.token_strings(bpe.encode(" the")) == [" the"]  # whole tokens as they are


def test_byte_pieces_of_a_minbpe_model_show_their_bytes(tmp_path):
    (tmp_path / "bytes.model").write_text("minbpe v1\n\n0\n")  # no merges: every byte is a token
    tokenizer = load_tokenizer(tmp_path / "bytes.model")
    ids = tokenizer.encode("a😀é")
    assert ids == list("a😀é".encode())
    assert tokenizer.token_strings(ids) == ["a", *EMOJI_BYTES, "‹C3 of é›", "‹A9 of é›"]
    assert tokenizer.decode(ids) == "a😀é"


def test_byte_pieces_of_a_sentencepiece_model_show_their_bytes(tmp_path):
    import io

    sentencepiece = pytest.importorskip("sentencepiece")
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(TEXT.splitlines()), model_writer=model,
                                             vocab_size=300, model_type="bpe", byte_fallback=True,
                                             character_coverage=1.0, minloglevel=2)
    (tmp_path / "tok.model").write_bytes(model.getvalue())
    tokenizer = load_tokenizer(tmp_path / "tok.model")
    shown = tokenizer.token_strings(tokenizer.encode("😀"))
    assert shown[-4:] == EMOJI_BYTES and "\ufffd" not in "".join(shown)


def test_piece_labels_on_any_bytes():
    """Valid UTF-8 reads as itself; any other bytes never become U+FFFD, and the hex in ‹› gives them back
    (a label's " of 😀" names the character its neighbours complete); one label per piece."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from lpos.vocab.base import piece_labels

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.binary(max_size=6), max_size=5), st.text(max_size=6))
    def check(pieces, text):
        assert piece_labels([text.encode()]) == [text]
        shown = piece_labels(pieces)
        assert len(shown) == len(pieces)
        for data, label in zip(pieces, shown):
            if "\ufffd" not in data.decode("utf-8", errors="ignore"):
                assert "\ufffd" not in label
            rebuilt, parts = b"", label.replace("›", "‹").split("‹")
            for n, part in enumerate(parts):  # odd parts are hex runs, then " of " and the character
                rebuilt += bytes.fromhex(part.split(" of ")[0]) if n % 2 else part.encode()
            if not {"‹", "›"} & set(data.decode("utf-8", errors="ignore")):
                assert rebuilt == data

    check()


def test_rope_alibi_labels_the_model_s_own_tokens(shared, monkeypatch):
    """The RoPE & ALiBi page's attention map is labelled with the model's tokens, not GPT-2's of the same ids."""
    import json

    folder, bpe = shared
    monkeypatch.setenv("LPOS_CHECKPOINT_DIR", str(folder))
    at = app_test(page="pages/attention.py", model="dir:bpe.pt", scheme="learned", text="The dog saw the cat.")
    assert not at.exception, [e.value for e in at.exception]
    tokens = [visible(t) for t in bpe.token_strings(bpe.encode("The dog saw the cat."))]
    labels = [f"{p} {t}" for p, t in enumerate(tokens)]
    figures = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    axes = [trace.get("y") for f in figures for trace in f["data"] if trace.get("type") == "heatmap"]
    assert labels in axes, axes[:2]
