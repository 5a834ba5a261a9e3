"""The opt-in script-thread profiler (lpos/ui/profiling.py), the page profiler's ranking
(lpos/bench/profile_pages.py), and the Inside page's text key (lpos/ui/inside.py)."""
from __future__ import annotations

import threading
import time

import pytest

from lpos.bench import profile_pages
from lpos.ui import inside
from lpos.ui.profiling import PROFILE_ENV, profiled, report_path


def busy(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        sum(range(1000))


def test_without_the_variable_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.delenv(PROFILE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    with profiled("Some page"):
        busy(0.01)
    assert list(tmp_path.iterdir()) == []


def test_one_report_per_run_sampling_the_thread_that_ran_it(tmp_path, monkeypatch):
    """Run in another thread, as the server and AppTest run a script: the report sees its work."""
    folder = tmp_path / "profiles"
    monkeypatch.setenv(PROFILE_ENV, str(folder))

    def script() -> None:
        with profiled("Inside the model"):
            busy(0.05)

    for _ in range(2):
        worker = threading.Thread(target=script)
        worker.start()
        worker.join()
    reports = sorted(folder.glob("*.txt"))
    assert len(reports) == 2 and len(list(folder.glob("*.pyisession"))) == 2
    assert all(r.name.startswith("Inside_the_model-") for r in reports)
    text = reports[0].read_text()
    assert text.startswith("page: Inside the model\n") and "busy" in text


def test_report_path_is_safe_and_ordered(tmp_path):
    first = report_path(tmp_path, "RoPE & ALiBi / in attention", now=1_700_000_000.0)
    later = report_path(tmp_path, "RoPE & ALiBi / in attention", now=1_700_000_000.5)
    assert first.parent == tmp_path and first.name.startswith("RoPE_ALiBi_in_attention-20231114T")
    assert first.suffix == ".txt" and first.name < later.name


def test_top_functions_rank_own_code_once_per_path(tmp_path, monkeypatch):
    from pyinstrument import Profiler

    monkeypatch.setattr(profile_pages, "OWN", (__file__,))
    profiler = Profiler(interval=0.001, async_mode="disabled")
    profiler.start()
    busy(0.05)
    session = profiler.stop()
    own = dict(profile_pages.top_functions([session], own=True, count=5))
    assert {name.split(" ")[0] for name in own} == {"test_top_functions_rank_own_code_once_per_path", "busy"}
    assert all(50 < share <= 100 for share in own.values())  # % of the samples, inclusive: the test holds busy
    assert profile_pages.top_functions([session], own=False)  # self time: any code


def test_a_function_that_holds_the_whole_run_has_exactly_100_percent(monkeypatch):
    """Sampled times whose float product 0.003 * (100 / 0.003) rounds above 100 (the test above failed so, about one
    run in fourteen): a share is the frame's time over the run's, then scaled."""
    from types import SimpleNamespace

    monkeypatch.setattr(profile_pages, "OWN", ("/own/",))

    def frame(function, time, children=()):
        return SimpleNamespace(function=function, file_path_short="own.py", line_no=1, file_path=f"/own/{function}.py",
                               time=time, total_self_time=0.0, is_synthetic=False, children=list(children))

    session = SimpleNamespace(root_frame=lambda trim_stem: frame("outer", 0.003, [frame("inner", 0.003)]))
    assert 0.003 * (100 / 0.003) > 100  # what the old formula gave
    assert dict(profile_pages.top_functions([session], own=True)) == {"outer (own.py:1)": 100.0, "inner (own.py:1)": 100.0}


def test_text_key_names_the_ids_by_a_short_digest():
    story = ("story", tuple(range(5000)))
    assert inside.text_key((story,)) == inside.text_key((("story", tuple(range(5000))),))
    assert inside.text_key((story,)) != inside.text_key((("story", tuple(range(1, 5001))),))
    assert inside.text_key((story,)) != inside.text_key((story, ("held-out", (1, 2, 3))))
    # what the cache hashes is three short fields per text, however many ids the text has
    (name, length, digest), = inside.text_key((story,))
    assert (name, length, len(digest)) == ("story", 5000, 32)


@pytest.mark.parametrize("page", ["lesson"])
def test_profile_pages_runs_a_page(tmp_path, page, capsys):
    assert profile_pages.main(["--runs", "1", "--page", page, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"pages/{page}.py: CPU per new sentence median" in out and "FAILED" not in out
    assert list((tmp_path / page).glob("*.txt"))
