"""Property-based tests: any text a user can type, any length up to 5,000 tokens, every scheme and
every model, through tokenizer -> model -> analysis -> figure builders.

What a user can produce never raises anything but a ValueError with a short message (the pages
turn those into st.warning); within the limits the app enforces (a learned table's rows,
MAX_TOKENS) the views are computed and hold their invariants, and every string a figure carries
(and the token chips' HTML) has the user's text escaped.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from conftest import SCHEMES, seeded_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_figures_embeddings import read_chips, unsafe_markup
from test_hostile import raw_markup

from lpos import checkpoints
from lpos.analysis.attention import alibi_effect, attention_maps
from lpos.analysis.embeddings import (embedding_view, lookalike_tokens, never_seen, repeated_tokens, row_norms,
                                      rows_frame, token_counts)
from lpos.analysis.lengths import curve_reading, loss_along_text, training_length
from lpos.analysis.shuffle import can_shuffle, predictions_table, shuffle_experiment, shuffle_table
from lpos.analysis.similarity import nearest_tokens, pca, similarity_map
from lpos.figures.attention import matrix_panels
from lpos.figures.embeddings import CHIP_LIMIT, chip_text, embedding_heatmaps, token_chips_html
from lpos.figures.lengths import token_loss_figure
from lpos.figures.shuffle import attention_bars, change_figure
from lpos.figures.similarity import pca_figure, similarity_heatmaps
from lpos.tokenizer import decode, encode
from lpos.ui.state import MAX_CHARS, MAX_TOKENS

FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Text a learner might type or paste: any Unicode (hypothesis leaves out lone surrogates, which a
# browser cannot send either), weighted towards the characters that stress a BPE tokenizer.
TRICKY = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "<|endoftext|>", "&amp;", " ", "\n", "\t",
          "é", "😀", "👩‍👩‍👧", "\u200b", "\u202e", "ﷺ", "𝔘𝔫𝔦", "'s", "  ", "%{x}", "<br>", "$x$", "**"]
texts = st.lists(st.one_of(st.text(max_size=40), st.sampled_from(TRICKY)), max_size=12).map("".join)


@st.composite
def long_texts(draw, max_tokens: int = 5000):
    """Text of up to `max_tokens` tokens: a fragment repeated, then cut to a drawn token count."""
    fragment = draw(texts.filter(lambda t: len(encode(t)) > 0))
    target = draw(st.integers(0, max_tokens))
    ids = encode(fragment * (target // len(encode(fragment)) + 1))[:target]
    text = decode(ids)
    return text[:MAX_CHARS]  # the sidebar's text box holds at most MAX_CHARS characters


@functools.cache
def tiny(scheme: str):
    return seeded_model(scheme, n_layer=2, n_head=4, n_embd=32, block_size=64), {}


@functools.cache
def shipped(name: str):
    return checkpoints.load(name)


def usable(model, ids: list[int]) -> list[int]:
    """What lpos.ui.guards.usable_ids lets through: a learned table's rows, then MAX_TOKENS."""
    limit = model.config.block_size if model.config.position == "learned" else MAX_TOKENS
    return ids[:limit]


def user_error(call, *args, **kwargs):
    """Run one step; a ValueError is a message for the user (short, one line), anything else fails."""
    try:
        return call(*args, **kwargs)
    except ValueError as e:
        message = str(e)
        assert message and len(message) < 400 and "Traceback" not in message, message
        return None


def check_figure(fig) -> None:
    assert fig.layout.title.text
    assert raw_markup(fig.to_plotly_json()) == []


def every_view(model, meta: dict, text: str) -> None:
    """Tokenizer -> model -> analysis -> figures, as the pages call them, with their invariants."""
    ids = encode(text)
    assert decode(ids) == text
    config = model.config
    if config.position == "learned" and len(ids) > config.block_size:
        with pytest.raises(ValueError, match=f"the learned position table has {config.block_size} rows"):
            embedding_view(model, ids)
    ids = usable(model, ids)
    if not ids:
        return  # the pages ask for a sentence instead
    T, C = len(ids), config.n_embd
    view = embedding_view(model, ids, counts=token_counts(meta))
    assert view.token_rows.shape == view.summed_rows.shape == (T, C) and len(view.tokens) == T
    if view.position_rows is not None:
        np.testing.assert_allclose(view.token_rows + view.position_rows, view.summed_rows, rtol=1e-6, atol=1e-6)
    for repeat in repeated_tokens(view):
        assert repeat.token_rows_max_difference == 0.0
    assert all(0 <= i < j < T for i, j in lookalike_tokens(view))
    assert never_seen(view) == [p for p, i in enumerate(ids) if meta.get("token_counts") is not None
                                and int(meta["token_counts"].get(i, meta["token_counts"].get(str(i), 0))) == 0]
    assert len(rows_frame(view)) == T * (3 if view.position_rows is not None else 2)
    assert len(row_norms(view)) == T
    chips = read_chips(token_chips_html(view))
    assert unsafe_markup(chips) == [] and chips.title.split(":")[0].split(" (")[0] == f"{T} token{'s' if T != 1 else ''}"
    assert [c.text for c in chips.chips] == [chip_text(t) for t in view.tokens[:CHIP_LIMIT]]  # the text, as typed
    check_figure(embedding_heatmaps(view, scheme=config.position))

    weights = attention_maps(model, ids, layer=config.n_layer - 1)
    assert weights.shape == (config.n_head, T, T)
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-4)
    check_figure(matrix_panels([("head 0", weights[0])], tokens=view.tokens, title="weights", value_name="weight",
                               zmin=0, zmax=1))
    effect = alibi_effect(model, ids, layer=0)
    check_figure(matrix_panels([("bias", effect.bias[0]), ("with", effect.with_bias[0])], tokens=view.tokens,
                               title="alibi", value_name="bias", zmin=float(effect.bias.min()), zmax=0))

    check_figure(similarity_heatmaps([similarity_map(view.summed_rows, title="summed rows")], axis_title="token",
                                     tokens=view.tokens))
    projection = pca(view.summed_rows, components=3)
    for dimensions in (2, 3):
        figure = user_error(pca_figure, projection, dimensions=dimensions, title="summed rows")
        assert (figure is None) == (projection.coordinates.shape[1] < dimensions)
        if figure is not None:
            check_figure(figure)
    neighbours = nearest_tokens(model, ids[-1], k=5, counts=token_counts(meta))
    assert len(neighbours) == 5

    if T < 2:
        assert user_error(loss_along_text, model, ids) is None
        assert user_error(shuffle_experiment, model, ids) is None
        return
    curve = loss_along_text(model, ids)
    assert len(curve.losses) == T - 1
    assert curve_reading(curve, train_length=training_length(meta, model))
    check_figure(token_loss_figure(curve, tokens=view.tokens[1:], train_length=training_length(meta, model),
                                   label="<b>model</b>"))
    result = shuffle_experiment(model, ids)
    assert sorted(result.shuffled) == sorted(ids) and result.shuffled[-1] == ids[-1]
    if config.position == "none" and can_shuffle(ids):
        assert result.order_blind  # the teaching truth holds for any sentence
    check_figure(change_figure(shuffle_table([result])))
    check_figure(attention_bars(result, head=config.n_head - 1))
    assert len(predictions_table([result])) == 1


@settings(FUZZ, max_examples=5)
@given(scheme=st.sampled_from(SCHEMES), text=texts)
def test_any_text_through_every_view(scheme, text):
    every_view(*tiny(scheme), text)


@pytest.mark.slow
@settings(FUZZ, max_examples=30)
@given(scheme=st.sampled_from(SCHEMES), text=st.one_of(texts, long_texts()))
def test_any_text_any_length_every_scheme(scheme, text):
    every_view(*tiny(scheme), text)


@pytest.mark.slow
@pytest.mark.parametrize("name", SCHEMES)
@settings(FUZZ, max_examples=5)
@given(text=st.one_of(texts, long_texts(max_tokens=1500)))
def test_shipped_checkpoints_any_text(name, text):
    if name not in checkpoints.available():
        pytest.skip(f"checkpoints/{name}.pt is not trained yet")
    every_view(*shipped(name), text)


@settings(FUZZ, max_examples=200)
@given(text=st.text(max_size=2000))
def test_tokenizer_round_trip_and_limits(text):
    ids = encode(text)
    assert decode(ids) == text
    assert all(0 <= i < 50257 for i in ids)
    assert len(ids) <= len(text.encode("utf-8"))


def test_every_length_limit_is_a_value_error_with_advice():
    model, _ = tiny("learned")
    ids = encode("the " * 100)[:65]
    with pytest.raises(ValueError, match="Shorten it to 64 tokens, or use a scheme that extends to any length"):
        embedding_view(model, ids)
    with pytest.raises(ValueError, match="at least two tokens"):
        loss_along_text(model, ids[:1])
    torch.testing.assert_close(torch.tensor(usable(model, ids)), torch.tensor(ids[:64]))


# tokenizer files: any bytes under any tokenizer name are a TokenizerError or a tokenizer
@settings(FUZZ, max_examples=40)
@given(name=st.sampled_from(["meta.pkl", "tokenizer.json", "tok.model", "input.txt"]),
       data=st.one_of(st.binary(max_size=300), st.binary(max_size=200).map(lambda b: b"minbpe v1\n" + b),
                      st.binary(max_size=200).map(lambda b: b"\x80\x04" + b)))
def test_any_bytes_as_a_tokenizer_file(tmp_path_factory, name, data):
    from lpos.tokenizer import Tokenizer, TokenizerError, load_tokenizer

    path = tmp_path_factory.mktemp("tok") / name
    path.write_bytes(data)
    try:
        tokenizer = load_tokenizer(path)
    except TokenizerError as e:
        assert str(e) and "\n" not in str(e)
        return
    assert isinstance(tokenizer, Tokenizer) and tokenizer.vocab_size >= 1


@settings(FUZZ, max_examples=40)
@given(text=texts)
def test_any_text_through_a_character_vocabulary(text):
    from lpos.vocab.characters import CharacterTokenizer

    tokenizer = CharacterTokenizer(sorted(set("The dog bit the man.\n ")), source="input.txt")
    ids, dropped = tokenizer.encode_known(text)
    assert tokenizer.decode(ids) == "".join(c for c in text if c in tokenizer.stoi)
    assert dropped == len(text) - len(ids)
