"""`pip install .` into a fresh virtual environment outside the checkout: the shipped models come with
the package, and from another folder a "Data and code" snippet, examples/tour.ipynb and
`python -m lpos inspect` run on them.

The project is copied as a fresh clone would have it (git's tracked and unignored files), plus a
training run's leftover `*.resume.pt`, which must not be installed. The venv sees the system's
packages (`--system-site-packages`: torch and the rest are not downloaded again) and pip builds
without isolation and without dependencies, so the test needs no network; the copy is deleted once
installed and the checkout is on no path the venv reads (the test checks which lpos was imported).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import ROOT

pytestmark = pytest.mark.slow

NOTEBOOK_RUNNER = """
import sys
import nbformat
from nbclient import NotebookClient

notebook = nbformat.read(sys.argv[1], as_version=4)
notebook.cells.append(nbformat.v4.new_code_cell("import lpos; print(lpos.__file__)"))
NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": "."}}).execute()
errors = [o for cell in notebook.cells for o in cell.get("outputs", []) if o.output_type == "error"]
assert not errors, errors[0]
print(notebook.cells[-1].outputs[0].text.strip())
"""


def fresh_clone(target: Path) -> Path:
    """The files a clone of the working tree holds (tracked, or new and not ignored), copied to `target`."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> SimpleNamespace:
    """A venv with the project installed by `pip install .`, its python, a folder outside both, and the env."""
    base = tmp_path_factory.mktemp("install")
    project = fresh_clone(base / "project")
    (project / "checkpoints" / "learned.pt.resume.pt").write_bytes(b"a training run's leftover")
    venv = base / "venv"
    # without a pip of its own the venv runs the system's pip and builds with the system's setuptools (a venv's
    # bundled setuptools may predate the license expression in pyproject.toml)
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True,
                   timeout=300)
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "LPOS_CHECKPOINT_DIR", "VIRTUAL_ENV"}}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", PLOTLY_RENDERER="json")
    done = subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-q", "."],
                          cwd=project, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    shutil.rmtree(project)  # nothing may be read from the copy once installed
    elsewhere = base / "elsewhere"
    elsewhere.mkdir()
    return SimpleNamespace(python=python, venv=venv, elsewhere=elsewhere, env=env)


def run(installed: SimpleNamespace, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(installed.python), *args], cwd=installed.elsewhere, env=installed.env,
                          capture_output=True, text=True, timeout=timeout)


def test_the_installed_package_carries_the_shipped_models(installed):
    done = run(installed, "-c", "import lpos, lpos.checkpoints as c; print(lpos.__file__); print(c.CHECKPOINT_DIR); "
                                "print(' '.join(c.available()))")
    assert done.returncode == 0, done.stderr
    package, folder, names = done.stdout.splitlines()
    assert Path(package).is_relative_to(installed.venv) and Path(folder).is_relative_to(installed.venv)
    shipped = sorted(path.name for path in (ROOT / "checkpoints").glob("*.pt")
                     if not path.name.endswith(".resume.pt"))
    assert sorted(path.name for path in Path(folder).glob("*.pt")) == shipped  # views included, leftovers not
    assert names.split() == sorted(name for name in (p.removesuffix(".pt") for p in shipped) if "." not in name)
    assert (Path(folder) / "README.md").is_file()


def test_a_data_and_code_snippet_runs_from_another_folder(installed):
    from lpos.tokenizer import encode
    from lpos.ui.embeddings import embedding_panel_figures

    loaded = SimpleNamespace(scheme="learned")  # all the recipe reads of the model it will load
    snippet = embedding_panel_figures(loaded, encode("The dog bit the man."))[2].snippet(model="learned")
    (installed.elsewhere / "snippet.py").write_text(snippet)
    done = run(installed, "snippet.py")
    assert done.returncode == 0, done.stderr
    assert "'type': 'heatmap'" in done.stdout  # fig.show() under the json renderer printed the figure


def test_the_tour_notebook_runs_from_another_folder(installed):
    (installed.elsewhere / "runner.py").write_text(NOTEBOOK_RUNNER)
    shutil.copy(ROOT / "examples" / "tour.ipynb", installed.elsewhere / "tour.ipynb")
    done = run(installed, "runner.py", "tour.ipynb", timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert Path(done.stdout.splitlines()[-1]).is_relative_to(installed.venv)  # the kernel read the installed lpos


def test_cli_inspect_runs_from_another_folder(installed):
    done = run(installed, "-m", "lpos", "inspect", "The dog bit the man")
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("model: learned (trained, shipped")
    assert done.stdout.splitlines()[0] == "scheme learned, 5 tokens"
