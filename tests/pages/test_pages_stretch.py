"""AppTest runs of the Stretching-the-context page for every scheme, trained and untrained: the
five sections draw, the shift table says what each scheme sees, writing streams and repeats."""
from __future__ import annotations

import pytest

from conftest import SCHEMES, app_test
from lpos import checkpoints
from lpos.corpus import data_dir
from lpos.positions import REGISTRY
from lpos.positions.maths import RESCALINGS, ROPE_METHODS
from lpos.ui.models import label

STRETCH = "pages/stretch.py"
CORPUS_FILES = checkpoints.load("rope")[1].get("data_files", ["?"]) if "rope" in checkpoints.available() else ["?"]
shipped_rope = pytest.mark.skipif("rope" not in checkpoints.available(), reason="checkpoints/rope.pt is not shipped")


def shipped(scheme: str):
    return pytest.param(scheme, marks=pytest.mark.skipif(scheme not in checkpoints.available(),
                                                         reason=f"checkpoints/{scheme}.pt is not trained yet"))


def shift_changes(at) -> dict[str, str]:
    table = at.table[0].value
    return dict(zip(table.index, table.iloc[:, -1]))


def assert_page(at, *, rescaled: str = "rope") -> None:
    """The page's sections; `rescaled`: the shipped rotating model sections 1 to 3 rescale (the sidebar's when it
    rotates, else rope)."""
    assert not at.exception
    changes = shift_changes(at)
    assert list(changes) == list(SCHEMES)
    for scheme in ("rope", "alibi", "none", "t5", "cope"):  # relative: a shift changes nothing (fire: only inside L)
        assert float(changes[scheme]) < 1e-4, (scheme, changes[scheme])
    for scheme in ("learned", "sinusoidal"):
        assert float(changes[scheme]) > 1e-3, (scheme, changes[scheme])
    if "rope" in checkpoints.available():
        text = "\n".join(m.value for m in at.markdown)
        assert f"{rescaled} as trained" in text and "Position Interpolation ×4" in text and "YaRN ×4" in text
        assert "pairs complete a full turn inside the 128-token window" in text
        assert "largest logit" in text
        assert len(at.get("plotly_chart")) == 4  # the story's losses, wavelengths, divisions, attention; held-out closed
        assert "The held-out stream" not in text


@pytest.mark.parametrize("scheme", SCHEMES)
def test_stretch_page_untrained(scheme):
    assert_page(app_test(page=STRETCH, scheme=scheme, model="untrained", timeout=300))


@pytest.mark.parametrize("scheme", [shipped(s) for s in SCHEMES])
def test_stretch_page_shipped(scheme):
    at = app_test(page=STRETCH, scheme=scheme, model=scheme, timeout=300)
    assert_page(at, rescaled=scheme if REGISTRY[scheme].shows("rotation") else "rope")
    assert shift_changes(at) and at.table[0].value["model"].tolist() == [
        f"{s} (trained, shipped)" if s in checkpoints.available() else "untrained (no shipped checkpoint yet)"
        for s in SCHEMES]


def test_the_learned_table_ends_before_a_large_offset():
    at = app_test(page=STRETCH, scheme="learned", model="untrained", timeout=300)
    at.slider(key="stretch_offset").set_value(500).run()
    changes = shift_changes(at)
    assert changes["learned"] == "n/a: the table has 128 rows; the sentence would end at position 504"  # positions 500..504: five tokens
    assert float(changes["rope"]) < 1e-4 and not at.exception


def test_an_empty_sentence_is_asked_for():
    at = app_test(page=STRETCH, scheme="rope", model="untrained", text="", timeout=300)
    assert not at.exception
    assert any("Type a sentence in the sidebar" in i.value for i in at.info)


@pytest.mark.slow  # three more curves and four more 1,024-token forwards
@shipped_rope
def test_a_factor_change_redraws_the_curves():
    at = app_test(page=STRETCH, scheme="rope", model="rope", timeout=300)
    at.radio(key="stretch_factor").set_value(8).run()
    text = "\n".join(m.value for m in at.markdown)
    assert "YaRN ×8" in text and "YaRN ×4" not in text and not at.exception


@pytest.mark.slow  # scores 4,096 more predictions under six curves
@shipped_rope
@pytest.mark.skipif(not all((data_dir() / name).is_file() for name in CORPUS_FILES),
                    reason=f"the training corpus is not at {data_dir()} (LPOS_DATA_DIR): no held-out stream")
def test_the_held_out_stream_is_scored_once_opened():
    at = app_test(page=STRETCH, scheme="rope", model="rope", timeout=300)
    at.session_state["stretch_held_out_open"] = True  # AppTest keeps no expander state
    at.run()
    text = "\n".join(m.value for m in at.markdown)
    assert not at.exception and len(at.get("plotly_chart")) == 5
    assert "**The held-out stream**, at 1024 tokens: rope as trained" in text


@pytest.mark.skipif(not checkpoints.available(), reason="no shipped checkpoint")
def test_writing_streams_every_shipped_model_and_a_seed_repeats():
    at = app_test(page=STRETCH, scheme="rope", model="untrained", timeout=300)
    at.slider(key="stretch_tokens").set_value(16).run()
    at.button(key="stretch_write").click().run()
    assert not at.exception
    written = [m.value for m in at.markdown if m.value.startswith("Once upon a time")]
    randomized = [n for n in checkpoints.available() if checkpoints.load(n)[0].config.random_positions]
    # one writer per shipped scheme, and each table read at random positions (it writes past 128)
    assert len(written) == len([s for s in SCHEMES if s in checkpoints.available()]) + len(randomized)
    notes = [m.value for m in at.markdown if m.value.startswith("**") and " · " in m.value]  # a line above each text
    assert len(notes) == len(written)
    for note in notes:  # the randomized table reads its whole text again; every other writer keeps a cache
        randomized_note = any(f"**{label(name)}**" in note for name in randomized)
        assert ("reads its whole text again for each new token" in note) == randomized_note, note
        assert "past its training length" not in note  # the prompt and 16 tokens stay inside 128
    at.button(key="stretch_write").click().run()
    assert [m.value for m in at.markdown if m.value.startswith("Once upon a time")] == written
    at.number_input(key="stretch_seed").set_value(1).run()  # other settings: the old texts are not shown as theirs
    assert not [m.value for m in at.markdown if m.value.startswith("Once upon a time")]


@pytest.mark.skipif("learned" not in checkpoints.available(), reason="checkpoints/learned.pt is not shipped")
def test_a_long_prompt_leaves_the_learned_model_no_room():
    at = app_test(page=STRETCH, scheme="rope", model="untrained", timeout=300)
    at.text_input(key="stretch_prompt").set_value("word " * 130).run()
    assert any("no position left to write at" in w.value for w in at.warning) and not at.exception
    at.text_input(key="stretch_prompt").set_value("").run()
    assert any("Type a prompt" in i.value for i in at.info)


def test_the_lesson_and_the_sinusoids_page_link_here():
    lesson = app_test(page="pages/lesson.py", scheme="rope", model="untrained", step="9")
    link = "[Stretching the context](stretch?text=The+dog+bit+the+man&scheme=rope&model=untrained)"
    assert any(link in m.value for m in lesson.markdown) and not lesson.exception
    sinusoids = app_test(page="pages/sinusoids.py", scheme="rope", model="untrained")
    assert any("[Stretching the context](stretch)" in c.value for c in sinusoids.caption)


@pytest.mark.slow  # a learner's RoPE model scored live: four methods on the story, four attention reads
@shipped_rope
def test_a_learners_model_is_scored_once_under_a_bar_that_names_each_method(tmp_path, monkeypatch):
    """A RoPE model from a shared folder with no disk cache (LPOS_VIEW_CACHE=off): its first visit scores
    the story and reads the attention under each method once, each named on the section's progress bar as it
    starts; a second visit, with Streamlit's own caches emptied, scores nothing again."""
    import functools
    import shutil

    import streamlit as st

    from lpos.analysis import stretch
    from lpos.ui import stored

    shutil.copy(checkpoints.CHECKPOINT_DIR / "rope.pt", tmp_path / "mine.pt")
    monkeypatch.setenv("LPOS_CHECKPOINT_DIR", str(tmp_path))
    monkeypatch.setenv("LPOS_VIEW_CACHE", "off")
    calls, said = {"chunk_losses": 0, "attention_profile": 0}, []
    for name in calls:
        @functools.wraps(getattr(stretch, name))  # a recipe names the function it stands for
        def counted(*args, _name=name, _function=getattr(stretch, name), **kwargs):
            calls[_name] += 1
            return _function(*args, **kwargs)
        monkeypatch.setattr(stretch, name, counted)
    doing = stored.Progress.doing
    monkeypatch.setattr(stored.Progress, "doing", lambda bar, work: (said.append(work), doing(bar, work)))
    monkeypatch.setattr(stored, "_memory", type(stored._memory)())
    for visit in (1, 2):
        st.cache_data.clear()
        st.cache_resource.clear()
        at = app_test(page=STRETCH, model="dir:mine.pt", scheme="rope", timeout=600)
        assert not at.exception, at.exception
        assert "Sections 1 to 3 rescale **mine.pt" in "\n".join(m.value for m in at.markdown)
        assert len(at.get("plotly_chart")) == 4  # losses, wavelengths, divisions, attention
        if visit == 1:
            assert calls == {"chunk_losses": len(ROPE_METHODS), "attention_profile": len(ROPE_METHODS)}, calls
            scored = [work for work in said if work.startswith("Scoring")]
            assert [work.split(": ")[-1] for work in scored] == ["rope, not rescaled (mine.pt)"] + [
                f"rope + {ROPE_METHODS[name].label} ×4 (mine.pt)" for name in RESCALINGS], scored
    assert calls == {"chunk_losses": len(ROPE_METHODS), "attention_profile": len(ROPE_METHODS)}, calls  # visit 2 read all


@pytest.mark.skipif("rope" not in checkpoints.available(), reason="the shipped rope model is not installed")
def test_stretch_page_says_what_it_rescales_and_what_it_leaves_off():
    from conftest import app_test  # noqa: PLC0415

    at = app_test(page="pages/stretch.py", scheme="rope", model="rope", timeout=300)
    assert not at.exception
    text = " ".join(m.value for m in at.markdown) + " ".join(c.value for c in at.caption)
    assert "the model in the sidebar." in text and "pick another RoPE model in the sidebar to rescale it" not in text
    learned = checkpoints.load("learned")[0].max_input_length if "learned" in checkpoints.available() else None
    assert ("The learned model has no row past" in text) == (learned is not None)
    options = [at.radio(key="stretch_factor").format_func(f) for f in (2, 4, 8)]
    assert options[-1] == "×8 (1,024 tokens)" or "losses read to 1,024" in options[-1]


@pytest.mark.skipif("learned-rand" not in checkpoints.available(), reason="checkpoints/learned-rand.pt is not shipped")
def test_the_shift_names_the_rows_a_table_read_at_random_positions_adds():
    at = app_test(page=STRETCH, scheme="learned", model="learned-rand", timeout=300)
    model = checkpoints.load("learned-rand")[0]
    rows = model.scheme.input_positions(model.config, 5, 0)  # the sidebar's five tokens at offset 0
    said = next(c.value for c in at.caption if "at offset 0 and at offset 64" in c.value)
    assert (f"learned-rand (trained, shipped) reads its table at random positions, not at the sentence's "
            f"positions: rows {int(rows[0]):,} to {int(rows[-1]):,} at offset 0") in said and not at.exception
