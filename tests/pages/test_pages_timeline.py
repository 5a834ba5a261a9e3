"""AppTest runs of the Training timeline page: every shipped model replays its snapshots, the step
control redraws what it drives, and a model without a timeline says so."""
from __future__ import annotations

import json

import pytest

from conftest import SCHEMES, app_test
from lpos import checkpoints

TIMELINE = "pages/timeline.py"
FIGURES = {"timeline_loss", "timeline_map", "timeline_band", "timeline_repeated", "timeline_attention_0",
           "timeline_attention_1"}


def charts(at) -> dict[str, dict]:
    return {c.proto.id.rsplit("-", 1)[-1]: json.loads(c.proto.spec) for c in at.get("plotly_chart")}


@pytest.mark.parametrize("scheme", [pytest.param(s, marks=pytest.mark.skipif(
    s not in checkpoints.available(), reason=f"checkpoints/{s}.pt is not shipped")) for s in SCHEMES])
def test_every_shipped_model_replays_its_snapshots(scheme):
    steps = checkpoints.load(scheme)[1]["timeline"]["steps"]
    at = app_test(page=TIMELINE, scheme=scheme, model=scheme)
    assert not at.exception
    drawn = charts(at)
    assert FIGURES <= set(drawn), sorted(drawn)
    assert drawn["timeline_loss"]["layout"]["title"]["text"].startswith(f"Validation loss, step {steps[-1]}:")
    at.select_slider(key="timeline_step").set_value(steps[0]).run()
    assert not at.exception
    drawn = charts(at)
    assert drawn["timeline_loss"]["layout"]["title"]["text"].startswith(f"Validation loss, step {steps[0]}:")
    assert drawn["timeline_map"]["layout"]["title"]["text"].startswith(f"Step {steps[0]}:")
    if scheme == "learned":
        assert any("At step 0 the rows are random" in m.value for m in at.markdown)


def test_probe_word_and_animation():
    at = app_test(page=TIMELINE, scheme="learned", model="learned")
    at.selectbox(key="timeline_word").set_value("dog").run()
    assert not at.exception
    table = at.dataframe[0].value
    assert len(table) == 8 and "␣dog" not in list(table["token"])
    at.toggle(key="timeline_play").set_value(True).run()
    animation = charts(at)["timeline_animation"]
    assert len(animation["frames"]) == len(checkpoints.load("learned")[1]["timeline"]["steps"])


@pytest.mark.parametrize("scheme", ["learned", "rope"])
def test_untrained_model_has_no_timeline(scheme):
    at = app_test(page=TIMELINE, scheme=scheme, model="untrained")
    assert not at.exception
    assert any("has no training timeline" in i.value for i in at.info)
    assert not charts(at)
