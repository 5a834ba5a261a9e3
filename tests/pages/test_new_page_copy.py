"""A page file copied under a new name, declared by one `Page(...)` in lpos/pages.py, is a page everywhere with
no other file touched. The app, its package and its tests are copied to a temporary folder with
pages/sinusoids.py copied beside it as pages/waves.py and one line added to the copy's registry; from that copy,
in fresh processes: the running app's navigation offers it at /waves and draws it in Chromium, the bench
measures it, and the every-page tests collect and pass for it."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import DATA_DIR, ROOT

pytestmark = [pytest.mark.slow, pytest.mark.browser]
NEW = "waves"
DECLARED = f'\nPAGES = (*PAGES, Page("{NEW}", "Waves", ":material/waves:", "Experiments", view="scheme=sinusoidal&model=sinusoidal"))\n'

CHECK = textwrap.dedent('''
    """Runs inside the copy: the registry, the navigation of a running app, the page drawn, the bench's measure."""
    import sys
    from pathlib import Path

    import lpos
    from lpos.bench.browser import Server, Tab, chromium
    from lpos.bench.measure import measure_page
    from lpos.pages import page_named, url_paths

    copy = Path(sys.argv[1])
    assert Path(lpos.__file__).resolve().is_relative_to(copy.resolve()), lpos.__file__
    page = page_named("waves")
    assert page.file == "pages/waves.py" and url_paths()["waves"] == "waves"
    with Server(log=copy / "streamlit.log") as server, chromium() as browser:
        tab = Tab(browser)
        tab.open(server.url)
        links = tab.page.locator("[data-testid='stSidebarNav'] a")
        titles = [text.strip().splitlines()[-1] for text in links.all_inner_texts()]
        paths = [link.get_attribute("href").removeprefix(server.url) for link in links.all()]
        assert titles[-1] == "Waves" and paths[-1] == "/waves", (titles, paths)
        opened = tab.open(f"{server.url}/waves?{page.view}")
        assert opened["errors"] == 0 and tab.page.locator("[data-testid='stMain'] h1").count() == 1
        tab.close()
        measured = measure_page(browser, server, url_paths()["waves"], 0, 1)
        assert measured["errors"] == 0 and measured["sentence_ms"]["n"] == 1, measured
    print("navigation, page and bench: ok")
''')


def copy_of_the_app(folder: Path) -> Path:
    """The app, the package, the tests and the pytest configuration, with the shipped models linked."""
    copy = folder / "copy"
    ignore = shutil.ignore_patterns("__pycache__", ".pytest_cache")
    for name in ("lpos", "pages", "tests", ".streamlit"):
        shutil.copytree(ROOT / name, copy / name, ignore=ignore)
    for name in ("app.py", "pyproject.toml"):
        shutil.copy(ROOT / name, copy / name)
    (copy / "checkpoints").symlink_to(ROOT / "checkpoints", target_is_directory=True)
    shutil.copy(ROOT / "pages" / "sinusoids.py", copy / "pages" / f"{NEW}.py")
    with (copy / "lpos" / "pages.py").open("a", encoding="utf-8") as registry:
        registry.write(DECLARED)
    return copy


def test_a_copied_page_is_a_page_everywhere(tmp_path):
    copy = copy_of_the_app(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(copy), "LPOS_VIEW_CACHE": "off", "LPOS_DATA_DIR": str(DATA_DIR)}
    (tmp_path / "check.py").write_text(CHECK, encoding="utf-8")
    checked = subprocess.run([sys.executable, str(tmp_path / "check.py"), str(copy)], cwd=copy, env=env,
                             capture_output=True, text=True, timeout=900)
    assert checked.returncode == 0, f"{checked.stdout[-3000:]}\n{checked.stderr[-5000:]}"
    assert "navigation, page and bench: ok" in checked.stdout

    # the every-page tests: collected for the new page, and the ones that draw it pass
    every_page = ["tests/pages/test_app_shell.py", "tests/figures/test_export.py", "tests/tools/test_precomputed.py"]
    collected = subprocess.run([sys.executable, "-m", "pytest", "--all", "--collect-only", "-q", *every_page],
                               cwd=copy, env=env, capture_output=True, text=True, timeout=600)
    assert collected.returncode == 0, collected.stdout[-3000:]
    ids = collected.stdout.splitlines()
    for expected in ("test_each_page_draws_the_view_it_declares[waves]",
                     "test_every_chart_downloads_a_named_svg[waves]", "test_pages_read_the_precomputed_views[waves-rope]"):
        assert any(expected in line for line in ids), (expected, ids[:40])
    ran = subprocess.run([sys.executable, "-m", "pytest", "--all", "-q", "-p", "no:cacheprovider",
                          "tests/pages/test_app_shell.py::test_each_page_draws_the_view_it_declares[waves]",
                          "tests/pages/test_app_shell.py::test_every_page_runs_with_every_scheme_and_model[rope-untrained]",
                          "tests/pages/test_page_registry.py::test_every_page_file_is_registered_once"],
                         cwd=copy, env=env, capture_output=True, text=True, timeout=900)
    assert ran.returncode == 0, ran.stdout[-4000:]
    assert "3 passed" in ran.stdout, ran.stdout[-2000:]
