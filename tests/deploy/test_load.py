"""The load tests, short: 4 real browser sessions for 20 seconds, and 4 protocol-only sessions for 15
seconds, against a local app.

The full runs (20 sessions, 60 seconds) are `python load/load_test.py --sessions 20
--seconds 60` and `python load/protocol_load.py --sessions 20 --seconds 60`; their numbers
are in docs/RELIABILITY.md.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT

from lpos.tokenizer import encode


def test_session_markers_are_single_distinct_tokens():
    sys.path.insert(0, str(ROOT / "load"))
    from load_test import markers

    numbers = markers(40)
    assert len(set(numbers)) == 40
    assert all(len(encode(f" {n}")) == 1 for n in numbers)  # a chip "␣731" is the whole marker


def short_run(driver: str, tmp_path, *, seconds: int) -> dict:
    """Run a load driver with 4 sessions; its summary, after the checks every run must pass."""
    out = tmp_path / "load.json"
    run = subprocess.run([sys.executable, str(ROOT / "load" / driver), "--sessions", "4",
                          "--seconds", str(seconds), "--json", str(out)], capture_output=True, text=True, timeout=600)
    result = json.loads(out.read_text())
    assert run.returncode == 0, (result["error_messages"], result["leak_messages"], run.stderr[-2000:])
    assert result["errors"] == 0 and result["leaks"] == 0
    assert result["by_action"]["open"]["count"] == 4
    assert result["by_action"]["type"]["count"] >= 4  # every session changed its sentence at least once
    assert 0 < result["response_p50_s"] <= result["response_p95_s"] < 120
    assert result["server_peak_rss_mb"] > 100  # the sampler saw the server (a model alone is tens of MB)
    return result


@pytest.mark.slow
@pytest.mark.browser
def test_short_load_run_has_no_errors_and_no_leaks(tmp_path):
    result = short_run("load_test.py", tmp_path, seconds=20)
    assert result["by_action"]["upload"]["count"] == 1


def test_protocol_checks_catch_other_markers_exceptions_and_missing_tokens():
    """The protocol driver's check on hand-made runs: what the slow run below relies on."""
    sys.path.insert(0, str(ROOT / "load"))
    from load_test import Report
    from protocol_load import HOME, Run, Session
    from streamlit.proto.Element_pb2 import Element

    report = Report()
    session = Session(0, 731, [731, 205], "http://127.0.0.1:1", report)
    session.pages, session.page_hash = {HOME: "home", "Sinusoids": "sin"}, "home"
    session.values = {"Sentence": ("id", session.sentence())}
    session.query = f"text={session.sentence()}"
    session.check(Run(blob="chips ␣The ␣731".encode()), page=HOME, own=["␣731"], query={"text": session.sentence()})
    assert report.leaks == []
    session.check(Run(blob="␣731 and ␣205".encode()), page=HOME, own=["␣731"])
    session.check(Run(blob=b"near marker 205"), page=HOME)
    assert report.leaks == ["session 0 was sent marker 205"] * 2
    in_place = json.dumps({"figure": json.dumps({"x": ["\u2423731", "\u2423205"]}, ensure_ascii=False)}).encode()
    assert "␣".encode() not in in_place  # a chart updated in place: its figure escaped in the component's data
    session.check(Run(blob=in_place), page=HOME, own=["␣731"])  # found as sent
    assert report.leaks == ["session 0 was sent marker 205"] * 3  # and another session's marker too
    with pytest.raises(RuntimeError, match="does not show"):
        session.check(Run(blob="␣732".encode()), page=HOME, own=["␣731"])
    with pytest.raises(RuntimeError, match="not 'Sinusoids'"):
        session.check(Run(blob=b""), page="Sinusoids")
    with pytest.raises(RuntimeError, match="scheme=None"):
        session.check(Run(blob=b""), page=HOME, query={"scheme": "rope"})
    broken = Element()
    broken.exception.type, broken.exception.message = "ValueError", "boom"
    with pytest.raises(RuntimeError, match="ValueError: boom"):
        session.check(Run(elements=[broken], blob="␣731".encode()), page=HOME, own=["␣731"])


@pytest.mark.slow
def test_short_protocol_load_run_has_no_errors_and_no_leaks(tmp_path):
    """4 sessions for 15 s over Streamlit's websocket protocol, no browser (load/protocol_load.py)."""
    actions = short_run("protocol_load.py", tmp_path, seconds=15)["by_action"]
    assert actions["scheme"]["count"] >= 4  # every session went round at least once
    assert actions["page"]["count"] >= 8  # away and back
