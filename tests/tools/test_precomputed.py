"""Precomputed views (lpos.precomputed): the sidecars hold what the analysis computes, they are read
safely and only when current, and the pages read them instead of computing.

Tolerance: a recomputed sample is compared at rtol 1e-5, atol 5e-5. The numbers are deterministic for
one torch thread count, but `python -m lpos precompute` may run with another than the test, and a
different count sums in another order (float32 rounding). A per-token loss is the difference of two
terms as large as the logits (logsumexp over 50,257 entries minus the target's logit, both ~10-30), so
its absolute error does not shrink with the loss: one run measured 6.1e-6 on a loss of 0.0074, hence
an absolute bound ten times that. The plain-data round trip itself is exact (checked bit for bit).
"""
from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pandas as pd
import pytest
import streamlit as st
import torch

from conftest import SCHEMES, app_test
from lpos import checkpoints, precomputed
from lpos.pages import PAGES, page_named
from lpos.analysis import coverage, heads, lengths, probes, shuffle, streaming, stretch
from lpos.model import untrained_model
from lpos.positions import RopeScaling
from lpos.tokenizer import encode

SHIPPED = checkpoints.available()
needs_shipped = pytest.mark.skipif(not SHIPPED, reason="no shipped checkpoint is installed")
RTOL, ATOL = 1e-5, 5e-5


def same(a, b, *, exact: bool) -> None:
    """a == b for the analysis results stored: frames, arrays, records, dicts, numbers."""
    if isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b, check_exact=exact, rtol=RTOL, atol=ATOL)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape
        if exact:
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)
    elif dataclasses.is_dataclass(a):
        assert type(a) is type(b)
        for field in dataclasses.fields(a):
            same(getattr(a, field.name), getattr(b, field.name), exact=exact)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for key in a:
            same(a[key], b[key], exact=exact)
    elif isinstance(a, float) and not exact:
        assert b == pytest.approx(a, rel=RTOL, abs=ATOL)
    else:
        assert a == b


def test_plain_round_trip_is_exact_and_loads_weights_only(tiny_model, tmp_path):
    model = tiny_model("rope", n_layer=2, n_embd=32, block_size=128)
    parts = precomputed.inside_texts(None)[precomputed.INSIDE_STORY]
    text = probes.probe_text({name: list(ids) for name, ids in parts}, model=model)
    original, shuffled = precomputed.shuffle_pairs()[0]
    views = {"probes": probes.position_probes(model, text), "portraits": heads.head_portraits(model, text),
             "sink": streaming.sink_test(model, [t for _, p in parts for t in p][:80], window=8),
             "curve": lengths.loss_along_text(model, precomputed.story_ids(200)),
             "shuffle": shuffle.shuffle_experiment(model, original, shuffled=shuffled),
             "losses": stretch.chunk_losses(model, precomputed.stretch_chunks(precomputed.STRETCH_STORY, {}),
                                            lengths=(128, 256))}
    path = tmp_path / "tiny.views.pt"
    precomputed.save_plain({key: precomputed.to_plain(value) for key, value in views.items()}, path, source_digest="abc")
    payload = torch.load(path, weights_only=True)  # plain data only: the safe loader reads it
    assert payload["version"] == precomputed.VERSION and payload["source_digest"] == "abc"
    entries = precomputed.load(path, source_digest="abc")
    assert set(entries) == set(views)
    for key, value in views.items():
        same(value, precomputed.from_plain(entries[key]), exact=True)


def test_a_sidecar_of_another_checkpoint_or_version_is_ignored(tmp_path):
    path = tmp_path / "x.views.pt"
    precomputed.save_plain({"k": 1.5}, path, source_digest="abc")
    assert precomputed.load(path, source_digest="abc") == {"k": 1.5}
    assert precomputed.load(path, source_digest="another") == {}
    assert precomputed.load(tmp_path / "missing.views.pt", source_digest="abc") == {}
    torch.save({"version": precomputed.VERSION + 1, "source_digest": "abc", "views": {"k": 1}}, path)
    assert precomputed.load(path, source_digest="abc") == {}
    with pytest.raises(ValueError):
        precomputed.from_plain({"x": 1})
    with pytest.raises(KeyError):  # only the records lpos.precomputed names are ever built
        precomputed.from_plain({"__record__": "Popen", "fields": {}})


def current_entries(name: str) -> dict:
    return precomputed.load(precomputed.sidecar(name), source_digest=precomputed.source_digest(name))


@needs_shipped
@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_model_has_a_current_small_sidecar(name):
    entries = current_entries(name)
    assert entries, f"checkpoints/{name}.views.pt is missing or stale: run python -m lpos precompute"
    assert precomputed.sidecar(name).stat().st_size < 8 * 2**20
    assert (checkpoints.CHECKPOINT_DIR / f"{name}.pt").stat().st_size < 8 * 2**20
    story = precomputed.inside_texts(None)[precomputed.INSIDE_STORY]
    assert precomputed.inside_key("probes", story) in entries
    assert precomputed.curve_key(precomputed.story_ids()) in entries
    chunks = precomputed.stretch_chunks(precomputed.STRETCH_STORY, {})
    assert precomputed.loss_key("as-trained", 1.0, chunks) in entries
    first = encode(precomputed.FIRST_SENTENCE)  # Stretching's shift of the sidebar's first sentence, every offset
    assert all(precomputed.OFFSET.key_of(dict(ids=first, offset=offset)) in entries for offset in stretch.SHIFT_OFFSETS)


@needs_shipped
@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_sidecar_holds_every_sink_window_and_the_timeline(name):
    """Inside's sink test at every window its slider offers, on every text, and the Training timeline's views."""
    model, meta = checkpoints.load(name)
    entries = current_entries(name)
    listed = [view.key_of(p) for view, p in precomputed.entries(model, meta, views=(precomputed.SINK, precomputed.TIMELINE))]
    assert {key.rsplit("|", 1)[-1] for key in listed if key.startswith("sink|")} == {str(w) for w in streaming.WINDOWS}
    assert precomputed.TIMELINE.key_of({}) in listed
    assert [key[:80] for key in listed if key not in entries] == []


@needs_shipped
def test_the_untrained_sidecar_covers_every_scheme():
    entries = precomputed.load(precomputed.sidecar(precomputed.UNTRAINED), source_digest=precomputed.untrained_digest())
    story = precomputed.inside_texts(None)[precomputed.INSIDE_STORY]
    for scheme in SCHEMES:
        assert f"{scheme}|{precomputed.inside_key('probes', story)}" in entries, scheme
        for window in streaming.WINDOWS:
            assert f"{scheme}|{precomputed.inside_key('sink', story, window)}" in entries, (scheme, window)
        shift = precomputed.OFFSET.key_of(dict(ids=encode(precomputed.FIRST_SENTENCE), offset=stretch.SHIFT_OFFSET))
        assert f"{scheme}|{shift}" in entries
    ids = precomputed.story_ids()
    sliding = {}  # Length extrapolation's curve and its sliding baseline, for every untrained model
    for scheme in SCHEMES:
        window = lengths.training_length({}, untrained_model(scheme))
        sliding[scheme] = (f"{scheme}|{precomputed.SLIDING.key_of(dict(ids=ids, window=window))}", window)
        assert {f"{scheme}|{precomputed.curve_key(ids)}", sliding[scheme][0]} <= set(entries), scheme
    key, window = sliding["alibi"]  # one of them recomputed: the stored numbers are the model's
    np.testing.assert_allclose(precomputed.from_plain(entries[key]),
                               lengths.sliding_losses(untrained_model("alibi"), ids, window=window), rtol=0, atol=5e-5)


@pytest.mark.skipif("rope" not in SHIPPED, reason="checkpoints/rope.pt is not installed")
def test_a_sample_recomputes_to_the_stored_numbers():
    """The same analysis calls the CLI made, on the shipped RoPE model: a loss table under YaRN, the
    story's loss curve, the story's probes and the preset swap."""
    model, meta = checkpoints.load("rope")
    entries = current_entries("rope")
    chunks = precomputed.stretch_chunks(precomputed.STRETCH_STORY, meta)
    train_length = lengths.training_length(meta, model)
    key = precomputed.loss_key("yarn", 4.0, chunks)
    fresh = stretch.chunk_losses(model, chunks, rope_scaling=RopeScaling("yarn", 4.0, train_length))
    same(fresh, precomputed.from_plain(entries[key]), exact=False)
    ids = precomputed.story_ids()
    same(lengths.loss_along_text(model, ids), precomputed.from_plain(entries[precomputed.curve_key(ids)]), exact=False)
    story = precomputed.inside_texts(None)[precomputed.INSIDE_STORY]
    text = probes.probe_text({name: list(p) for name, p in story}, model=model)
    same(probes.position_probes(model, text),
         precomputed.from_plain(entries[precomputed.inside_key("probes", story)]), exact=False)
    original, shuffled = precomputed.shuffle_pairs()[0]
    same(shuffle.shuffle_experiment(model, original, shuffled=shuffled),
         precomputed.from_plain(entries[precomputed.shuffle_key(original, shuffled)]), exact=False)
    first = encode(precomputed.FIRST_SENTENCE)
    for offset in (1, stretch.SHIFT_OFFSET, stretch.SHIFT_OFFSETS[-1]):
        assert entries[precomputed.OFFSET.key_of(dict(ids=first, offset=offset))] == pytest.approx(
            stretch.offset_change(model, first, offset=offset), rel=1e-4, abs=1e-5)


# --- the pages read them -------------------------------------------------------------------------

def refusing(function):
    """`function` that raises when called; it keeps its name, so a recipe that names it still builds."""
    @functools.wraps(function)
    def refuse(*args, **kwargs):
        raise AssertionError(f"a page computed {function.__name__}, a view the shipped models have precomputed")
    return refuse


@pytest.fixture
def no_recomputing(monkeypatch):
    """Every heavy analysis call a page could make for a shipped model raises; caches start empty."""
    st.cache_data.clear()
    st.cache_resource.clear()
    for module, name in ((stretch, "chunk_losses"), (stretch, "attention_profile"), (probes, "position_probes"),
                         (heads, "head_portraits"), (streaming, "sink_test"), (lengths, "loss_along_text"),
                                 (coverage, "loss_by_position"), (stretch, "offset_change")):
        monkeypatch.setattr(module, name, refusing(getattr(module, name)))
    yield
    st.cache_data.clear()
    st.cache_resource.clear()


@needs_shipped
@pytest.mark.parametrize("name", ["learned", "learned-32"])
def test_the_loss_by_position_recomputes_to_the_stored_numbers(name):
    """The Length extrapolation page's second limit: each table model's mean loss at every position,
    on every text it can read (held-out stories when the corpus is here, the built-in story)."""
    if name not in SHIPPED:
        pytest.skip(f"checkpoints/{name}.pt is not installed")
    model, meta = checkpoints.load(name)
    entries = current_entries(name)
    length = model.config.block_size
    for stream, _ in coverage.position_loss_streams(meta, length=length):
        fresh = coverage.loss_by_position(model, stream, length=length, max_windows=coverage.POSITION_WINDOWS)
        same(fresh, precomputed.from_plain(entries[precomputed.position_loss_key(stream, length)]), exact=False)


@pytest.mark.slow  # every page, an AppTest run each
@pytest.mark.skipif("rope" not in SHIPPED, reason="checkpoints/rope.pt is not installed")
@pytest.mark.parametrize("page, model", [*((page, "rope") for page in PAGES), (page_named("lengths"), "learned-32")],
                         ids=lambda value: getattr(value, "name", value))
def test_pages_read_the_precomputed_views(no_recomputing, page, model):
    """Every page at its view (its own controls kept: the model chosen here), on a shipped model."""
    controls = {key: value for key, value in page.view_query().items() if key not in ("scheme", "model")}
    at = app_test(page=page.file, model=model, timeout=300, **controls)
    assert not at.exception, at.exception
    said = [e.value for e in (*at.warning, *at.info, *at.error)]
    assert bool(at.get("plotly_chart")) == page.charts_on_open, said  # the Lab draws once a run has trained
    if page.name == "inside":
        for tab in ("Head portraits", "The sink, tested"):
            at.session_state["inside_tab"] = tab
            at.run()
            assert not at.exception, at.exception


# --- a learner's model from a shared folder: computed when asked, kept for the next student ---------

@pytest.fixture
def long_model_folder(tmp_path, monkeypatch):
    """A small random model with the seed model's block (1,024 rows) and 8 heads, in a shared folder;
    a second file says it was trained 0 steps. Shared-folder views are kept under tmp_path/cache."""
    from lpos.model import GPT, GPTConfig

    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layer=2, n_head=8, n_embd=64, block_size=1024, position="learned")).eval()
    checkpoints.save(model, {"steps": 300}, tmp_path / "long.pt")
    checkpoints.save(model, {"steps": 0}, tmp_path / "fresh.pt")
    monkeypatch.setenv("LPOS_CHECKPOINT_DIR", str(tmp_path))
    monkeypatch.setenv("LPOS_VIEW_CACHE", str(tmp_path / "cache"))
    st.cache_data.clear()
    st.cache_resource.clear()
    yield tmp_path
    st.cache_data.clear()
    st.cache_resource.clear()


def words(at) -> str:
    return " ".join([m.value for m in at.markdown] + [c.value for c in at.caption] + [i.value for i in at.info])


@pytest.mark.slow  # scores a 1,024-token model's views, then reads them back in AppTest
def test_a_shared_model_is_scored_once_and_kept_on_disk(long_model_folder, monkeypatch):
    at = app_test(page="pages/lengths.py", model="dir:long.pt", scheme="learned", timeout=300)
    assert not at.exception, at.exception
    kept = list((long_model_folder / "cache").glob("*.views.pt"))
    assert len(kept) == 1  # the story's loss curve, by the file's digest
    st.cache_data.clear()
    st.cache_resource.clear()  # a new server: only the disk remembers
    monkeypatch.setattr(lengths, "loss_along_text", refusing(lengths.loss_along_text))
    at = app_test(page="pages/lengths.py", model="dir:long.pt", scheme="learned", timeout=300)
    assert not at.exception, at.exception
    assert "token_losses" in " ".join(c.proto.id for c in at.get("plotly_chart"))


def test_sentences_with_a_1024_token_model(long_model_folder):
    at = app_test(page="pages/lengths.py", model="dir:long.pt", scheme="learned", timeout=300)
    text = words(at)
    scoring = [c.value for c in at.caption if c.value.startswith("Scoring the first")]
    assert scoring and not any("training length" in c for c in scoring)  # 1,024 is not 8× this model's 1,024
    assert "dashed" not in text.split("Faint:")[1]  # the story fits in 1,024: no edge line is drawn or mentioned
    assert "no line marks the edge" in text
    at = app_test(page="pages/shuffle.py", model="dir:long.pt", scheme="learned", timeout=300)
    assert not at.exception, at.exception
    heads = at.button_group(key="shuffle_head")
    assert len(heads.options) == 8  # every head of the 8-head model, though the shipped `none` beside it has 4
    heads.set_value(6).run()
    assert not at.exception, at.exception
    assert any("has 4 heads (1 to 4): it has no head 7" in i.value for i in at.info)


@pytest.mark.skipif(not SHIPPED, reason="the lesson's step 9 reads the shipped model cards")
def test_lesson_step_9_uses_the_shipped_models_training_length(long_model_folder):
    at = app_test(page="pages/lesson.py", model="dir:long.pt", scheme="learned", step="9", timeout=300)
    assert not at.exception, at.exception
    text = words(at)
    assert "from 1024 to 1024" not in text and "(1024 tokens) the loss" not in text
    assert "At the training length (128 tokens)" in text


def test_a_file_that_says_0_steps_is_untrained(long_model_folder):
    at = app_test(page="pages/lengths.py", model="dir:fresh.pt", scheme="learned", timeout=300)
    assert not at.exception, at.exception
    assert "An untrained model guesses uniformly" in words(at)
    at = app_test(page="pages/lengths.py", model="dir:long.pt", scheme="learned", timeout=300)
    assert "An untrained model guesses uniformly" not in words(at)


@pytest.mark.slow  # computes a shipped model's views twice
def test_precompute_of_some_views_keeps_the_others(tmp_path, monkeypatch):
    """`python -m lpos precompute --views position_loss` adds the learned table's loss by position to a sidecar
    without recomputing (or losing) what it already holds."""
    monkeypatch.setattr(precomputed, "source_digest", lambda name: "digest")
    path = precomputed.sidecar("learned", tmp_path)
    precomputed.save_plain({"kept": 1.5}, path, source_digest="digest")
    view = precomputed.POSITION_LOSS
    written = precomputed.precompute(["learned"], folder=tmp_path, views=(view,), progress=lambda _: None)
    assert written == [path] and not view.untrained  # no untrained file: not a view of the untrained models
    entries = precomputed.load(path, source_digest="digest")
    model, meta = checkpoints.load("learned")
    asked = [parameters for _, parameters in precomputed.entries(model, meta, views=(view,))]
    assert asked and set(entries) == {"kept", *(view.key_of(parameters) for parameters in asked)}
    np.testing.assert_allclose(precomputed.from_plain(entries[view.key_of(asked[0])]), view.compute(model, **asked[0]),
                               rtol=0, atol=5e-5)
