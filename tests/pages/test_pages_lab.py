"""AppTest runs of the Lab page: the form for every task, a run trained in a worker process that the page follows
until it ends, then the length chart, the sentences, the download and the sidebar's Model box offering the run."""
from __future__ import annotations

import time

import pytest

from conftest import app_test
from lpos.lab.tasks import TASK_NAMES

LAB = "pages/lab.py"


@pytest.mark.parametrize("task", TASK_NAMES)
def test_the_form_describes_each_task(task):
    at = app_test(page=LAB)
    assert not at.exception
    at.selectbox(key="lab_task").set_value(task).run()
    assert not at.exception
    assert at.button(key="lab_start")
    if task == "text":
        assert at.radio(key="lab_text_source").value == "the built-in story"


def test_a_run_trains_in_a_worker_and_joins_the_model_box():
    at = app_test(page=LAB)
    at.selectbox(key="lab_task").set_value("copy")
    at.selectbox(key="lab_scheme").set_value("rope")
    at.select_slider(key="lab_window").set_value(16)
    at.number_input(key="lab_steps").set_value(20)
    at.button(key="lab_start").click().run()
    assert not at.exception
    deadline = time.monotonic() + 240
    while not at.get("plotly_chart") or "lab_lengths" not in [c.proto.id.rsplit("-", 1)[-1] for c in at.get("plotly_chart")]:
        assert time.monotonic() < deadline, [m.value for m in at.markdown]
        time.sleep(1)
        at.run()
        assert not at.exception
    assert any(m.value.startswith("- rope: ") and "at 16 tokens (its window)" in m.value for m in at.markdown)
    offered = at.selectbox(key="model").options
    assert any("lab-rope-copy-16.pt" in option for option in offered), offered
    assert at.get("download_button")


def test_the_form_says_when_a_scheme_computes_what_another_does_at_that_size():
    at = app_test(page=LAB)
    at.selectbox(key="lab_scheme").set_value("rnope").run()
    said = [info.value for info in at.info]
    assert any("At the tiny size (2 layers), the rnope model computes exactly what the rope model" in s for s in said), said
    at.selectbox(key="lab_preset").set_value("shipped").run()
    assert not any("computes exactly what" in info.value for info in at.info)
    at.selectbox(key="lab_scheme").set_value("alibi").run()
    assert not any("computes exactly what" in info.value for info in at.info)
