"""The app lets go of idle models: above LPOS_MODEL_MEMORY_MB, the offered models no run has asked for in
IDLE_SECONDS go at a run's start (lpos.ui.models.release_idle_models); the policy's own tests: tests/tools/test_resident.py."""
from __future__ import annotations

import gc
import weakref

import pytest

from conftest import app_test
from test_resident import Clock
from lpos import resident, settings
from lpos.ui import models


@pytest.fixture
def fresh_last_use(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(models, "_LAST_USE", resident.LastUse(models.IDLE_SECONDS, clock))
    return clock


def test_the_app_lets_go_of_a_model_left_idle_and_loads_it_again_when_asked(monkeypatch, fresh_last_use):
    monkeypatch.setenv(settings.MODEL_MEMORY_MB, "1")  # every process holds more: idle models go
    at = app_test(page="pages/embeddings.py", scheme="alibi", model="alibi")
    assert not at.exception
    alibi = weakref.ref(models.load_offered("alibi")[0])
    fresh_last_use.now += models.IDLE_SECONDS - 1
    at.run()  # alibi was asked for 29 s ago: kept
    assert alibi() is models.load_offered("alibi")[0]

    at.selectbox(key="scheme").set_value("t5").run()  # the sidebar's model follows: t5 (its callback read alibi's scheme)
    assert not at.exception and at.selectbox(key="model").value == "t5"
    fresh_last_use.now += models.IDLE_SECONDS + 1
    at.run()  # 31 s later: alibi (and t5, idle as long) let go of at the run's start, t5 loaded again by the page
    assert not at.exception
    gc.collect()
    assert alibi() is None  # no session or cache held it any more
    t5 = models.load_offered("t5")[0]
    assert t5.config.position == "t5"

    at.selectbox(key="scheme").set_value("alibi").run()  # asked for again: loaded again, the same weights
    assert not at.exception and at.selectbox(key="model").value == "alibi"
    again = models.load_offered("alibi")[0]
    assert again.config.position == "alibi" and again is not alibi()


def test_the_app_keeps_every_model_while_it_holds_less_than_the_limit(monkeypatch, fresh_last_use):
    monkeypatch.setenv(settings.MODEL_MEMORY_MB, "1000000")
    at = app_test(page="pages/embeddings.py", scheme="alibi", model="alibi")
    alibi = models.load_offered("alibi")[0]
    fresh_last_use.now += 10 * models.IDLE_SECONDS
    at.selectbox(key="scheme").set_value("t5").run()
    assert not at.exception and models.load_offered("alibi")[0] is alibi
