"""AppTest runs of the learned table's second limit with the shipped learned-32 model (trained on
windows of at most 32 tokens): Similarity's row drift, Length extrapolation's loss by position,
the Training timeline's split band and the Lesson's step on the table's limits, each sentence
checked against the analysis it is written from, for more than one slider value."""
from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from conftest import app_test
from lpos import checkpoints
from lpos.analysis import coverage

SHORT = "learned-32"
pytestmark = pytest.mark.skipif(not {SHORT, "learned"} <= set(checkpoints.available()),
                                reason="needs checkpoints/learned-32.pt and learned.pt")


def charts(at) -> dict[str, dict]:
    return {c.proto.id.rsplit("-", 1)[-1]: json.loads(c.proto.spec) for c in at.get("plotly_chart")}


def values(data) -> np.ndarray:
    """A Plotly array from a chart's JSON: a list, or {"dtype", "bdata"} (base64 of the raw values)."""
    if isinstance(data, dict):
        return np.frombuffer(base64.b64decode(data["bdata"]), dtype=data["dtype"])
    return np.asarray(data)


def text_of(at) -> str:
    return " ".join([m.value for m in at.markdown] + [c.value for c in at.caption])


@pytest.fixture(scope="module")
def drift():
    model, meta = checkpoints.load(SHORT)
    return coverage.row_drift(model, meta)


def test_the_model_box_says_what_it_is():
    at = app_test(page="pages/similarity.py", scheme="learned", model=SHORT)
    assert not at.exception
    box = at.selectbox(key="model")
    assert box.value == SHORT and at.selectbox(key="scheme").value == "learned"
    assert "learned-32 (learned, trained on windows of ≤ 32 tokens, shipped)" in box.options


def test_similarity_shows_rows_never_trained(drift):
    at = app_test(page="pages/similarity.py", scheme="learned", model=SHORT)
    assert not at.exception
    assert "sim_coverage" in charts(at)
    text = text_of(at)
    for line in coverage.drift_reading(drift, upto=128):
        assert line in text
    assert "**Rows 32–127**, never read in training (windows of at most 32 tokens): direction kept" in text
    untrained = drift.rows[~drift.rows.trained]
    assert f"×{untrained.norm_ratio.min():.3f}" in text
    assert "raise it past 32" not in text

    at.slider(key="sim_length_128").set_value(20).run()  # only rows that trained are shown
    assert not at.exception
    text = text_of(at)
    assert "never read in training" not in text and "**Rows 0–19**, read in every training batch" in text
    assert "The slider shows 20 rows: raise it past 32 to see the rows that never trained." in text
    figure = charts(at)["sim_coverage"]
    assert max(values(t["x"]).max() for t in figure["data"]) == 19


def test_similarity_of_the_full_window_model_points_to_it():
    at = app_test(page="pages/similarity.py", scheme="learned", model="learned")
    assert not at.exception
    assert "sim_coverage" not in charts(at)
    assert ("Every row of this table was read in every training batch (windows of 128 tokens). Pick learned-32 "
            "(learned, trained on windows of ≤ 32 tokens, shipped) in the sidebar") in text_of(at)


@pytest.mark.parametrize("model", [SHORT, "rope"])
def test_extrapolation_compares_loss_by_position(model):
    at = app_test(page="pages/lengths.py", model=model)
    assert not at.exception
    figure = charts(at)["coverage_position_loss"]
    assert [t["name"] for t in figure["data"]] == [SHORT, "learned"]
    assert all(len(values(t["y"])) == 128 for t in figure["data"])
    text = text_of(at)
    assert "learned-32 on windows of at most 32" in text
    assert "At positions 32–127, read through rows that never trained, **learned-32** averages" in text
    if model == SHORT:  # its live view marks its own training window
        assert "Mean loss over the first 32 predictions" in text


def test_timeline_replays_the_table_forming_in_its_first_rows():
    meta = checkpoints.load(SHORT)[1]
    steps, tables = meta["timeline"]["steps"], meta["timeline"]["position_rows"].float().numpy()
    at = app_test(page="pages/timeline.py", scheme="learned", model=SHORT)
    assert not at.exception
    assert coverage.timeline_coverage_reading(steps, tables, 32) in text_of(at)
    for index in (0, len(steps) // 2):
        at.select_slider(key="timeline_step").set_value(steps[index]).run()
        assert not at.exception
        split = coverage.split_band(tables[index], 32)
        assert (f"At step {steps[index]}, neighbouring rows among rows 0–31 have cosine {split['trained']:.2f}; among "
                f"rows 32 and after, which training never read, {split['untrained']:.2f}.") in text_of(at)
    last = coverage.split_band(tables[-1], 32)
    assert last["trained"] > last["untrained"] + 0.3  # the band formed only where training reads


@pytest.mark.parametrize("model", [SHORT, "learned"])
def test_lesson_names_both_limits(model, drift):
    at = app_test(page="pages/lesson.py", step="4", scheme="learned", model=model)
    assert not at.exception
    assert "lesson_figure_4" in charts(at)
    text = text_of(at)
    assert "A learned table has two limits" in " ".join(h.value for h in at.header)
    assert "First limit: at 129 tokens the model answers" in text
    assert "Second limit, learned-32 (learned, trained on windows of ≤ 32 tokens, shipped):" in text
    assert coverage.drift_reading(drift)[1] in text
