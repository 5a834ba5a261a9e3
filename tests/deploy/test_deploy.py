"""Deployment: the lecture hall's proxy configuration (deploy/haproxy.cfg, deploy/hall.py), a short
lecture hall through it with one replica killed (load/lecture_hall.py), and what learners see
of Streamlit's toolbar. The full 90-student run is `python load/lecture_hall.py` (docs/RELIABILITY.md).
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, open_url

sys.path.insert(0, str(ROOT / "deploy"))
from hall import TEMPLATE, render_config  # noqa: E402


def haproxy() -> str:
    found = shutil.which("haproxy")
    if not found:
        pytest.fail("haproxy not found: install Debian's package (apt-get install -y haproxy; .ci/run does)")
    return found


def directives(config: str, section: str) -> list[str]:
    """The directive lines of one section (`backend replicas`), comments left out."""
    lines, inside = [], False
    for line in config.splitlines():
        if line and not line[0].isspace():
            inside = line.strip() == section
        elif inside and line.strip() and not line.strip().startswith("#"):
            lines.append(" ".join(line.split()))
    return lines


def test_config_for_five_replicas_is_valid_and_sticky(tmp_path):
    config = render_config(TEMPLATE.read_text(), port=18500, stats_port=18404,
                           replica_ports=[18501, 18502, 18503, 18504, 18505])
    (tmp_path / "haproxy.cfg").write_text(config)
    checked = subprocess.run([haproxy(), "-c", "-f", str(tmp_path / "haproxy.cfg")], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    backend = directives(config, "backend replicas")
    servers = [line for line in backend if line.startswith("server ")]
    assert servers == [f"server app{i} 127.0.0.1:{18500 + i} cookie app{i}" for i in range(1, 6)]
    # a cookie names the replica (students behind one address still spread), health from Streamlit's
    # own endpoint with time for a busy replica to answer, and a replica marked down keeps its sessions
    # (a killed one's close by themselves; a slow one's must not be cut: a hall of 90 lost 36 that way)
    assert "cookie LPOS_REPLICA insert indirect nocache httponly" in backend
    assert "http-check send meth GET uri /_stcore/health" in backend
    assert "timeout check 10s" in backend
    assert "default-server check inter 1s fall 3 rise 2" in backend
    assert not any("shutdown-sessions" in line for line in backend)
    defaults = directives(config, "defaults")
    assert "option redispatch" in defaults and any(line.startswith("timeout tunnel") for line in defaults)
    binds = [line for line in config.splitlines() if line.strip().startswith("bind ")]
    assert [b.split()[1] for b in binds] == ["127.0.0.1:18500", "127.0.0.1:18404"]  # loopback only


def test_config_without_server_lines_is_refused():
    template = re.sub(r"^\s*server app.*$", "", TEMPLATE.read_text(), flags=re.M)
    with pytest.raises(ValueError, match="no `server appN"):
        render_config(template, port=1, stats_port=2, replica_ports=[3])


@pytest.mark.slow
def test_a_small_lecture_hall_survives_a_killed_replica(tmp_path):
    """6 students, 3 replicas behind HAProxy, 2 uploads, the Lesson's first 3 steps, app1 killed in step 2."""
    haproxy()
    out = tmp_path / "hall.json"
    run = subprocess.run([sys.executable, str(ROOT / "load" / "lecture_hall.py"), "--students", "6",
                          "--replicas", "3", "--uploaders", "2", "--steps", "3", "--kill-step", "2",
                          "--seconds", "400", "--json", str(out)], capture_output=True, text=True, timeout=900)
    assert out.exists(), run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads(out.read_text())
    assert run.returncode == 0, (result["error_messages"], result["leak_messages"], result.get("fault"), run.stderr[-2000:])
    assert result["errors"] == 0 and result["leaks"] == 0 and result["lost_sessions"] == []
    assert result["same_cookie_secret"]
    assert sum(result["students_per_replica"].values()) == 6 and len(result["students_per_replica"]) >= 2
    assert result["uploads"] == {"count": 2, "refused_on_another_replica": [400, 400]}
    assert result["by_action"]["upload a model"]["count"] == 2
    assert result["by_action"]["step  3: each types a sentence"]["count"] == 6  # everybody reached the end
    fault = result["fault"]
    assert fault["students_on_it"] >= 1, "no student was on the killed replica: the fault tested nothing"
    assert fault["affected_students"] == fault["recovered_students"] == fault["students_on_it"]
    # each affected student's action failed once; a reload that reached the proxy before its health
    # checks marked the replica down fails too (a 502) and is counted: every student is back all the same
    assert fault["failed_actions"] >= fault["affected_students"]
    assert fault["down_after_s"] is not None and fault["down_after_s"] < 10
    assert fault["recover_s_max"] < 30
    assert len(fault["new_sessions_after_down"]) == 3 and "app1" not in fault["new_sessions_after_down"]
    assert set(result["replica_peak_rss_mb"]) == {"app1", "app2", "app3"}
    assert all(mb > 100 for mb in result["replica_peak_rss_mb"].values())  # the sampler saw each replica


@pytest.mark.browser
def test_learners_see_no_deploy_button_or_developer_menu(running_app, page):
    """.streamlit/config.toml's client.toolbarMode = "viewer": even opened as localhost (where
    Streamlit's "auto" shows a developer the Deploy button, Rerun and Clear cache), none of it shows."""
    open_url(page, running_app.url)
    assert page.locator("[data-testid='stAppDeployButton']").count() == 0
    menu = page.locator("[data-testid='stMainMenu']")
    if menu.count():
        menu.click()
        labels = page.locator("[data-testid='stMainMenuItemLabel']").all_inner_texts()
        assert not {"Rerun", "Clear cache", "Deploy"} & {label.strip() for label in labels}, labels


@pytest.mark.slow
def test_requirements_install_cpu_torch_with_pip_and_uv(tmp_path):
    """requirements.txt and pyproject.toml as they are (the PyTorch index's address pointed at a local
    stand-in) in fresh venvs: CPU torch and no CUDA package with pip and uv, PyPI's numpy under uv
    too ([tool.uv]), the CPU wheels for macOS and Windows, and offline from a wheel folder
    (deploy/standin_index.py). Made-up wheels, 127.0.0.1 only."""
    from standin_index import prove

    results = prove(tmp_path)
    for check in ("pip", "uv", "uv, x86_64-pc-windows-msvc", "pip, offline"):
        assert results[check]["torch"] == "2.13.0+cpu", (check, results[check])
        assert "nvidia-cublas-cu12" not in results[check], check
        assert results[check]["numpy"] == "2.4.6", check  # PyPI's, the newest
    assert results["uv, aarch64-apple-darwin"]["torch"] == "2.13.0"  # macOS: the plain CPU wheel
    # the trap [tool.uv] avoids: without it uv takes numpy from the first index that has one
    assert results["uv, no pyproject.toml"]["numpy"] == "2.0.2"
    assert results["pip"]["streamlit"] == "1.67.0"
