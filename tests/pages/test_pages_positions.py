"""AppTest runs of the Sinusoids, Similarity and RoPE & ALiBi pages: every scheme, trained and
untrained, and the inputs a learner can throw at them."""
import base64
import json
import re

import numpy as np
import pytest

from conftest import SCHEMES, app_test
from test_lesson import loaded_model
from lpos import checkpoints
from lpos.pages import PAGES as REGISTERED
from lpos.pages import page_named
from lpos.positions import REGISTRY, alibi_slopes

PAGES = [page.file for page in REGISTERED if page.group == "What each scheme is"]
# the figure each page must show, per scheme
MAIN_FIGURES = {
    page_named("sinusoids").file: {s: {"sin_table", "sin_wavelengths", "sin_offset_dot"} for s in SCHEMES}
    | {"sinusoidal": {"sin_table", "sin_offset_dot", "sin_model_table"}},
    # by what the scheme does: rows give the maps and the PCA, a rotation its kernel, anything else the tokens alone
    page_named("similarity").file: {s: {"sim_positions", "sim_band", "sim_tokens", "sim_pca3"} if REGISTRY[s].adds_rows else
                            {"sim_positions", "sim_kernel", "sim_tokens"} if REGISTRY[s].shows("rotation") else
                            {"sim_tokens"} for s in SCHEMES} | {"learned": {"sim_positions", "sim_band", "sim_tokens",
                                                                            "sim_pca2", "sim_pca3"}},
    page_named("attention").file: {s: {"ra_attention", "ra_slopes", "ra_flat"} for s in SCHEMES}
    | {"alibi": {"ra_attention", "ra_slopes", "ra_bias", "ra_tilt", "ra_tilt_plain"}},
}


def charts(at) -> dict[str, dict]:
    """Plotly figures on the page by widget key."""
    return {c.proto.id.rsplit("-", 1)[-1]: json.loads(c.proto.spec) for c in at.get("plotly_chart")}


def array(value) -> np.ndarray:
    """A Plotly JSON array: a plain list, or a base64 typed array {"dtype", "bdata", "shape"}."""
    if not isinstance(value, dict):
        return np.asarray(value)
    flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
    shape = [int(n) for n in str(value.get("shape", len(flat))).split(",")]
    return flat.reshape(shape)


def messages(at) -> str:
    return " ".join(e.proto.body for e in [*at.info, *at.warning])


def models_for(scheme: str) -> list[str]:
    return ["untrained"] + ([scheme] if scheme in checkpoints.available() else [])


@pytest.mark.parametrize("scheme", SCHEMES)
def test_every_page_for_every_scheme_trained_and_untrained(scheme):
    for model in models_for(scheme):
        at = app_test(scheme=scheme, model=model, text="The dog saw the cat and the dog ran")
        assert not at.exception
        at.session_state["ra_rope_open"] = at.session_state["ra_alibi_open"] = True  # "what X would do", opened
        at.session_state["sim_pca3_open"] = True  # the 3-D path, opened
        for page in PAGES:
            at.switch_page(page).run()
            assert not at.exception, (page, scheme, model, [e.message for e in at.exception])
            drawn = charts(at)
            missing = MAIN_FIGURES[page][scheme] - set(drawn)
            assert not missing, (page, scheme, model, sorted(drawn))
            if page == "pages/similarity.py":
                random_note = "these neighbours are random" in messages(at)
                assert random_note == (model == "untrained")
            if page == "pages/attention.py" and scheme == "alibi":
                slopes = [t for t in drawn["ra_slopes"]["data"] if t["type"] == "bar"][0]
                np.testing.assert_allclose(array(slopes["y"]), [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8], rtol=1e-6)  # 4 heads


def test_closed_expanders_compute_nothing_until_opened():
    at = app_test(page="pages/attention.py", scheme="learned", model="untrained")
    assert set(charts(at)) == {"ra_attention"}  # both "what would X do" expanders closed
    at.session_state["ra_alibi_open"] = True
    at.run()
    assert set(charts(at)) == {"ra_attention", "ra_slopes", "ra_bias"}
    at.session_state["ra_rope_open"] = at.session_state["ra_alibi_open"] = True  # AppTest keeps no expander state
    at.run()
    assert set(charts(at)) == {"ra_attention", "ra_slopes", "ra_bias", "ra_arrow", "ra_angles", "ra_flat"}


def test_the_3d_path_is_sent_only_when_opened():
    at = app_test(page="pages/similarity.py", scheme="learned", model="learned")
    assert "sim_pca2" in charts(at) and "sim_pca3" not in charts(at)  # closed: no WebGL scene to draw
    at.session_state["sim_pca3_open"] = True
    at.run()
    flat, solid = charts(at)["sim_pca2"]["data"][0], charts(at)["sim_pca3"]["data"][0]
    assert solid["type"] == "scatter3d" and len(array(solid["z"])) == 128  # every row of the learned table
    np.testing.assert_allclose(array(solid["x"]), array(flat["x"]))  # the same first component


def test_pages_say_when_a_view_does_not_apply():
    at = app_test(page="pages/similarity.py", scheme="alibi", model="untrained")
    assert "ALiBi adds no position rows: it subtracts" in messages(at) and "need position rows" in messages(at)
    at.switch_page("pages/sinusoids.py").run()
    assert "adds no sinusoidal table" in messages(at)
    at.switch_page("pages/attention.py").run()
    assert "ra_tilt" in charts(at) and "attention itself is position-free" not in messages(at)
    at = app_test(page="pages/attention.py", scheme="none", model="untrained")
    assert not at.exception and not {"ra_tilt", "ra_tilt_plain"} & set(charts(at))  # with/without bias: alibi only
    assert "gets no position information" in messages(at)


@pytest.mark.slow
@pytest.mark.parametrize("text", ["", "cat", "<script>alert(1)</script> 😀 naïve", " the" * 1024, " the" * 1100],
                         ids=["empty", "one-token", "script-emoji", "1024-tokens", "1100-tokens"])
@pytest.mark.parametrize("scheme", ["learned", "rope"])
def test_awkward_sentences_never_raise(scheme, text):
    at = app_test(scheme=scheme, model="untrained", text=text)
    for page in PAGES:
        at.switch_page(page).run()
        assert not at.exception, (page, scheme, text[:20], [e.message for e in at.exception])
        assert "sin_table" in charts(at) or page != "pages/sinusoids.py"
    if not text:
        assert "Type a sentence" in messages(at)


def test_sinusoid_controls_change_the_table():
    at = app_test(page="pages/sinusoids.py", scheme="rope", model="untrained")
    at.slider(key="sin_width").set_value(16).run()
    at.slider(key="sin_length").set_value(4096).run()
    assert not at.exception
    table = charts(at)["sin_table"]["data"][0]
    assert array(table["z"]).shape == (256, 16)  # 4096 rows averaged in blocks of 16; 16 columns
    wavelengths = array(charts(at)["sin_wavelengths"]["data"][0]["y"])
    np.testing.assert_allclose(wavelengths[[0, -1]], [2 * np.pi, 2 * np.pi * 10000 ** (14 / 16)], rtol=1e-6)


@pytest.mark.parametrize("scheme", ["learned", "alibi", "rope"])
def test_pages_follow_the_models_own_width_and_heads(tiny_model, tmp_path, monkeypatch, scheme):
    """A shared-folder model of another size (48 wide, 6 heads, 3 layers, 32 rows): nothing assumes 128 or 4."""
    from lpos.checkpoints import save

    save(tiny_model(scheme, n_embd=48, n_head=6, n_layer=3, block_size=32), {}, tmp_path / "odd.pt")
    monkeypatch.setenv("LPOS_CHECKPOINT_DIR", str(tmp_path))
    at = app_test(scheme=scheme, model="dir:odd.pt", text="one two three four five six seven eight nine")
    at.session_state["ra_rope_open"] = at.session_state["ra_alibi_open"] = True  # "what X would do", opened
    for page in PAGES:
        at.switch_page(page).run()
        assert not at.exception, (page, [e.message for e in at.exception])
    drawn = charts(at)  # the RoPE & ALiBi page
    slopes = [t for t in drawn["ra_slopes"]["data"] if t["type"] == "bar"][0]
    np.testing.assert_allclose(array(slopes["y"]), alibi_slopes(6).numpy(), rtol=1e-6)
    angles = [t for t in drawn["ra_angles"]["data"] if t["type"] == "bar"][0]
    assert len(array(angles["x"])) == 4  # 48 / 6 = 8 columns per head: 4 pairs
    assert list(at.selectbox(key="ra_layer_3").options) == ["1", "2", "3"]  # layers 1-based on every page
    if scheme == "learned":
        at.switch_page("pages/similarity.py").run()
        positions = charts(at)["sim_positions"]["data"][0]
        assert array(positions["z"]).shape == (32, 32)  # the table's 32 rows, not 128


def test_nearest_neighbours_of_a_typed_word():
    trained = "learned" in checkpoints.available()
    at = app_test(page="pages/similarity.py", scheme="learned", model="learned" if trained else "untrained")
    at.text_input(key="sim_word").input("<script>alert(1)</script>").run()
    assert not at.exception
    neighbours = next(d.value for d in at.dataframe if "id" in d.value.columns)  # not the position table
    assert len(neighbours) == 10 and list(neighbours.columns) == ["rank", "id", "token", "cosine", "count"]
    assert neighbours["cosine"].is_monotonic_decreasing and neighbours["cosine"].max() <= 1.0 + 1e-6
    if not trained:
        return
    assert neighbours["count"].notna().all()
    from lpos.analysis.embeddings import token_counts
    from lpos.tokenizer import decode, encode

    model, meta = checkpoints.load("learned")
    counts = token_counts(meta)
    unseen = next(i for i in range(1000, 50000) if i not in counts and decode([i]).strip().isalpha()
                  and encode(decode([i])) == [i])
    at.text_input(key="sim_word").input(decode([unseen])).run()
    assert "was never seen in training" in messages(at)


def test_a_choice_of_one_is_said_not_offered():
    """Rope adds no position rows, so the token map's "Rows" is text, not a one-option radio."""
    at = app_test(page="pages/similarity.py", scheme="rope", model="untrained")
    assert not at.exception
    assert not [r for r in at.radio if r.key == "sim_rows"]
    assert any("Rows: **token rows** (rope adds no position rows)" in m.value for m in at.markdown)
    at = app_test(page="pages/similarity.py", scheme="learned", model="untrained")
    assert list(at.radio(key="sim_rows").options) == ["token rows", "token + position rows"]


def test_sinusoids_page_at_base_2_says_what_the_table_does():
    from conftest import app_test  # noqa: PLC0415

    at = app_test(page="pages/sinusoids.py", scheme="rope", model="untrained")
    at.number_input(key="sin_base").set_value(2.0).run()
    assert not at.exception
    captions = " ".join(c.value for c in at.caption)
    assert "thousands of positions" not in captions and "goes round 10.2 times" in captions
    assert "own RoPE base is 10,000, not the 2 set here" in captions


def test_pca_sentence_at_four_rows_says_the_share_is_forced():
    from lpos.analysis import similarity  # noqa: PLC0415
    from lpos.ui.similarity import pca_sentence  # noqa: PLC0415

    rows = np.random.default_rng(0).normal(size=(4, 16)).astype(np.float32)
    said = pca_sentence(rows, similarity.pca(rows, components=3), scheme="learned", trained=True, limit=None)
    assert "span at most 3 directions" in said and "by construction" in said and "explain 100%" not in said
    many = np.random.default_rng(0).normal(size=(20, 16)).astype(np.float32)
    assert "explain" in pca_sentence(many, similarity.pca(many, components=3), scheme="learned", trained=True, limit=None)


def test_one_token_bias_map_says_it_is_one_cell():
    from conftest import app_test  # noqa: PLC0415

    at = app_test(page="pages/attention.py", scheme="alibi", model="untrained", text="Hi")
    assert not at.exception
    captions = " ".join(c.value for c in at.caption)
    assert "One token, so one cell" in captions and "only itself to attend to" in captions
    assert "The bias shifts weight towards recent tokens" not in captions


def test_one_token_on_the_sinusoids_page_is_one_boxed_row():
    from conftest import app_test  # noqa: PLC0415

    at = app_test(page="pages/sinusoids.py", scheme="sinusoidal", model="untrained", text="Hi")
    assert not at.exception
    captions = " ".join(c.value for c in at.caption)
    assert "Your sentence has 1 token: the boxed row 0 is the row added to its token row" in captions
    assert "0–0" not in captions and "1 tokens" not in captions


def test_one_token_bias_map_has_a_colour_bar_of_whole_units():
    import json  # noqa: PLC0415

    from conftest import app_test  # noqa: PLC0415

    at = app_test(page="pages/attention.py", scheme="alibi", model="untrained", text="Hi")
    assert not at.exception
    spec = next(json.loads(c.proto.spec) for c in at.get("plotly_chart") if c.proto.id.endswith("ra_bias"))
    heat = spec["data"][0]
    assert (heat["zmin"], heat["zmax"]) == (-1.0, 0.0)  # not −1μ … 0 around a single 0


def test_one_token_s_attention_is_not_said_to_spread_or_tilt():
    from conftest import app_test  # noqa: PLC0415

    at = app_test(page="pages/attention.py", scheme="alibi", model="untrained", text="Hi")
    assert not at.exception
    captions = " ".join(c.value for c in at.caption)
    assert "tilted towards recent keys" not in captions and "One token attends only to itself." in captions
    two = " ".join(c.value for c in app_test(page="pages/attention.py", scheme="alibi", model="untrained",
                                             text="Hi there").caption)
    assert "tilted towards recent keys by the bias" in two


@pytest.mark.skipif("learned-32" not in checkpoints.available(), reason="learned-32 is not installed")
def test_similarity_caption_gives_a_short_window_table_s_trained_rows_alone():
    from lpos.ui.similarity import map_caption  # noqa: PLC0415

    said = map_caption(loaded_model("learned-32"), 128)
    mixed = float(re.search(r"mean cosine (-?[0-9.]+) at distance 1", said).group(1))
    alone = float(re.search(r"rows 0–31 alone: mean cosine (-?[0-9.]+) at distance 1", said).group(1))
    assert "mix the 32 trained rows with the 96 that never trained" in said and alone > mixed
    assert "never trained" not in map_caption(loaded_model("learned"), 128)
