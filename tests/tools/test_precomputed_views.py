"""One list of precomputed views (lpos.precomputed.VIEWS): the pages look a view up and
`python -m lpos precompute` writes it from the same View record, so the two cannot drift apart.

- `compute` writes exactly the entries its records list, and which models get which views follows
  the scheme's hooks (a scheme that rotates: every RoPE scaling; a table read in order: the loss by
  position), never a scheme's name.
- Every view is read by some page's module, through its record.
- The pages, opened on shipped models with their default controls, ask only for keys that precompute
  writes for that model (for an untrained model: for every view precompute writes for untrained models).
- Moving the sink test's window and the Training timeline's step runs no analysis for a shipped model.
"""
from __future__ import annotations

import functools
from pathlib import Path

import pytest
import streamlit as st

from conftest import app_test
from lpos import checkpoints, precomputed
from lpos.analysis import streaming, timeline
from lpos.checkpoints import ModelRef
from lpos.model import GPT, GPTConfig, untrained_model
from lpos.pages import PAGES, page_named
from lpos.positions import RESCALINGS
from lpos.ui import stored as stored_module

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = checkpoints.available()


def tiny(scheme: str, **config) -> GPT:
    return GPT(GPTConfig(position=scheme, **{**dict(n_layer=1, n_head=2, n_embd=32, block_size=64), **config})).eval()


def written(model: GPT, meta: dict | None = None, **options) -> dict[str, list[str]]:
    """The keys the records list for `model`, by view name."""
    keys: dict[str, list[str]] = {}
    for view, parameters in precomputed.entries(model, meta or {}, **options):
        keys.setdefault(view.name, []).append(view.key_of(parameters))
    return keys


def test_every_key_names_its_view():
    model = tiny("rope")
    for name, keys in written(model).items():
        assert all(key.startswith(f"{name}|") for key in keys), name
    assert len({view.name for view in precomputed.VIEWS}) == len(precomputed.VIEWS)


def test_which_models_get_which_views_follows_the_hooks():
    rotating, table, bias = (written(tiny(scheme)) for scheme in ("rope", "learned", "alibi"))
    rescalings = len(RESCALINGS)  # every method but RoPE as trained, at each factor
    assert len(rotating["losses"]) == len(rotating["profile"]) == 1 + rescalings * len(precomputed.FACTORS)
    assert len(table["losses"]) == len(bias["losses"]) == 1 and "profile" not in table and "profile" not in bias
    assert "position_loss" in table and "position_loss" not in rotating and "position_loss" not in bias
    randomized = written(tiny("learned", block_size=256, random_positions=True))
    assert "position_loss" not in randomized  # its rows are read at random positions: no loss by row
    untrained_views = {view.name for view in precomputed.VIEWS if view.untrained}
    # what Inside draws beside the trained models; Length extrapolation's curve and its baseline and Stretching's
    # shift table for an untrained model
    assert untrained_views == {"probes", "portraits", "sink", "curve", "sliding", "offset"}


@pytest.mark.parametrize("scheme", ["rope", "learned"])
def test_compute_writes_exactly_the_entries_its_records_list(scheme):
    model = tiny(scheme)
    listed = [key for keys in written(model).values() for key in keys]
    results = precomputed.compute(model, {}, progress=lambda line: None)
    refused = [key for key in listed if key not in results]  # a 64-row table has no room for the sink's window
    assert list(results) == [key for key in listed if key not in refused]  # in order, nothing added
    assert all(key.startswith("sink|") for key in refused) and bool(refused) == (scheme == "learned")
    view = precomputed.CURVE  # and each is the record's own call
    parameters = next(p for v, p in precomputed.entries(model, {}) if v is view)
    assert results[view.key_of(parameters)].losses.tolist() == view.compute(model, **parameters).losses.tolist()


def test_every_view_is_read_by_a_page_module_through_its_record():
    source = "\n".join(path.read_text(encoding="utf-8") for path in (ROOT / "lpos" / "ui").glob("*.py"))
    names = {name: value for name, value in vars(precomputed).items() if isinstance(value, precomputed.View)}
    for view in precomputed.VIEWS:
        assert any(f"precomputed.{name}" in source for name, value in names.items() if value is view), view.name


def test_context_parameters_do_not_change_a_key():
    chunks = precomputed.stretch_chunks(precomputed.STRETCH_STORY, {})
    one = precomputed.LOSSES.key_of(dict(method="yarn", factor=4.0, chunks=chunks, train_length=128))
    assert one == precomputed.LOSSES.key_of(dict(method="yarn", factor=4, chunks=chunks, train_length=512))
    assert one == precomputed.loss_key("yarn", 4.0, chunks)  # the key the shipped sidecars were written with
    with pytest.raises(TypeError):  # a parameter the record does not know is a programmer's error
        precomputed.LOSSES.key_of(dict(method="yarn", factor=4.0, chunks=chunks, train_length=128, seed=1))


# --- the pages ask for what precompute writes ----------------------------------------------------------

@pytest.fixture
def lookups(monkeypatch):
    """Every (model reference, scheme, key) a page asks lpos.ui.stored for, caches empty first."""
    asked = []
    original = stored_module.stored

    def recording(model, key):
        asked.append((*ModelRef.from_cache_key(stored_module.cache_key(model)), key))  # a GPT or a LoadedModel
        return original(model, key)

    st.cache_data.clear()
    st.cache_resource.clear()
    monkeypatch.setattr(stored_module, "stored", recording)
    yield asked
    st.cache_data.clear()
    st.cache_resource.clear()


def shipped_keys(name: str) -> set[str]:
    model, meta = checkpoints.load(name)
    return {key for keys in written(model, meta).values() for key in keys}


def untrained_keys(scheme: str) -> set[str]:
    meta = checkpoints.load(SHIPPED[0])[1] if SHIPPED else {}
    views = tuple(view for view in precomputed.VIEWS if view.untrained)
    model = untrained_model(scheme)
    return {key for keys in written(model, {}, held_out_meta=meta, views=views).values() for key in keys}


# every page on the shipped RoPE model, then the views a page draws behind a control or for another model
OPENED = [(page.file, "rope", {}) for page in PAGES] + [
    (page_named("inside").file, "rope", {"inside_tab": "Head portraits"}),
    (page_named("inside").file, "rope", {"inside_tab": "The sink, tested"}),
    (page_named("lengths").file, "learned-32", {})]


@pytest.mark.slow  # every page, every shipped model read from its sidecar, three untrained models probed live
@pytest.mark.skipif(not {"rope", "learned-32"} <= set(SHIPPED), reason="checkpoints/rope.pt or learned-32.pt not shipped")
def test_pages_ask_only_for_keys_precompute_writes(lookups):
    untrained_views = tuple(f"{view.name}|" for view in precomputed.VIEWS if view.untrained)
    for page, model, state in OPENED:
        at = app_test(page=page, model=model, scheme=checkpoints.load(model)[0].config.position, timeout=600)
        for name, value in state.items():
            at.session_state[name] = value
            at.run()
        assert not at.exception, (page, at.exception)
    assert {ref.name for ref, _, _ in lookups if ref.is_shipped} >= {"rope", "learned-32"}
    expected = {}
    for ref, scheme, key in lookups:
        if ref.is_shipped:
            known = expected.setdefault(str(ref), shipped_keys(ref.name))
        elif ref.is_untrained and key.startswith(untrained_views):
            known = expected.setdefault(f"untrained/{scheme}", untrained_keys(scheme))
        else:
            continue  # computed live by design: an untrained model's loss curve, shuffles
        assert key in known, (str(ref), scheme, key[:80])


# --- moving a control computes nothing for a shipped model -----------------------------------------------

COUNTED = ((streaming, "sink_test"), (timeline, "timeline_views"), (timeline, "band_over_time"),
           (timeline, "timeline_reading"), (timeline, "repeated_similarity"), (timeline, "attention_sentence"),
           (timeline, "bias_over_distance"), (timeline, "bias_reading"))


@pytest.fixture
def analysis_calls(monkeypatch):
    """How often the analyses behind the sink test and the timeline's step views run, by name; caches empty first."""
    calls = {name: 0 for _, name in COUNTED}

    def counting(name, function):
        @functools.wraps(function)  # a recipe step names it by its module and name, as the function it stands for
        def counted(*args, **kwargs):
            calls[name] += 1
            return function(*args, **kwargs)
        return counted

    st.cache_data.clear()
    st.cache_resource.clear()
    for module, name in COUNTED:
        monkeypatch.setattr(module, name, counting(name, getattr(module, name)))
    yield calls
    st.cache_data.clear()
    st.cache_resource.clear()


@pytest.mark.slow  # ten shipped models: the sink tab at every window, the timeline at every step
@pytest.mark.skipif(not {"learned", "learned-32", "learned-rand"} <= set(SHIPPED), reason="a learned model is not shipped")
def test_every_window_and_every_step_is_read_not_computed(analysis_calls):
    """The sink tab's window slider through every window it offers, with every scheme's comparison open
    (each scheme's shipped model, then the untrained ones), and the Training timeline's step slider through
    every snapshot of every shipped model: the analyses run zero times."""
    for chosen in ("learned", "learned-32", "learned-rand", "untrained"):
        at = app_test(page="pages/inside.py", model=chosen, scheme="learned", timeout=600)
        every = chosen in ("learned", "untrained")  # every scheme's model too, in the opened comparison
        for window in (None, *streaming.WINDOWS):  # the tab at its default window first: the slider is on it
            at.session_state["inside_tab"] = "The sink, tested"  # AppTest resends the tab bar's last state
            at.session_state["inside_every_scheme"] = every
            if window is not None:
                at.select_slider(key="inside_window").set_value(window)
            at.run()
            assert not at.exception, (chosen, window, at.exception)
            drawn = " ".join(c.proto.id for c in at.get("plotly_chart"))
            assert "inside_stream" in drawn and ("inside_sink_gain" in drawn) == every, (chosen, window, drawn)
    assert analysis_calls["sink_test"] == 0, analysis_calls
    for name in SHIPPED:
        model, meta = checkpoints.load(name)
        at = app_test(page="pages/timeline.py", model=name, scheme=model.config.position, timeout=600)
        for step in meta["timeline"]["steps"]:
            at.select_slider(key="timeline_step").set_value(step).run()
            assert not at.exception, (name, step, at.exception)
    assert sum(analysis_calls.values()) == 0, analysis_calls
