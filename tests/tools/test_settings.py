"""lpos.settings: every environment setting in one place, read when asked; a bad value reads as the default."""
from __future__ import annotations

from pathlib import Path

import pytest

from lpos import settings


@pytest.mark.parametrize("value, expected", [("", 1024), ("abc", 1024), ("-5", 1024), ("0", 1024), ("300", 300),
                                             (" 64 ", 64)])
def test_upload_cap_parses_or_falls_back(monkeypatch, value, expected):
    monkeypatch.setenv(settings.MAX_UPLOAD_MB, value)
    assert settings.max_upload_mb() == expected


def test_unset_settings_read_their_defaults(monkeypatch):
    for name in (settings.MAX_UPLOAD_MB, settings.CHECKPOINT_DIR, settings.VIEW_CACHE, settings.TORCH_THREADS,
                 settings.REDIS_URL, settings.PROFILE, settings.FULL_GC_SECONDS, settings.DATA_DIR):
        monkeypatch.delenv(name, raising=False)
    assert settings.max_upload_mb() == settings.DEFAULT_UPLOAD_MB and settings.torch_threads() == 1
    assert settings.checkpoint_dir() is None and settings.profile_dir() is None and settings.redis_url() == ""
    assert settings.view_cache() == Path.home() / ".cache" / "lpos" / "views"
    assert settings.full_gc_seconds() == 30.0 and settings.data_dir(Path("here")) == Path("here")


def test_set_settings_are_read_when_asked(monkeypatch, tmp_path):
    monkeypatch.setenv(settings.VIEW_CACHE, "off")
    assert settings.view_cache() is None
    monkeypatch.setenv(settings.VIEW_CACHE, str(tmp_path))
    monkeypatch.setenv(settings.DATA_DIR, str(tmp_path))
    monkeypatch.setenv(settings.FULL_GC_SECONDS, "2.5")
    monkeypatch.setenv(settings.REDIS_URL, " redis://127.0.0.1:6390/0 ")
    assert settings.view_cache() == tmp_path and settings.data_dir(Path("x")) == tmp_path
    assert settings.full_gc_seconds() == 2.5 and settings.redis_url() == "redis://127.0.0.1:6390/0"


def test_no_other_module_reads_the_environment():
    """Configuration is read in lpos.settings only (the CLI, training's torchrun variables and the bench
    drivers, which set variables for the servers they start, aside)."""
    root = Path(settings.__file__).parent
    readers = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                     if "os.environ" in p.read_text() and p.name != "settings.py"
                     and not p.relative_to(root).parts[0] in ("cli", "bench") and p.name != "train.py")
    assert readers == []


@pytest.mark.parametrize("value, expected", [("1", True), (" 0 ", False), ("", settings.PLOTLY_REACT_DEFAULT),
                                             ("yes", settings.PLOTLY_REACT_DEFAULT)])
def test_the_plotly_react_switch_reads_0_or_1(monkeypatch, value, expected):
    monkeypatch.setenv(settings.PLOTLY_REACT, value)
    assert settings.plotly_react() is expected
