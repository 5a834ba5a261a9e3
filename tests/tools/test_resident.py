"""lpos.resident: which loaded models have gone idle, and letting go of them while the process holds too much."""
from __future__ import annotations

import pytest

from lpos import resident


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_idle_models_are_released_least_recently_used_first_until_the_process_holds_little_enough():
    clock, held = Clock(), {"mb": 650.0}
    last_use = resident.LastUse(30, clock)
    for key in ("a", "b", "c"):
        last_use.used(key)
        clock.now += 10
    last_use.used("a")  # asked for again: now the most recent
    clock.now += 25  # b idle 45 s, c 35 s, a 25 s
    assert last_use.idle() == ["b", "c"]

    def release(key):
        held["mb"] -= 100

    measure = lambda: held["mb"]  # noqa: E731
    assert resident.release_idle(last_use, release, limit_mb=550, held_mb=measure) == ["b"]  # then 550 MB: enough
    assert last_use.idle() == ["c"]
    held["mb"] = 700.0
    assert resident.release_idle(last_use, release, limit_mb=550, held_mb=measure) == ["c"]
    assert held["mb"] == 600 and last_use.idle() == []  # "a" is in use, however much is held
    clock.now += 5
    assert last_use.idle() == ["a"]


def test_a_process_under_the_limit_releases_nothing():
    clock = Clock()
    last_use = resident.LastUse(30, clock)
    last_use.used("a")
    clock.now += 60
    assert resident.release_idle(last_use, pytest.fail, limit_mb=10_000, held_mb=lambda: 9_999.0) == []


def test_memory_mb_reads_this_process():
    held = resident.memory_mb()
    assert 10 < held < 100_000
