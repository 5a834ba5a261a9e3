"""lpos.analysis.embeddings: token rows, position rows and sums against the model's own tables."""
import math

import numpy as np
import pytest

from lpos.analysis.embeddings import (cosine, embedding_view, lookalike_tokens, never_seen, repeat_sentence,
                                      repeated_tokens, row_norms, rows_frame, token_counts)
from lpos.model import SINUSOID_SCALE
from lpos.positions import SCHEMES, sinusoidal_table
from lpos.tokenizer import encode


@pytest.mark.parametrize("scheme", SCHEMES)
def test_rows_are_lookups_of_the_model_tables(tiny_model, scheme):
    model = tiny_model(scheme)
    ids = encode("The dog saw the cat and the man")
    view = embedding_view(model, ids)
    wte = model.transformer.wte.weight.detach().numpy()
    C = model.config.n_embd
    expected_tokens = wte[ids]
    np.testing.assert_allclose(view.token_rows, expected_tokens, rtol=1e-6)
    if scheme == "learned":
        expected_positions = model.transformer.wpe.weight.detach().numpy()[: len(ids)]
    elif scheme == "sinusoidal":
        expected_positions = SINUSOID_SCALE * sinusoidal_table(len(ids), C).numpy()
    else:
        expected_positions = None
    if expected_positions is None:
        assert view.position_rows is None
        np.testing.assert_array_equal(view.summed_rows, view.token_rows)
    else:
        np.testing.assert_allclose(view.position_rows, expected_positions, rtol=1e-6)
        np.testing.assert_allclose(view.summed_rows, expected_tokens + expected_positions, rtol=1e-5, atol=1e-6)
    assert view.ids == ids
    assert view.tokens[3] == "␣the"  # whitespace made visible


def test_counts_are_looked_up_per_token(tiny_model):
    model = tiny_model("learned")
    ids = encode("The dog bit the man")
    view = embedding_view(model, ids, counts={ids[0]: 7, ids[1]: 12})
    assert view.counts == [7, 12, 0, 0, 0]
    assert never_seen(view) == [2, 3, 4]
    untrained = embedding_view(model, ids)
    assert untrained.counts == [None] * 5
    assert never_seen(untrained) == []


def test_token_counts_reads_string_keys_from_meta():
    assert token_counts({"token_counts": {"464": 3, "262": "10"}}) == {464: 3, 262: 10}
    assert token_counts({}) is None


@pytest.mark.parametrize("scheme, summed_differ", [("learned", True), ("sinusoidal", True), ("rope", False),
                                                   ("alibi", False), ("none", False)])
def test_same_word_two_positions(tiny_model, scheme, summed_differ):
    view = embedding_view(tiny_model(scheme), encode("The dog saw the cat and the man"))
    repeats = repeated_tokens(view)
    assert [(r.token, r.positions) for r in repeats] == [("␣the", (3, 6))]
    assert repeats[0].token_rows_max_difference == 0.0
    if summed_differ:
        assert repeats[0].summed_cosine < 0.999
        assert repeats[0].summed_cosine == pytest.approx(cosine(view.summed_rows[3], view.summed_rows[6]))
    else:
        assert repeats[0].summed_cosine == pytest.approx(1.0)


def test_each_repeated_id_is_reported_once_at_its_first_two_positions(tiny_model):
    view = embedding_view(tiny_model("learned"), [5, 6, 5, 6, 5, 7])
    assert [r.positions for r in repeated_tokens(view)] == [(0, 2), (1, 3)]


def test_default_sentence_has_lookalikes_not_repeats(tiny_model):
    view = embedding_view(tiny_model("learned"), encode("The dog bit the man"))
    assert repeated_tokens(view) == []
    assert lookalike_tokens(view) == [(0, 3)]  # "The" and "␣the": different ids
    assert view.ids[0] != view.ids[3]


@pytest.mark.parametrize("scheme, parts", [("learned", ["token", "position", "sum"]), ("rope", ["token", "sum"])])
def test_rows_frame_holds_every_number(tiny_model, scheme, parts):
    view = embedding_view(tiny_model(scheme), encode("A cat sat"))
    frame = rows_frame(view)
    T, C = view.token_rows.shape
    assert list(frame.columns[:4]) == ["position", "token", "id", "part"]
    assert frame.shape == (T * len(parts), 4 + C)
    assert list(frame["part"].unique()) == parts
    tokens = frame[frame.part == "token"]
    np.testing.assert_array_equal(tokens[[f"d{c}" for c in range(C)]].to_numpy(), view.token_rows)
    assert tokens["id"].tolist() == view.ids


def test_row_norms(tiny_model):
    view = embedding_view(tiny_model("sinusoidal"), encode("A cat sat"))
    frame = row_norms(view)
    np.testing.assert_allclose(frame["token_norm"], np.linalg.norm(view.token_rows, axis=1), rtol=1e-6)
    # a sinusoidal row holds C/2 (sin, cos) pairs, each of norm 1, scaled by 0.02 sqrt(2)
    C = view.token_rows.shape[1]
    np.testing.assert_allclose(frame["position_norm"].astype(float), 0.02 * math.sqrt(2) * math.sqrt(C / 2), rtol=1e-5)
    none = row_norms(embedding_view(tiny_model("none"), encode("A cat sat")))
    assert none["position_norm"].isna().all()


def test_cosine():
    assert cosine(np.array([1.0, 0.0]), np.array([0.0, 2.0])) == 0.0
    assert cosine(np.array([1.0, 1.0]), np.array([2.0, 2.0])) == pytest.approx(1.0)
    assert cosine(np.zeros(3), np.ones(3)) == 0.0


def test_learned_view_refuses_text_past_its_table(tiny_model):
    model = tiny_model("learned", block_size=16)
    with pytest.raises(ValueError, match="16 rows"):
        embedding_view(model, list(range(17)))
    assert embedding_view(tiny_model("sinusoidal", block_size=16), list(range(40))).summed_rows.shape == (40, 32)


def test_rope_step_and_repeat_sentences_say_how_small_and_how_often():
    from lpos.analysis.attention import rope_step_sentence  # noqa: PLC0415
    from lpos.analysis.embeddings import RepeatedToken, repeat_sentence  # noqa: PLC0415

    assert "0.01° for pair 15" in rope_step_sentence(15, 32) and "too little to see" in rope_step_sentence(15, 32)
    assert "too little" not in rope_step_sentence(0, 32)
    fields = dict(token="␣Anna", positions=(2, 8), token_rows_max_difference=0.0, occurrences=3)
    said = repeat_sentence(RepeatedToken(summed_cosine=0.958, **fields))
    assert said == ("“␣Anna” occurs three times; at its first two, positions 2 and 8: identical token rows (largest "
                    "difference 0), different summed rows: cosine similarity 0.9580. The position row is what tells "
                    "them apart.")
    assert repeat_sentence(RepeatedToken(summed_cosine=1.0, **fields)).endswith(
        "and nothing is added, so the summed rows are identical too (cosine 1.0000).")


def test_repeat_sentence_counts_a_token_three_times(tiny_model):
    model = tiny_model("learned")
    ids = encode(" the dog and the cat and the man")
    view = embedding_view(model, ids)
    the = [r for r in repeated_tokens(view) if r.token == "␣the"][0]
    assert the.occurrences == 3
    text = repeat_sentence(the)
    assert "occurs three times" in text and "twice" not in text and "at its first two, positions 0 and 3:" in text
    two = [r for r in repeated_tokens(view) if r.token == "␣and"][0]
    assert "occurs twice; at positions 2 and 5" in repeat_sentence(two)
