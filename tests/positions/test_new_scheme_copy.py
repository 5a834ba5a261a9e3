"""A scheme is one module: a scheme module copied under a new name, with only its `name` changed, is a
new scheme everywhere, with no other file touched. The whole package is copied to a temporary folder
with lpos/positions/alibi.py copied beside it as slope.py (name "slope"); from that copy, in a fresh
process: the CLI trains a slope model, lpos.checkpoints.load reads it back with the trained logits, the
sidebar offers the scheme, and every page of the app draws with it and its untrained model."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import DATA_DIR, ROOT
from lpos.pages import PAGES

pytestmark = pytest.mark.slow
NEW = "slope"

CHECK = textwrap.dedent('''
    """Runs inside the copy: load the CLI's file, train the same run again here, compare; then the app."""
    import sys
    from pathlib import Path

    import torch

    import lpos
    from lpos.checkpoints import load
    from lpos.positions import SCHEMES, scheme_info
    from lpos.train import TrainArgs, train

    copy, data, work = (Path(a) for a in sys.argv[1:4])
    assert Path(lpos.__file__).resolve().is_relative_to(copy.resolve()), lpos.__file__
    assert SCHEMES.index("slope") == SCHEMES.index("alibi") + 1, SCHEMES  # ties with alibi's order: then by name
    assert scheme_info("slope").shows("bias") and scheme_info("slope").label == scheme_info("alibi").label

    loaded, meta = load(work / "slope.pt")
    assert loaded.config.position == "slope" and meta["steps"] == 2, (loaded.config, meta.get("steps"))
    again, _ = train(TrainArgs(scheme="slope", data=(str(data),), out=str(work / "again.pt"), steps=2, batch_size=4,
                               threads=1), progress=False)
    with torch.no_grad():  # the file keeps the trained token rows in float16 (lpos.checkpoints.lpos_format)
        rows = again.transformer.wte.weight
        rows[again.output_vocab] = rows[again.output_vocab].half().float()
    ids = torch.randint(0, 50257, (2, 48), generator=torch.Generator().manual_seed(0))
    ids = loaded.output_vocab[ids % len(loaded.output_vocab)]  # tokens the model scores
    with torch.no_grad():
        read, trained = loaded(ids)[0], again.eval()(ids)[0]
    torch.testing.assert_close(read, trained, rtol=1e-5, atol=1e-5)
    print("checkpoint: ok")

    from lpos.ui.harness import app_test, server_navigation_mode

    server_navigation_mode()
    from lpos.pages import PAGES

    pages = [page.file for page in PAGES]
    failures = []
    for page in pages:
        at = app_test(timeout=300)
        at.run()
        at.switch_page(page).run()
        scheme_box = at.selectbox(key="scheme")
        assert "slope" in scheme_box.options, scheme_box.options
        scheme_box.set_value("slope").run()
        assert at.selectbox(key="model").value == "untrained"  # no slope model is shipped: the sidebar offers this
        at.selectbox(key="model").set_value("untrained").run()
        shown = (at.selectbox(key="scheme").value, at.selectbox(key="model").value)
        if at.exception or shown != ("slope", "untrained"):
            failures.append(f"{page}: sidebar {shown}; " + " | ".join(e.value for e in at.exception))
            for error in at.exception:
                failures.append("\\n".join(error.stack[-6:]))
        else:
            print(f"{page}: ok")
    assert not failures, "\\n".join(failures)
''')


def copy_of_the_app(folder: Path) -> Path:
    """lpos (with the new scheme module), app.py, pages/ and .streamlit/ copied; the shipped checkpoints
    linked, since the package finds them beside itself (lpos.checkpoints.CHECKPOINT_DIR)."""
    copy = folder / "copy"
    shutil.copytree(ROOT / "lpos", copy / "lpos", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "pages", copy / "pages", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / ".streamlit", copy / ".streamlit")
    shutil.copy(ROOT / "app.py", copy / "app.py")
    (copy / "checkpoints").symlink_to(ROOT / "checkpoints", target_is_directory=True)
    source = (ROOT / "lpos" / "positions" / "alibi.py").read_text(encoding="utf-8")
    assert source.count('name = "alibi"') == 1
    (copy / "lpos" / "positions" / f"{NEW}.py").write_text(source.replace('name = "alibi"', f'name = "{NEW}"'),
                                                           encoding="utf-8")
    return copy


def test_a_copied_scheme_module_is_a_new_scheme_everywhere(tmp_path, small_stories):
    copy, work = copy_of_the_app(tmp_path), tmp_path / "work"
    work.mkdir()
    env = {key: value for key, value in os.environ.items() if key != "LPOS_CHECKPOINT_DIR"}  # no shared folder
    env.update(PYTHONPATH=str(copy), LPOS_VIEW_CACHE="off", LPOS_DATA_DIR=str(DATA_DIR))  # the corpus the app reads
    trained = subprocess.run([sys.executable, "-m", "lpos", "train", "--scheme", NEW, "--steps", "2", "--threads", "1",
                              "--batch-size", "4", "--no-progress", "--data", str(small_stories),
                              "--out", str(work / f"{NEW}.pt")], cwd=work, env=env, capture_output=True, text=True,
                             timeout=300)
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert (work / f"{NEW}.pt").is_file()
    (work / "check.py").write_text(CHECK, encoding="utf-8")
    checked = subprocess.run([sys.executable, "check.py", str(copy), str(small_stories), str(work)], cwd=work, env=env,
                             capture_output=True, text=True, timeout=1800)
    assert checked.returncode == 0, f"{checked.stdout[-3000:]}\n{checked.stderr[-5000:]}"
    assert "checkpoint: ok" in checked.stdout
    assert [line for line in checked.stdout.splitlines() if line.endswith(".py: ok")] == [f"{p.file}: ok" for p in PAGES]
