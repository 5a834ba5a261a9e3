"""Length extrapolation's live view with AppTest: a pasted story read by a short-window table model."""
from __future__ import annotations

import json

import pytest
from conftest import app_test
from test_analysis_lengths import STORY_140

from lpos import checkpoints


def live_view(model: str, scheme: str):
    at = app_test(page="pages/lengths.py", scheme=scheme, model=model, timeout=300)
    at.radio(key="extrapolation_source").set_value("paste").run()
    at.text_area(key="extrapolation_text").set_value(STORY_140).run()
    assert not at.exception, at.exception
    chart = next(c for c in at.get("plotly_chart") if c.proto.id.endswith("token_losses"))
    return at, json.loads(chart.proto.spec)


@pytest.mark.skipif("learned-32" not in checkpoints.available(), reason="learned-32 is not installed")
def test_learned_32_draws_the_sliding_window_it_compares_with():
    at, figure = live_view("learned-32", "learned")
    names = [trace.get("name", "") for trace in figure["data"]]
    assert any("sliding 32-token window" in name for name in names)  # drawn and named, though the table ends at 128
    caption = next(c.value for c in at.caption if c.value.startswith("Faint:"))
    assert "the dotted one" in caption and "table ends (128 rows)" in caption
    reading = " ".join(m.value for m in at.markdown)
    assert "(a sliding 32-token window, so no position past 31)" in reading and "changes their loss by" in reading
