"""AppTest runs of the Inside the model page: every scheme, trained and untrained, an upload, each tab."""
from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import SCHEMES, app_test, seeded_model
from test_lesson import loaded_model
from lpos import checkpoints
from lpos.ui.inside import Text, first_tokens, windows_used

INSIDE = "pages/inside.py"
TABS = ("Where position lives", "Head portraits", "The sink, tested")
LOADED = 300  # seconds: the first run probes ten models, slow on a busy two-core machine


def shipped(scheme: str):
    return pytest.param(scheme, marks=pytest.mark.skipif(scheme not in checkpoints.available(),
                                                         reason=f"checkpoints/{scheme}.pt is not trained yet"))


def charts(at) -> dict[str, dict]:
    return {c.proto.id.rsplit("-", 1)[-1]: json.loads(c.proto.spec) for c in at.get("plotly_chart")}


def text_of(at) -> str:
    return " ".join([m.value for m in at.markdown] + [c.value for c in at.caption])


def open_tab(at, tab: str):
    """Select a tab. AppTest sends the tab bar's state from its last run, so a test sets it again
    before every later run on that tab (a browser keeps it itself)."""
    at.session_state["inside_tab"] = tab
    return at.run()


def walk_tabs(at, *, scheme: str, label: str) -> None:
    """All three parts on the open page: each draws its figures and says what it measured."""
    assert not at.exception
    assert "inside_probes" in charts(at) and "inside_heads" not in charts(at)  # the other tabs wait until opened
    assert "fitted on" in text_of(at) and "What the lines show" in text_of(at)
    open_tab(at, TABS[1])
    assert not at.exception
    assert {"inside_heads", "inside_profile"} <= set(charts(at)) and "inside_probes" not in charts(at)
    assert f"**{scheme} · {label}**, 16 heads" in text_of(at)
    assert "query tokens per head" in text_of(at)
    at.session_state["inside_tab"] = TABS[1]
    at.selectbox(key="inside_layer_4").set_value(2)
    at.selectbox(key="inside_head_4").set_value(1).run()
    assert charts(at)["inside_profile"]["layout"]["title"]["text"].startswith("Layer 2, head 2")  # index 1: heads count from 1
    open_tab(at, TABS[2])  # the sidebar's model alone at first, at the default window
    assert not at.exception
    assert "inside_stream" in charts(at) and "inside_sink_gain" not in charts(at)
    assert "Measured on the first 577 tokens" in text_of(at)  # 64 + 1 + 512
    at.session_state["inside_tab"] = TABS[2]
    at.select_slider(key="inside_window").set_value(8).run()
    assert "Measured on the first 521 tokens" in text_of(at)
    at.session_state["inside_every_scheme"] = True  # open the comparison
    open_tab(at, TABS[2])
    assert not at.exception
    assert "inside_sink_gain" in charts(at)
    assert sum(f"**{s}**:" in text_of(at) for s in SCHEMES) == len(SCHEMES)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_inside_page_untrained(scheme):
    at = app_test(page=INSIDE, scheme=scheme, model="untrained", timeout=LOADED)
    walk_tabs(at, scheme=scheme, label="untrained (random init)")
    assert "An untrained model's loss sits near" in text_of(at)


@pytest.mark.parametrize("scheme", [shipped(s) for s in SCHEMES])
def test_inside_page_shipped(scheme):
    at = app_test(page=INSIDE, scheme=scheme, model=scheme, timeout=LOADED)
    probes = charts(at)["inside_probes"]
    lines = {trace["name"] for trace in probes["data"]}
    assert {name for name in checkpoints.available() if name in SCHEMES} <= lines  # one model per scheme
    walk_tabs(at, scheme=scheme, label=f"{scheme} (trained, shipped)")
    assert "An untrained model's loss sits near" not in text_of(at)


def test_inside_page_on_the_story_alone_says_so():
    at = app_test(page=INSIDE, scheme="rope", model="untrained", timeout=LOADED)
    if any(radio.key == "inside_text" for radio in at.radio):  # no choice without the corpus: the story it is
        at.radio(key="inside_text").set_value("the built-in story").run()
    assert not at.exception
    assert "of other windows of 128 tokens (windows: 10 of the built-in story)" in text_of(at)  # 1,399 tokens


def test_the_text_box_without_the_corpus_says_nothing_about_this_machine(monkeypatch):
    """Where the training corpus is not installed the page reads the story alone: a learner is told which text,
    not where a developer's files are."""
    from streamlit.testing.v1 import AppTest

    from lpos.ui import inside

    story_only = {name: text for name, text in inside.texts().items() if name == "the built-in story"}
    monkeypatch.setattr(inside, "texts", lambda: story_only)

    def page():
        from lpos.ui import inside
        from lpos.ui.models import UNTRAINED, LoadedModel, untrained

        inside.text_choice(LoadedModel(UNTRAINED, "untrained", untrained("rope"), {}))

    at = AppTest.from_function(page, default_timeout=LOADED).run()
    assert not at.exception and not at.radio
    said = " ".join(m.value for m in at.markdown)
    assert "**the built-in story** (no model was trained on it)" in said and "machine" not in said


def with_upload(model, name: str = "tiny.pt"):
    at = app_test(scheme="none", model="untrained", timeout=LOADED)
    at.session_state["uploads"] = {f"upload:{name}": (model, {})}
    at.run()
    at.selectbox(key="model").set_value(f"upload:{name}").run()
    at.switch_page(INSIDE).run()
    return at


def test_inside_page_with_an_uploaded_model_of_another_size():
    at = with_upload(seeded_model("learned", n_layer=2, n_head=2, n_embd=32, block_size=32))
    assert not at.exception
    open_tab(at, TABS[1])
    assert not at.exception
    assert "learned · tiny.pt (your upload)**, 4 heads" in text_of(at)
    assert "windows of 32 tokens" in text_of(at)
    open_tab(at, TABS[2])  # the default window of 64 plus 4 kept tokens is past its 32 rows
    assert not at.exception
    assert any("cannot stream at this window" in w.value for w in at.warning)
    at.session_state["inside_tab"] = TABS[2]
    at.select_slider(key="inside_window").set_value(16).run()
    assert "inside_stream" in charts(at) and not at.warning


def test_inside_page_explains_a_model_that_cannot_read_gpt2_tokens():
    at = with_upload(seeded_model("rope", n_layer=1, n_head=2, n_embd=16, vocab_size=300))
    assert not at.exception
    assert any("vocabulary has 300 tokens" in w.value for w in at.warning)


def test_the_lesson_step_on_the_leaking_mask_links_here():
    at = app_test(page="pages/lesson.py", step="10", model="untrained")
    assert not at.exception
    assert [link.proto.page for link in at.get("page_link")] == ["inside"]
    at = app_test(page="pages/lesson.py", step="9", model="untrained")
    assert not at.get("page_link")


@pytest.mark.skipif("learned-32" not in checkpoints.available(), reason="learned-32 is not installed")
def test_head_grid_says_a_short_window_model_is_measured_on_rows_it_never_trained():
    import pandas as pd  # noqa: PLC0415

    from lpos.analysis import heads  # noqa: PLC0415
    from lpos.ui.heads import grid_captions  # noqa: PLC0415
    from lpos.ui.inside import Text  # noqa: PLC0415

    chosen = Text(parts=(("the built-in story", tuple(range(1000))),))
    portraits = heads.HeadPortraits(table=pd.DataFrame(), profiles=np.zeros((1, 1, 129)), queries=7 * 127, window=128)
    said = " ".join(grid_captions(loaded_model("learned-32"), chosen, portraits, layer=None))
    assert "trained on windows of at most 32 tokens: in these 128-token windows the table rows it adds at " \
           "positions 32–127 never trained" in said
    assert "never trained" not in " ".join(grid_captions(loaded_model("learned"), chosen, portraits, layer=None))


def test_inside_head_table_prints_three_digits_as_rounded():
    import json  # noqa: PLC0415

    from conftest import app_test  # noqa: PLC0415
    from test_pages_inside import TABS, open_tab  # noqa: PLC0415

    at = app_test(page="pages/inside.py", scheme="rope", model="untrained", timeout=300)
    open_tab(at, TABS[1])
    assert not at.exception
    table = at.dataframe[0]
    formats = {name: column["type_config"]["format"] for name, column in json.loads(table.proto.columns).items()
               if "type_config" in column}
    floats = [c for c in table.value.columns if table.value[c].dtype.kind == "f"]
    assert floats and all(formats.get(c) == "%.3f" for c in floats)  # 0.038, never 0.0380


def test_inside_probes_of_a_model_on_its_own_tokenizer_say_its_untrained_rows(tmp_path):
    """The probe reading for an upload on its own tokenizer: a character model trained on windows of 16 of its 64 rows is
    probed on 64-token windows; the reading says which rows never trained, as it does for learned-32."""
    from test_courses import TEXT, converted_character_model  # noqa: PLC0415

    from lpos import checkpoints  # noqa: PLC0415
    from lpos.ui.caching import remember  # noqa: PLC0415
    from lpos.ui.inside import Text  # noqa: PLC0415
    from lpos.ui.models import LoadedModel  # noqa: PLC0415
    from lpos.ui.probes import _own_probe_view  # noqa: PLC0415

    model, meta = checkpoints.load(converted_character_model(tmp_path) / "chars.pt")
    remember(model, "upload:chars.pt")
    meta = {**meta, "train_args": {"max_length": 16}, "steps": 100}
    loaded = LoadedModel("upload:chars.pt", "chars.pt (your upload)", model, meta)
    assert not loaded.tokenizer.is_gpt2
    ids = tuple(loaded.tokenizer.encode_known(TEXT * 12)[0])
    reading = " ".join(_own_probe_view(loaded, Text((("text", ids),))).reading)
    assert "trained on windows of at most 16 tokens" in reading and "positions 16–63 never trained" in reading


@pytest.mark.skipif("learned-rand" not in checkpoints.available(), reason="checkpoints/learned-rand.pt is not shipped")
def test_each_sink_result_carries_its_own_model_s_name():
    at = app_test(page=INSIDE, scheme="learned", model="learned-rand", timeout=LOADED)
    at.session_state["inside_tab"] = TABS[2]
    at.session_state["inside_window"] = 8
    at.session_state["inside_every_scheme"] = True
    open_tab(at, TABS[2])
    assert not at.exception
    said = text_of(at)
    assert "**learned-rand**:" in said and "**learned**:" not in said  # the learned row is the sidebar's learned-rand
    bars = charts(at)["inside_sink_gain"]["data"][0]["x"]
    assert "learned-rand" in bars and "learned" not in bars


STORY_AND_HELD_OUT = Text((("the built-in story", tuple(range(1399))), ("held-out stories", tuple(range(3072)))))


def test_the_streamed_tokens_are_named_by_the_part_they_come_from():
    """577 streamed tokens of "the built-in story + held-out stories" all come from the story."""
    assert first_tokens(STORY_AND_HELD_OUT, 577) == "the first 577 tokens of the built-in story"
    assert first_tokens(STORY_AND_HELD_OUT, 1500) == ("all 1,399 tokens of the built-in story and the first 101 of "
                                                      "held-out stories")
    assert first_tokens(Text((("held-out stories", tuple(range(40))),)), 577) == "all 40 tokens of held-out stories"


def test_the_probe_windows_are_named_by_the_part_they_come_from():
    """34 windows of 128: 10 from the story's 1,399 tokens, 24 from the held-out 3,072; a wide, deep
    model affords 7, all from the story."""
    assert windows_used(STORY_AND_HELD_OUT, windows=34, length=128) == "10 of the built-in story and 24 of held-out stories"
    assert windows_used(STORY_AND_HELD_OUT, windows=7, length=128) == "7 of the built-in story"
