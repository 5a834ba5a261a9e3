"""AppTest runs of the two experiment pages, for every scheme, trained and untrained."""
from __future__ import annotations

import re

import pytest

from conftest import SCHEMES, app_test, seeded_model
from lpos import checkpoints
from lpos.analysis.scheme_views import positionless_scheme
from lpos.positions import REGISTRY

ORDER = "pages/shuffle.py"
EXTRAPOLATION = "pages/lengths.py"


def shipped(scheme: str):
    return pytest.param(scheme, marks=pytest.mark.skipif(scheme not in checkpoints.available(),
                                                         reason=f"checkpoints/{scheme}.pt is not trained yet"))


def assert_order_page(at, *, chosen: str) -> None:
    assert not at.exception
    table = at.table[0].value
    assert list(table.index) == [s + (" (sidebar)" if s == chosen else "") for s in SCHEMES]
    blind = dict(zip(SCHEMES, table["order-blind at layer 1"]))
    assert blind[positionless_scheme()] == "yes"  # no rows and nothing in attention: blind in layer 1
    assert all(blind[s] == "no" for s in SCHEMES if REGISTRY[s].adds_rows)  # a row per position: never blind
    assert "original: The dog bit the man.\nshuffled: The │ ␣man │ ␣bit │ ␣the │ ␣dog │ ." in at.code[0].value
    assert len(at.table[1].value) == len(at.table[2].value) == len(SCHEMES)  # top-1, then the folded top 5: a row per scheme
    assert any("causal mask" in m.value or "single layer" in m.value for m in at.markdown)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_order_page_untrained(scheme):
    at = app_test(page=ORDER, scheme=scheme, model="untrained")
    assert_order_page(at, chosen=scheme)
    assert all(label == "untrained (random init)" for label in at.table[0].value["model"])


@pytest.mark.parametrize("scheme", [shipped(s) for s in SCHEMES])
def test_order_page_shipped(scheme):
    at = app_test(page=ORDER, scheme=scheme, model=scheme)
    assert_order_page(at, chosen=scheme)
    assert at.table[0].value["model"].iloc[SCHEMES.index(scheme)] == f"{scheme} (trained, shipped)"


def test_shuffle_button_draws_new_permutations_and_the_seed_repeats_them():
    at = app_test(page=ORDER, scheme="none", model="untrained")
    swapped = at.table[0].value.copy()
    at.button(key="shuffle_button").click().run()
    assert at.radio(key="shuffle_source").value == "dog"
    first = at.code[0].value
    assert "original: The dog bit the man." in first and "shuffled: The │ ␣man │ ␣bit │ ␣the │ ␣dog │ ." not in first
    assert not at.table[0].value.equals(swapped)
    at.button(key="shuffle_button").click().run()
    assert at.number_input(key="shuffle_seed").value == 1
    assert at.code[0].value != first
    at.number_input(key="shuffle_seed").set_value(0).run()
    assert at.code[0].value == first
    assert not at.exception


@pytest.mark.parametrize("text, message", [("", "Type a sentence"), ("Hi", "at least three tokens"),
                                           (" the the the.", "same token")])
def test_order_page_explains_sentences_it_cannot_shuffle(text, message):
    at = app_test(page=ORDER, scheme="rope", model="untrained", text=text)
    at.radio(key="shuffle_source").set_value("sidebar").run()
    assert not at.exception
    assert any(message in info.value for info in at.info)
    assert not at.table


def test_order_page_cuts_long_text_for_every_scheme():
    at = app_test(page=ORDER, scheme="learned", model="untrained", text="one two three four five " * 40)
    at.radio(key="shuffle_source").set_value("sidebar").run()
    assert not at.exception
    assert any("first 64 of 201 tokens" in c.value for c in at.caption)
    assert at.table[0].value["order-blind at layer 1"].iloc[SCHEMES.index(positionless_scheme())] == "yes"


def with_upload(page: str, model, name: str = "tiny.pt"):
    """The page with `model` chosen as the session's upload, picked in the sidebar's model box."""
    at = app_test(scheme="none", model="untrained")
    at.session_state["uploads"] = {f"upload:{name}": (model, {})}
    at.run()
    at.selectbox(key="model").set_value(f"upload:{name}").run()
    at.switch_page(page).run()
    return at


@pytest.mark.parametrize("scheme", ["learned", "none"])
def test_order_page_with_an_uploaded_model_of_another_size(scheme):
    model = seeded_model(scheme, n_layer=1, n_head=2, n_embd=32, block_size=16)
    at = with_upload(ORDER, model)
    assert not at.exception
    blind = dict(zip(SCHEMES, at.table[0].value["order-blind at layer 1"]))
    assert blind[positionless_scheme()] == "yes" and all(blind[s] == "no" for s in SCHEMES if REGISTRY[s].adds_rows)
    assert at.table[0].value["model"].iloc[SCHEMES.index(scheme)] == "tiny.pt (your upload)"


@pytest.mark.parametrize("scheme", SCHEMES)
def test_extrapolation_page_untrained(scheme):
    at = app_test(page=EXTRAPOLATION, scheme=scheme, model="untrained")
    assert not at.exception
    reading = " ".join(m.value for m in at.markdown)
    assert "Mean loss over the first 128 predictions" in reading
    if scheme == "learned":
        assert "cannot be scored" in reading
    else:
        assert "The 895 predictions past the training length (128 tokens)" in reading
        assert "Reading past the training length changes their loss by" in reading


@pytest.mark.parametrize("scheme", [shipped(s) for s in SCHEMES])
def test_extrapolation_page_shipped(scheme):
    at = app_test(page=EXTRAPOLATION, scheme=scheme, model=scheme)
    assert not at.exception
    reading = " ".join(m.value for m in at.markdown)
    assert "At the training length (128 tokens)" in reading
    assert "Mean loss over the first 128 predictions" in reading
    assert any("Press, Smith & Lewis (2021)" in c.value for c in at.caption)


@pytest.mark.parametrize("text, message", [("", "Paste some text"), ("Hi", "Paste a longer text")])
def test_extrapolation_page_explains_texts_too_short_to_score(text, message):
    at = app_test(page=EXTRAPOLATION, scheme="alibi", model="untrained")
    at.radio(key="extrapolation_source").set_value("paste").run()
    at.text_area(key="extrapolation_text").input(text).run()
    assert not at.exception
    assert any(message in info.value for info in at.info)


def test_extrapolation_page_scores_pasted_text_with_an_uploaded_model():
    at = with_upload(EXTRAPOLATION, seeded_model("learned", n_layer=1, n_head=2, n_embd=32, block_size=16))
    at.radio(key="extrapolation_source").set_value("paste").run()
    at.text_area(key="extrapolation_text").input("The cat sat on the mat. " * 10).run()
    assert not at.exception
    reading = " ".join(m.value for m in at.markdown)
    assert "The learned table has 16 rows" in reading


@pytest.mark.parametrize("text, gaps", [("The cat sat on the mat. " * 4, 0),
                                        ("Quantum chromodynamics of zebrafish (Ångström) 🤖", 9)])
def test_extrapolation_caption_counts_the_gaps_it_draws(text, gaps):
    """The caption names gaps only when the curve has some (targets outside the shipped model's corpus
    vocabulary), with their number: 9 in the second text for `learned` (loss_along_text's NaNs)."""
    at = app_test(page=EXTRAPOLATION, scheme="learned", model="learned")
    at.radio(key="extrapolation_source").set_value("paste").run()
    at.text_area(key="extrapolation_text").input(text).run()
    assert not at.exception
    captions = " ".join(c.value for c in at.caption)
    assert ("gaps are tokens the model cannot predict" in captions) == bool(gaps), captions
    if gaps:  # one word, vocabulary, for the tokenizer's tokens; the softmax's are said as such
        assert f"The {gaps:,} gaps are tokens the model cannot predict: its softmax covers only the" in captions


def test_extrapolation_cards_plot_only_models_of_one_training_length():
    """learned-32 trained on 32-token windows: its card curve is left out of the 128-token plot and
    its reading, and the caption's table end is each plotted table model's own last row."""
    if "learned-32" not in checkpoints.available():
        pytest.skip("checkpoints/learned-32.pt is not installed")
    at = app_test(page=EXTRAPOLATION, scheme="learned", model="learned")
    assert not at.exception
    figure = at.get("plotly_chart")[0].proto.spec
    assert '"learned-32' not in figure  # no trace of it in the cards' figure
    captions = " ".join(c.value for c in at.caption)
    assert "`learned` has no row past 128." in captions
    assert "**learned-32** (trained on 32-token windows) is left out" in captions
    reading = " ".join(m.value for m in at.markdown)
    assert "(learned-32)" not in reading and "4.245" not in reading


def test_order_blindness_table_is_short_and_its_top_5_folded():
    from conftest import app_test  # noqa: PLC0415

    at = app_test(page="pages/shuffle.py", scheme="rope", model="untrained")
    assert not at.exception
    short, top5 = at.table[1].value, at.table[2].value
    assert list(short.columns) == ["next token, original order", "next token, shuffled", "same top-1",
                                   "distribution moved (total variation)"]
    assert all(" · " not in cell for cell in short["next token, original order"])  # one token a cell
    assert all(re.fullmatch(r"\d\.\d{3}", cell) for cell in short["distribution moved (total variation)"])
    assert all(cell.count(" · ") == 4 for cell in top5["top-5 next tokens, original order"])
    assert all(re.fullmatch(r"\d\.\d{3}", cell) for cell in top5["distribution moved (total variation)"])
    assert [e.label for e in at.expander if "top 5" in e.label] == ["The top 5 next tokens of each model, before and after"]


def test_order_blindness_tables_say_yes_or_no_never_true_or_false():
    """One wording for a learner: both tables say yes/no, neither True/False."""
    from conftest import app_test  # noqa: PLC0415

    at = app_test(page="pages/shuffle.py", timeout=300)
    assert not at.exception, at.exception
    tables = [t.value for t in at.table]
    shown = {column: set(map(str, frame[column])) for frame in tables for column in frame.columns
             if column in ("same top-1", "order-blind at layer 1")}
    assert set(shown) == {"same top-1", "order-blind at layer 1"}
    assert all(values <= {"yes", "no"} for values in shown.values()), shown
