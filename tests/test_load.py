"""The load test, short: 4 real browser sessions for 20 seconds against a local app.

The full run (20 sessions, 60 seconds) is `python tests/load/load_test.py --sessions 20
--seconds 60`; its numbers are in docs/RELIABILITY.md.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT

from lpos.tokenizer import encode


def test_session_markers_are_single_distinct_tokens():
    sys.path.insert(0, str(ROOT / "tests" / "load"))
    from load_test import markers

    numbers = markers(40)
    assert len(set(numbers)) == 40
    assert all(len(encode(f" {n}")) == 1 for n in numbers)  # a chip "␣731" is the whole marker


@pytest.mark.slow
@pytest.mark.browser
def test_short_load_run_has_no_errors_and_no_leaks(tmp_path):
    out = tmp_path / "load.json"
    run = subprocess.run([sys.executable, str(ROOT / "tests" / "load" / "load_test.py"), "--sessions", "4",
                          "--seconds", "20", "--json", str(out)], capture_output=True, text=True, timeout=600)
    result = json.loads(out.read_text())
    assert run.returncode == 0, (result["error_messages"], result["leak_messages"], run.stderr[-2000:])
    assert result["errors"] == 0 and result["leaks"] == 0
    assert result["by_action"]["open"]["count"] == 4 and result["by_action"]["upload"]["count"] == 1
    assert result["by_action"]["type"]["count"] >= 4  # every session changed its sentence at least once
    assert 0 < result["response_p50_s"] <= result["response_p95_s"] < 120
    assert result["server_peak_rss_mb"] > 100  # the sampler saw the server (a model alone is tens of MB)
