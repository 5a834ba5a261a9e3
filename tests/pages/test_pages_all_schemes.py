"""The pages whose words follow what a scheme does, with every registered scheme's untrained model: one
AppTest per page, the scheme switched in the sidebar, no exception, and the one line that says a view does
not apply where it does not (the rows of Similarity and Embeddings, the Sinusoids table, the order-blind
baseline of Order blindness). That every page draws with every scheme and model is test_app_shell's."""
from __future__ import annotations

import pytest

from conftest import app_test
from lpos.analysis.scheme_views import positionless_scheme
from lpos.lesson import STEPS
from lpos.pages import PAGES
from lpos.positions import REGISTRY, SCHEMES

TEXT = "The dog saw the cat and the dog ran"


def text_of(at) -> str:
    return " ".join([m.value for m in at.markdown] + [c.value for c in at.caption]
                    + [e.proto.body for e in [*at.info, *at.warning, *at.success]])


def links(at) -> list[str]:
    return [link.proto.page for link in at.get("page_link")]


def each_scheme(page: str):
    """The page open with the untrained model, then switched to each scheme in the sidebar in turn."""
    at = app_test(page=page, scheme=SCHEMES[0], model="untrained", text=TEXT)
    for name in SCHEMES:
        at.selectbox(key="scheme").set_value(name).run()
        assert not at.exception, (page, name, [e.message for e in at.exception])
        assert at.session_state["scheme"] == name and at.session_state["model"] == "untrained"
        yield name, REGISTRY[name], at


def test_embeddings_says_where_a_rowless_scheme_acts():
    for name, scheme, at in each_scheme("pages/embeddings.py"):
        said = text_of(at)
        if scheme.adds_rows:
            assert "One colour scale for all three panels" in said, name
        elif scheme.in_attention:
            assert f"{scheme.label} adds no position rows: it {scheme.acts}." in said, name
            assert links(at) == ["attention"], name  # the page of every scheme that acts inside attention
        else:
            assert "no position rows and nothing inside attention" in said, name
            assert links(at) == ["shuffle"], name


def test_similarity_says_in_one_line_when_there_are_no_rows():
    for name, scheme, at in each_scheme("pages/similarity.py"):
        charts = {c.proto.id.rsplit("-", 1)[-1] for c in at.get("plotly_chart")}
        assert "sim_tokens" in charts, name
        said = text_of(at)
        if scheme.adds_rows:
            assert {"sim_positions", "sim_band"} <= charts, name
        elif scheme.shows("rotation"):
            assert "sim_kernel" in charts, name
        else:
            assert "sim_positions" not in charts and f"{scheme.label}" in said and "no position rows" in said, name


def test_sinusoids_says_when_the_model_has_no_sinusoidal_table():
    for name, scheme, at in each_scheme("pages/sinusoids.py"):
        charts = {c.proto.id.rsplit("-", 1)[-1] for c in at.get("plotly_chart")}
        assert ("sin_model_table" in charts) == scheme.shows("sinusoids"), name
        if not scheme.shows("sinusoids"):
            assert f"This model adds no sinusoidal table: its scheme, {name}, {scheme.acts}." in text_of(at)


def test_order_blindness_compares_every_scheme_and_its_sentences_follow_the_numbers():
    baseline = positionless_scheme()
    for name, scheme, at in each_scheme("pages/shuffle.py"):
        table = at.table[0].value
        assert len(table) == len(SCHEMES)
        blind = dict(zip([s.removesuffix(" (sidebar)") for s in table.index], table["order-blind at layer 1"]))
        assert blind[baseline] == "yes"
        assert all(blind[s] == "no" for s in SCHEMES if REGISTRY[s].adds_rows)
        said = text_of(at)
        assert any(h.value.startswith(f"Layer 1: the last position's attention output, all {len(SCHEMES)} schemes")
                   for h in at.subheader)
        moved = next(m.value for m in at.markdown if "float error" in m.value)  # the sentence under the table
        before_still = moved.partition(" stayed within float error too")[0]
        movers = moved.partition(" moved it by more than float error")[0] if "moved it by" in moved else ""
        stayers = before_still.rsplit(". ", 1)[-1] if "stayed within" in moved else ""
        for other, verdict in blind.items():  # each scheme is named on the side its number puts it
            if other != baseline:
                assert other in (stayers if verdict == "yes" else movers), (name, other, verdict, moved)
        assert "causal mask" in said or "single layer" in said


def test_inside_draws_every_tab_for_every_scheme():
    for name, _, at in each_scheme("pages/inside.py"):
        for tab in ("Head portraits", "The sink, tested"):
            at.session_state["inside_tab"] = tab
            at.run()
            assert not at.exception, (name, tab, [e.message for e in at.exception])
        at.session_state["inside_tab"] = "Where position lives"
        at.run()
        assert not at.exception, name


def test_lesson_draws_all_ten_steps_for_every_scheme():
    at = app_test(page="pages/lesson.py", scheme=SCHEMES[0], model="untrained", text=TEXT)
    for name in SCHEMES:
        at.selectbox(key="scheme").set_value(name).run()
        for step in range(1, len(STEPS) + 1):
            at.session_state["lesson_step"] = step
            at.run()
            assert not at.exception, (name, step, [e.message for e in at.exception])
            assert at.header[0].value == f"{step}. {STEPS[step - 1].title}"
            assert not at.warning, (name, step, [w.value for w in at.warning])


# Tiny models trained a few steps on the built-in story, in a shared folder: each carries a timeline and a
# card as the shipped ones will, so the pages read a trained model of every new scheme before those exist.
TINY = {"t5": {}, "fire": {}, "cope": {}, "rand": {"scheme": "learned", "random_positions": 256, "block_size": 32}}


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    import streamlit as st

    from lpos.corpus import story
    from lpos.train import TrainArgs, train

    folder = tmp_path_factory.mktemp("tiny")
    text = folder / "story.txt"
    text.write_text((story() + "\n<|endoftext|>\n") * 3, encoding="utf-8")
    for name, options in TINY.items():
        train(TrainArgs(**{"scheme": name, **options}, data=(str(text),), out=str(folder / f"tiny-{name}.pt"), steps=3,
                        batch_size=4, n_layer=2, n_head=4, n_embd=32, threads=1), progress=False)
    patch = pytest.MonkeyPatch()
    patch.setenv("LPOS_CHECKPOINT_DIR", str(folder))
    patch.setenv("LPOS_VIEW_CACHE", str(folder / "cache"))
    st.cache_data.clear()
    st.cache_resource.clear()
    yield folder
    patch.undo()
    st.cache_data.clear()
    st.cache_resource.clear()




@pytest.mark.parametrize("name", list(TINY))
def test_trained_models_of_the_new_schemes_on_every_page(tiny_folder, name):
    at = app_test(model=f"dir:tiny-{name}.pt", text=TEXT, timeout=300)
    for page in PAGES:
        at.switch_page(page.file).run()
        assert not at.exception, (name, page.name, [e.message for e in at.exception])
    at.switch_page("pages/inside.py").run()
    for tab in ("Head portraits", "The sink, tested"):
        at.session_state["inside_tab"] = tab
        at.run()
        assert not at.exception, (name, tab, [e.message for e in at.exception])
    at.switch_page("pages/timeline.py").run()
    assert at.select_slider(key="timeline_step").value == 3  # the model's own snapshots, not "no timeline"
    at.switch_page("pages/lesson.py").run()
    for step in range(1, len(STEPS) + 1):
        at.session_state["lesson_step"] = step
        at.run()
        assert not at.exception, (name, step, [e.message for e in at.exception])


def test_a_table_read_at_random_positions_on_similarity(tiny_folder):
    at = app_test(page="pages/similarity.py", model="dir:tiny-rand.pt", scheme="learned", text=TEXT, timeout=300)
    assert not at.exception, [e.message for e in at.exception]
    assert at.slider(key="sim_length_256").value == 256  # the whole table: every row of it trained
    said = text_of(at)
    assert "Training read this table's 256 rows at random: each window of 32 tokens" in said
    assert "Every row of this table was read in every training batch" not in said
