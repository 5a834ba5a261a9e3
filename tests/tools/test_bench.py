"""`python -m lpos bench`: its pure parts on numbers, the quick run end to end (a smoke test, not a timing assertion)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import torch

from conftest import ROOT
from lpos.pages import PAGES
from lpos import bench

PAGE_NAMES = {page.name for page in PAGES}  # the bench keys its results by page name


def test_spread_is_median_and_range():
    assert bench.spread([5.0, 1.0, 3.0, 100.0]) == {"median": 4.0, "min": 1.0, "max": 100.0, "n": 4}


def test_synthetic_corpus_uses_exactly_the_requested_vocabulary():
    corpus = bench.synthetic_corpus(tokens=20_000, vocab=300, seed=3)
    assert len(corpus.train) + len(corpus.val) == 20_000
    words = torch.unique(torch.cat([corpus.train, corpus.val]))
    assert len(words) == 300 and int(words.max()) < 50257
    again = bench.synthetic_corpus(tokens=20_000, vocab=300, seed=3)
    assert torch.equal(corpus.train, again.train)


def test_evaluation_speed_is_measured_only_where_the_scheme_reaches():
    learned = bench.evaluation_speed(scheme="learned", lengths=(64, 256), tokens=600, vocab=50)
    assert learned["tokens_per_s"][64] > 0
    assert learned["tokens_per_s"][256] is None  # a learned table stops at 128 rows


def test_table_flags_pages_over_the_goal():
    stat = lambda ms: {"median": ms, "min": ms, "max": ms, "n": 1}  # noqa: E731
    page = lambda ms: {"first_draw_ms": 900.0, "sentence_ms": stat(ms), "scheme_ms": stat(ms),  # noqa: E731
                       "sentence_ratio": ms / 100, "scheme_ratio": ms / 100, "server_share": stat(0.5),
                       "interaction_ws_bytes": stat(2048), "load_ws_bytes": 4096, "load_http_bytes": 10240, "errors": 0}
    results = {"machine": bench.machine(), "runs": 1, "goal_ratio": 1.5,
               "model": {"train": [{"scheme": "learned", "tokens_per_s": 1234.0, "steps": 3, "vocab": 10}],
                         "eval": {"scheme": "sinusoidal", "tokens_per_s": {128: 5000.0, 1024: 4000.0}}},
               "app": {"floor": {"sentence_ms": stat(100.0), "scheme_ms": stat(100.0)},
                       "pages": {"fast": page(140.0), "slow": page(400.0)},
                       "cold_start": {"first_page_ms": stat(5000.0), "after_model_switch_ms": stat(800.0)},
                       "similarity_1024": None,
                       "memory": {"peak_rss_mb": 700.0, "limit_mb": 690, "models_loaded": ["learned"], "end_rss_mb": 650.0,
                                  "sessions_at_once": 3, "sessions_drawn": 3}}}
    text = bench.table(results)
    fast, slow = (next(line for line in text.splitlines() if line.startswith(name)) for name in ("fast", "slow"))
    assert "over goal" not in fast and "1.40" in fast
    assert slow.endswith("over goal") and "4.00" in slow
    assert "1,234 tokens/s" in text and "OVER the 690 MB limit" in text
    assert "OVER the 4,000 ms goal" in text and "Page-local control" not in text  # no controls measured


def test_table_reports_controls_cpu_walk_and_idle_against_their_goals():
    stat = lambda ms: {"median": ms, "min": ms, "max": ms, "n": 1}  # noqa: E731
    page = {"first_draw_ms": 900.0, "sentence_ms": stat(200.0), "scheme_ms": stat(200.0), "sentence_ratio": 2.0,
            "scheme_ratio": 2.0, "server_share": stat(0.5), "interaction_ws_bytes": stat(2048), "load_ws_bytes": 4096,
            "load_http_bytes": 10240, "errors": 0}
    results = {"machine": bench.machine(), "runs": 1, "goal_ratio": 2.5,
               "model": {"train": [], "eval": {"scheme": "-", "tokens_per_s": {}},
                         "write": {"models": ["a", "b", "c", "d", "e"], "tokens": 256, "written": 1148, "threads": 1,
                                   "seconds": stat(3.4), "goal_s": 3.0}},
               "app": {"floor": {"sentence_ms": stat(100.0), "scheme_ms": stat(100.0), "sentence_cpu_ms": stat(10.0)},
                       "pages": {"light": {**page, "sentence_cpu_ms": stat(40.0)},
                                 "busy": {**page, "sentence_cpu_ms": stat(120.0)}},
                       "controls": {"light": {"control": "a slider", "ms": stat(120.0), "cpu_ms": stat(20.0), "ratio": 1.2,
                                              "errors": 0},
                                    "busy": {"control": "a button", "ms": stat(300.0), "cpu_ms": stat(90.0), "ratio": 3.0,
                                             "errors": 0}},
                       "cold_start": {"first_page_ms": stat(3000.0), "after_model_switch_ms": stat(500.0)},
                       "similarity_1024": None,
                       "memory": {"peak_rss_mb": 600.0, "limit_mb": 690, "models_loaded": ["learned"], "end_rss_mb": 500.0,
                                  "sessions_at_once": 3, "sessions_drawn": 3},
                       "walk": {"pages": 7, "schemes": 5, "seconds": 60.0, "peak_rss_mb": 700.0, "end_rss_mb": 600.0},
                       "idle": {"rss_mb": 450.0, "settle_s": 5.0}}}
    lines = bench.table(results).splitlines()
    row = lambda start: next(line for line in lines if line.startswith(start))  # noqa: E731
    assert "over goal" not in row("light") and row("busy").endswith("over goal")  # 120 ms of CPU > 80
    controls = [line for line in lines if "ratio" in line and ("a slider" in line or "a button" in line)]
    assert "over goal" not in controls[0] and controls[1].endswith("over goal")
    text = "\n".join(lines)
    assert "within the 4,000 ms goal" in text and "peak 700 MB (OVER 690 MB)" in text and "450 MB (within 500 MB)" in text
    assert "5 models x 256 tokens (1,148 written" in text and "3.40 s [3.40–3.40] (OVER the 3 s goal)" in text


def test_plotly_react_table_gives_each_variant_its_ratio():
    from lpos.bench.plotly_react import report

    def measured(ms, ratio):
        return {"ms": bench.spread([ms, ms + 20.0]), "cpu_ms": bench.spread([90.0]), "ratio": ratio}

    lines = report({"embeddings": {"new sentence": {"st.plotly_chart": measured(400.0, 1.0), "in place": measured(200.0, 0.5)}},
                    "sinusoids": {"Width slider, one step": {"st.plotly_chart": measured(300.0, 1.0),
                                                             "in place": measured(150.0, 0.48)}},
                    "lesson": {"Next button": {"error": "no script run finished within 300 s"}}})
    rows = [" ".join(line.split()) for line in lines[1:5]]
    assert rows[0].startswith("embeddings new sentence st.plotly_chart 410 (400-420) 1.00 90")
    assert rows[1].startswith("embeddings new sentence in place 210 (200-220) 0.50 90")
    assert rows[3].startswith("sinusoids Width slider, one step in place 160 (150-170) 0.48 90")
    assert " ".join(lines[5].split()) == "lesson Next button not measured: no script run finished within 300 s"
    assert "2 runs per page, use and variant" in lines[-1]


def test_floors_table_gives_each_shape_its_ratio_against_the_bare_page():
    from lpos.bench.floors import report

    lines = report({"bare": bench.spread([40.0, 50.0]), "goal_ratio": 2.5,
                    "shapes": [{"elements": 10, "charts": 0, "ms": bench.spread([80.0]), "ratio": 1.78},
                               {"elements": 40, "charts": 3, "ms": bench.spread([150.0, 170.0]), "ratio": 3.56}]})
    assert "the bare page's 45 ms (median of 2, before and after)" in lines[0]
    assert " ".join(lines[2].split()) == "10 0 80 (80-80) 1.78"
    assert " ".join(lines[3].split()) == "40 3 160 (150-170) 3.56 over the pages' goal"


@pytest.mark.slow
@pytest.mark.browser
def test_a_floor_shape_page_draws_its_lines_and_charts_and_each_sentence_redraws_them(tmp_path):
    """The pages `--floors` times are what their rows say: that many lines of text and charts drawn in place,
    every chart redrawn by a new sentence, no exception."""
    from lpos.bench.browser import Server, Tab, chromium
    from lpos.bench.floors import shape_app

    with chromium() as browser, Server(shape_app(tmp_path, 6, 2), tmp_path / "shape.log") as server:
        tab = Tab(browser)
        assert tab.open(server.url, timeout=300)["errors"] == 0
        counted = tab.page.evaluate("""() => {
            const elements = [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stElementContainer"]')];
            return {lines: elements.filter(e => !e.querySelector('.lpos-plotly')).length,
                    charts: document.querySelectorAll('.lpos-plotly[data-drawn]').length}; }""")
        assert counted == {"lines": 6, "charts": 2}
        drawn = {key: digest for key, digest in tab.page.evaluate(
            "() => [...document.querySelectorAll('.lpos-plotly')].map(d => [d.dataset.key, d.dataset.drawn])")}
        changed = tab.new_sentence("Another sentence entirely", server=server)
        assert changed["errors"] == 0 and set(tab.charts_sent) == {"chart0", "chart1"}
        assert all(tab.charts_sent[key] != digest for key, digest in drawn.items())
        tab.close()


@pytest.mark.slow
@pytest.mark.browser
def test_an_action_is_timed_from_the_first_press_the_page_receives(tmp_path):
    """Playwright waits for a button to hold still before its click presses the mouse: that wait is measured
    (input_lag_ms) and left out of the action's time."""
    from lpos.bench.browser import Server, Tab, chromium

    app = tmp_path / "button.py"
    app.write_text('import streamlit as st\nif st.button("Press"):\n    st.write("pressed")\n')
    with chromium() as browser, Server(app, tmp_path / "button.log") as server:
        tab = Tab(browser)
        tab.open(server.url, timeout=300)
        began = time.perf_counter()
        pressed = tab.act(lambda: None, tab.page.get_by_role("button", name="Press").click)
        wall_ms = (time.perf_counter() - began) * 1000
        assert pressed["input_lag_ms"] > 0 and 0 < pressed["ms"] <= wall_ms - pressed["input_lag_ms"]
        assert tab.page.get_by_text("pressed").is_visible() and pressed["errors"] == 0
        tab.close()


def test_bench_without_chromium_says_what_to_install():
    result = subprocess.run([sys.executable, "-m", "lpos", "bench", "--quick"], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "LPOS_CHROMIUM": "/nonexistent/chromium"}, timeout=120)
    assert result.returncode == 2
    assert "Chromium not found at /nonexistent/chromium" in result.stderr and "--model-only" in result.stderr


def bench_json(*flags: str, timeout: float) -> dict:
    """`python -m lpos bench <flags> --json` run as a user runs it; its printed results."""
    result = subprocess.run([sys.executable, "-m", "lpos", "bench", *flags, "--json"], cwd=ROOT, capture_output=True,
                            text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


@pytest.mark.slow
@pytest.mark.browser
def test_quick_benchmark_reports_every_page():
    """`lpos bench --quick` end to end: every page once, the walk with one scheme's models (a smoke test: no timing
    asserted). Its goal, 5 minutes on an idle machine, is measured by timing the command alone (docs/PERFORMANCE.md);
    here it shares the machine with the other xdist worker, so the limit only stops a run that hangs."""
    data = bench_json("--quick", timeout=720)
    assert all(entry["tokens_per_s"] > 0 for entry in data["model"]["train"])
    assert data["model"]["eval"]["tokens_per_s"]["128"] > 0
    write = data["model"]["write"]
    assert len(write["models"]) == 5 and write["tokens"] * 4 < write["written"] <= write["tokens"] * 5
    assert write["seconds"]["median"] > 0
    app = data["app"]
    assert set(app["pages"]) == PAGE_NAMES
    assert app["floor"]["sentence_ms"]["median"] > 0 and app["floor"]["scheme_ms"]["median"] > 0
    for name, page in app["pages"].items():
        assert page["errors"] == 0, name
        assert page["first_draw_ms"] > 0 and page["load_http_bytes"] > 0 and page["load_ws_bytes"] > 0, name
        for kind in ("sentence", "scheme"):
            assert page[f"{kind}_ms"]["median"] > 0 and page[f"{kind}_ratio"] > 0, name
    assert app["similarity_1024"]["positions"] == 1024 and app["similarity_1024"]["ms"]["median"] > 0
    assert app["cold_start"]["first_page_ms"]["median"] > app["cold_start"]["after_model_switch_ms"]["median"] > 0
    assert app["memory"]["peak_rss_mb"] > 100 and app["memory"]["sessions_drawn"] == app["memory"]["sessions_at_once"]
    assert app["floor"]["sentence_cpu_ms"]["n"] > 0 and all(p["sentence_cpu_ms"]["n"] > 0 for p in app["pages"].values())
    assert set(app["controls"]) <= PAGE_NAMES and all(c["errors"] == 0 and c["ms"]["median"] > 0
                                                      for c in app["controls"].values())
    assert app["walk"]["peak_rss_mb"] > 100 and app["idle"]["rss_mb"] > 100
    check_first_visits(data["first_visit"])


def check_first_visits(first: dict) -> None:
    """The first-visit sections ran on their one --quick page (a smoke test: no timing asserted)."""
    from lpos.bench.first_visit import QUICK_PAGE

    cold, big = first["cold_visits"], first["big_model"]
    assert set(cold["pages"]) == {QUICK_PAGE} and set(big["pages"]) == {QUICK_PAGE}
    assert cold["bare"]["server_cpu_s"] > 0 and cold["pages"][QUICK_PAGE]["errors"] == 0
    page = big["pages"][QUICK_PAGE]
    assert page["errors"] == 0 and 0 < page["first_content_ms"] <= page["page_ms"] and page["second_visit_ms"] > 0
    assert big["peak_rss_mb"] > 100


def test_first_visit_only_runs_the_first_visit_sections_alone(monkeypatch):
    """`bench --first-visit-only` runs neither the model side nor the app side, and its table gives the first-visit
    sections (the sections themselves run in test_quick_benchmark_reports_every_page)."""
    def not_run(**_):
        raise AssertionError("--first-visit-only ran another section")

    asked = {}
    measured = {"cold_visits": {"bare": {"server_cpu_s": 2.0, "page_ms": 900.0}, "models": 13,
                                "pages": {"lesson": {"extra_cpu_s": 0.4, "page_ms": 1500.0},
                                          "inside": {"extra_cpu_s": 1.6, "page_ms": 2500.0}}},
                "cold_visits_more": {"bare": {"server_cpu_s": 2.1, "page_ms": 950.0}, "models": 20,
                                     "pages": {"lesson": {"extra_cpu_s": 0.5, "page_ms": 1600.0}}},
                "big_model": {"peak_rss_mb": 650.0, "limit_mb": 690,
                              "pages": {"lesson": {"first_content_ms": 800.0, "page_ms": 2000.0, "server_cpu_s": 1.0,
                                                   "second_visit_ms": 400.0, "rss_after_mb": 600.0,
                                                   "peak_so_far_mb": 650.0}}}}
    monkeypatch.setattr(bench, "model_side", not_run)
    monkeypatch.setattr(bench, "app_side", not_run)
    monkeypatch.setattr(bench, "first_visit_side", lambda **kw: asked.update(kw) or measured)
    data = bench.run(quick=True, first_visit_only=True, progress=lambda _: None)
    assert "app" not in data and "model" not in data and data["first_visit"] == measured and asked["quick"]
    lines = bench.table(data).splitlines()
    row = lambda start: next(line for line in lines if line.strip().startswith(start))  # noqa: E731
    assert [line.split(" (")[0] for line in lines if line.startswith("First visit on a fresh server")] == [
        "First visit on a fresh server, 13 shipped models", "First visit on a fresh server, 20 shipped models"]
    assert "over goal" not in row("lesson") and row("inside").endswith("over goal by 0.60 s")  # +1.6 s > 1.0 s
    assert any(line.startswith("Seed-size model (45M) from a shared folder: peak RSS 650 MB (within") for line in lines)


@pytest.mark.parametrize("section", ["slow_paths", "cloud", "plotly_react", "floors", "lab"])
def test_a_section_flag_runs_that_section_alone_and_prints_its_report(monkeypatch, capsys, section):
    import importlib

    from lpos.cli import main

    module = importlib.import_module(f"lpos.bench.{section}")
    asked = {}
    monkeypatch.setattr(bench, "check_browser", lambda: None)  # no browser opens here
    monkeypatch.setattr(bench, "run", lambda **kw: pytest.fail("the whole bench ran"))
    monkeypatch.setattr(module, f"{section}_side", lambda **kw: asked.update(kw) or {"measured": section})
    monkeypatch.setattr(module, "report", lambda results: [f"report of {results['measured']}"])
    assert main(["bench", f"--{section.replace('_', '-')}", "--runs", "2"]) == 0
    assert asked["runs"] == 2 and capsys.readouterr().out == f"report of {section}\n"
    assert main(["bench", f"--{section.replace('_', '-')}", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[section] == {"measured": section}


def test_the_cloud_flag_with_the_memory_walk_walks_in_a_container_and_says_the_peak_beside_the_limit(monkeypatch, capsys):
    from lpos.bench import cloud
    from lpos.cli import main

    asked = {}
    monkeypatch.setattr(bench, "check_browser", lambda: None)
    monkeypatch.setattr(cloud, "cloud_side", lambda **kw: asked.update(kw) or {})
    assert main(["bench", "--cloud", "--memory-walk", "--json"]) == 0 and asked["walk"] is True
    asked.clear()
    assert main(["bench", "--cloud", "--json"]) == 0 and "walk" not in asked  # the walk only when asked for
    walked = {"models": ["rope", "t5"], "upload_mb": 172.3, "peak_rss_mb": 701.0, "limit_mb": 690,
              "rss_after_mb": {"every shipped model": 450.0, "the upload loaded": 640.0}, "oom_killed": False, "oom_kills": 0}
    lines = cloud.walk_lines(walked)
    assert lines[0].startswith("  Memory walk in its own container: every page with each of the 2 shipped models, then a "
                               "learner's upload (172 MB) on every page: peak 701 MB (goal < 690 MB: MISS); OOM kill: none")
    assert lines[1:] == ["    after every shipped model: 450 MB", "    after the upload loaded: 640 MB"]
    died = cloud.walk_lines({"died": {"error": "TimeoutError: page"}, "exit_code": 137, "oom_killed": True, "oom_kills": 1,
                             "peak_rss_mb": 689.6, "rss_after_mb": {"every shipped model": 450.0}})
    assert died == ["  Memory walk: MISS, the container stopped (exit code 137, OOM kill true) after a peak of 690 MB: "
                    "TimeoutError: page", "    after every shipped model: 450 MB"]


def test_the_memory_walk_walks_every_page_with_the_model_its_flag_names(monkeypatch, capsys):
    """`bench --memory-walk [--tiny-model]` walks every page (quick=False) with the seed-size model or the tiny one,
    and prints each page's memory; the walk itself (measure_big_model) runs on a page in the quick bench's test."""
    from contextlib import nullcontext

    from lpos.bench import first_visit
    from lpos.cli import main

    asked = []
    walked = {"peak_rss_mb": 300.0, "limit_mb": 690, "pages": {
        name: {"first_content_ms": 500.0, "page_ms": 900.0, "server_cpu_s": 0.5, "second_visit_ms": 300.0,
               "rss_after_mb": 200.0 + i, "peak_so_far_mb": 250.0 + i} for i, name in enumerate(sorted(PAGE_NAMES))}}

    def measure(browser, folder, *, quick, progress, shape):
        asked.append((quick, shape))
        return walked

    uploaded = {"models": ["rope", "t5"], "upload_mb": 181.0, "seconds": 60.0, "peak_rss_mb": 700.0,
                "rss_after_mb": {"every shipped model": 500.0, "the upload loaded": 650.0}}

    monkeypatch.setattr(first_visit, "chromium", nullcontext)
    monkeypatch.setattr(bench, "check_browser", lambda: None)  # no browser opens here
    monkeypatch.setattr(first_visit, "measure_big_model", measure)
    monkeypatch.setattr(first_visit, "measure_walk_with_upload", lambda browser, folder, upload, *, progress: (
        asked.append(("upload", upload.name)) or uploaded))
    assert main(["bench", "--memory-walk", "--tiny-model"]) == 0
    assert asked == [(False, first_visit.TINY_SHAPE)]
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("A model of {'n_layer': 2") and "peak RSS 300 MB (within" in line for line in lines)
    assert [line.split()[0] for line in lines if "RSS after" in line] == sorted(PAGE_NAMES)  # every page, in order
    assert main(["bench", "--memory-walk"]) == 0  # the seed-size model, then every model and the same model uploaded
    assert asked[-2:] == [(False, None), ("upload", first_visit.BIG_MODEL)]
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("One server: every page with each of the 2 shipped models, then a learner's upload "
                               "(181 MB) on every page: peak RSS 700 MB (OVER the 690 MB limit)") for line in lines)
    assert "  after the upload loaded: 650 MB" in lines
    assert main(["bench", "--memory-walk", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["first_visit"]["big_model"]["shape"] == first_visit.SEED_SHAPE


def test_slow_paths_report_each_figure_beside_its_goal():
    """`lpos bench --slow-paths` prints every row of docs/PERFORMANCE.md's slow-paths table with its verdict (numbers
    made up here)."""
    from lpos.bench.slow_paths import report

    stat = lambda value: {"median": value, "min": value, "max": value, "n": 1}  # noqa: E731
    page = lambda ms, cpu: {"sentence_ms": stat(ms), "sentence_ratio": ms / 100, "sentence_cpu_ms": stat(cpu),  # noqa: E731
                            "errors": 0}
    results = {
        "floor": {"sentence_ms": stat(100.0)},
        "pages": {"fast": page(200.0, 40.0), "slow": page(300.0, 90.0)},
        "cold_visits": {"bare": {"server_cpu_s": 2.0}, "pages": {"light": {"extra_cpu_s": 0.5}, "heavy": {"extra_cpu_s": 1.8}}},
        "write": {"first_words_s": stat(0.4), "done_s": stat(3.5), "goals_s": {"first_words": 0.5, "done": 3.0}},
        "learner_stretch": {"shared_folder": {"first_chart_s": 2.0, "page_s": 12.0, "errors": 0},
                            "upload": {"first_chart_s": 4.0, "page_s": 9.0, "errors": 1},
                            "goals_s": {"first_chart": 3.0, "page": 10.0}},
        "sink_window": {"seconds": stat(0.5), "goal_s": 2.0},
        "timeline_step": {"seconds": stat(1.5), "goal_s": 1.0},
        "cold_first_page": {"app_s": stat(4.0), "bare_s": stat(2.5), "goal_extra_s": 1.0},
    }
    lines = report(results)
    line = lambda start: next(text for text in lines if text.strip().startswith(start))  # noqa: E731
    assert "over goal" not in line("fast") and "2.00x" in line("fast")
    assert line("slow").endswith("over goal: ratio, CPU")
    assert "over goal" not in line("light") and line("heavy").endswith("over goal by 0.80 s")
    assert "first words 0.40 s (within goal)" in line("Stretching, Write") and "done 3.50 s (over goal by 0.5 s)" in line("Stretching, Write")
    assert "whole page 12.0 s (over goal by 2.0 s)" in line("Stretching with a learner's RoPE model (shared folder)")
    assert line("Stretching with a learner's RoPE model (upload)").endswith("1 error(s)!")
    assert "0.50 s (within goal)" in line("Inside") and "1.50 s (over goal by 0.5 s)" in line("Training timeline")
    assert "4.00 s against the bare page's 2.50 s (over goal by 0.5 s" in line("First page")
    assert report({}) == []


def test_lab_report_gives_each_figure_beside_its_goal():
    """`lpos bench --lab`'s lines (numbers made up here): time to 95% with a verdict for learned and rope only, a
    run that never reached it said so, the busy page's ratio against its goal, the queue's memory."""
    from lpos.bench.lab import report

    run = lambda scheme, reached: {"scheme": scheme, "seconds_to_target": reached,  # noqa: E731
                                   "step_at_target": 900 if reached else None, "seconds": 41.0, "steps": 2000,
                                   "accuracy_at_window": 0.99}
    results = {"target": 0.95, "goal_s": 60.0,
               "time_to_target": [run("learned", 15.8), run("rope", 72.0), run("none", None)],
               "busy_page": {"idle_ms": {"median": 500.0}, "busy_ms": {"median": 700.0}, "ratio": 1.4,
                             "trained_throughout": True, "goal_ratio": 1.5},
               "queued_memory": {"sessions": 4, "steps": 200, "shown_a_place": 3, "errors": 0, "finished": 4, "seconds": 76.0,
                                 "peak_server_mb": 421.0, "peak_with_workers_mb": 827.0}}
    lines = report(results)
    line = lambda start: next(text for text in lines if text.strip().startswith(start))  # noqa: E731
    assert line("learned").endswith("met") and "15.8 s (step 900)" in line("learned")
    assert line("rope").endswith("MISSED")
    assert "never reached" in line("none") and not line("none").endswith(("met", "MISSED"))
    assert "1.40x (goal at most 1.5x)  met" in line("New sentence")
    assert "server peak 421 MB, 827 MB with its worker" in line("4 sessions")


@pytest.mark.slow
def test_an_app_with_twenty_models_compares_the_shipped_ones_and_their_copies(tmp_path):
    """The first-visit bench's app with more models: the shipped ones and copies of them, each copy with its views
    and a card that matches it, in a copy of the app that reads its own checkpoints folder."""
    from lpos import checkpoints
    from lpos.bench.first_visit import app_with_models

    app = app_with_models(tmp_path, 20)
    copied = subprocess.run([sys.executable, "-c", "from lpos.checkpoints import available, cards, CHECKPOINT_DIR\n"
                             "print(CHECKPOINT_DIR); print(*available())\n"
                             "print(all(cards.card(name) is not None for name in available()))"],
                            cwd=app.parent, capture_output=True, text=True, check=True).stdout.splitlines()
    shipped = checkpoints.available()
    assert copied[0] == str(app.parent / "checkpoints") and copied[2] == "True"
    names = copied[1].split()
    assert len(names) == 20 and set(shipped) < set(names)
    copies = sorted(set(names) - set(shipped))
    assert copies == sorted(f"{name}-copy1" for name in shipped[:20 - len(shipped)])
    for copy in copies:
        assert (app.parent / "checkpoints" / f"{copy}.views.pt").read_bytes() == \
            (checkpoints.CHECKPOINT_DIR / f"{copy.removesuffix('-copy1')}.views.pt").read_bytes()
