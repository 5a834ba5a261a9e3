"""Stand-ins for PyPI and the PyPI CPU index of PyTorch on 127.0.0.1, to show which torch (and which
numpy) pip and uv pick from requirements.txt without reaching either (docs/DEPLOY.md, tests/deploy/test_deploy.py).

    python deploy/standin_index.py [--keep DIR]

Both stand-ins are PEP 503 "simple" indexes served by Python's http.server on a free local port,
holding small made-up wheels with the real names, versions and platform tags:
- "PyPI": every requirement of requirements.txt at its pinned version; torch 2.13.0 for Linux
  (requiring a made-up `nvidia-cublas-cu12`, as PyPI's CUDA build requires the real one), macOS and
  Windows; numpy 2.4.6.
- "the PyTorch CPU index": torch 2.13.0+cpu for Linux and Windows and 2.13.0 for macOS (the names
  that index serves), and numpy 2.0.2, one of the packages it mirrors: the first-index trap.
requirements.txt and pyproject.toml are copied with the PyTorch index's address replaced by the CPU
stand-in's, and nothing else changed. Then, in fresh venvs: `pip install -r requirements.txt` and
`uv pip install -r requirements.txt` (in the copy's folder, so uv reads its [tool.uv]), the same
for macOS and Windows (resolution only), and offline from a wheel folder. Prints what each picked.
"""
from __future__ import annotations

import argparse
import base64
import functools
import hashlib
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import venv
import zipfile
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
PYTORCH_CPU = "https://download.pytorch.org/whl/cpu"
LINUX, MACOS, WINDOWS = "manylinux_2_28_x86_64", "macosx_11_0_arm64", "win_amd64"
PY = f"cp{sys.version_info.major}{sys.version_info.minor}"


def wheel(folder: Path, name: str, version: str, tag: str = "py3-none-any", requires: tuple[str, ...] = ()) -> Path:
    """A made-up wheel: metadata only (and an empty module), enough for pip and uv to install."""
    dist = f"{name.replace('-', '_')}-{version}"
    path = folder / f"{dist}-{tag}.whl"
    files = {
        f"{name.replace('-', '_')}/__init__.py": f"__version__ = {version!r}\n",
        f"{dist}.dist-info/METADATA": "Metadata-Version: 2.1\n" f"Name: {name}\nVersion: {version}\n"
                                      + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{dist}.dist-info/WHEEL": f"Wheel-Version: 1.0\nGenerator: lpos-standin\nRoot-Is-Purelib: true\nTag: {tag}\n",
    }
    record = [f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(t.encode()).digest()).rstrip(b'=').decode()},{len(t)}"
              for n, t in files.items()] + [f"{dist}.dist-info/RECORD,,"]
    with zipfile.ZipFile(path, "w") as archive:
        for n, text in {**files, f"{dist}.dist-info/RECORD": "\n".join(record) + "\n"}.items():
            archive.writestr(n, text)
    return path


def simple_index(folder: Path) -> None:
    """PEP 503 pages for the wheels in `folder`: simple/<name>/index.html linking each file."""
    by_name: dict[str, list[str]] = {}
    for path in sorted(folder.glob("*.whl")):
        name = re.sub(r"[-_.]+", "-", path.name.split("-")[0]).lower()
        by_name.setdefault(name, []).append(path.name)
    for name, files in by_name.items():
        page = folder / "simple" / name / "index.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text("<!DOCTYPE html><html><body>\n" + "".join(
            f'<a href="../../{f.replace("+", "%2B")}">{f}</a><br>\n' for f in files) + "</body></html>\n")
    (folder / "simple" / "index.html").write_text(
        "<!DOCTYPE html><html><body>\n" + "".join(f'<a href="{n}/">{n}</a>\n' for n in by_name) + "</body></html>\n")


def serve(folder: Path) -> tuple[str, http.server.ThreadingHTTPServer]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/simple", server


def pinned(requirements: Path) -> dict[str, str]:
    """name -> a version each requirement allows (its pin, or its lower bound)."""
    found = {}
    for line in requirements.read_text().splitlines():
        line = line.split("#")[0].strip()
        if not line or line.startswith("-"):
            continue
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        spec = next((s for s in requirement.specifier if s.operator in ("==", ">=")), None)
        found[requirement.name.lower()] = spec.version if spec else "1.0"
    return found


def build(root: Path) -> tuple[Path, Path]:
    """The two stand-ins' folders: (pypi, cpu)."""
    pypi, cpu = root / "pypi", root / "cpu"
    pypi.mkdir(parents=True)
    cpu.mkdir(parents=True)
    for name, version in pinned(ROOT / "requirements.txt").items():
        if name not in ("torch", "numpy"):
            wheel(pypi, name, version)
    wheel(pypi, "nvidia-cublas-cu12", "12.9.1.4", f"py3-none-{LINUX}")
    wheel(pypi, "torch", "2.13.0", f"{PY}-{PY}-{LINUX}", requires=("nvidia-cublas-cu12==12.9.1.4",))
    for folder in (pypi, cpu):
        wheel(folder, "torch", "2.13.0", f"{PY}-none-{MACOS}")
    wheel(pypi, "torch", "2.13.0", f"{PY}-{PY}-{WINDOWS}")
    wheel(cpu, "torch", "2.13.0+cpu", f"{PY}-{PY}-{LINUX}")
    wheel(cpu, "torch", "2.13.0+cpu", f"{PY}-{PY}-{WINDOWS}")
    wheel(pypi, "numpy", "2.4.6")
    wheel(cpu, "numpy", "2.0.2")  # the CPU index mirrors numpy, an older one
    for folder in (pypi, cpu):
        simple_index(folder)
    return pypi, cpu


def clean_env(workdir: Path) -> dict:
    """No pip or uv settings of this machine (its wheel folder, its mirrors, its constraints)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "UV_CACHE_DIR": str(workdir / "uv-cache"), "HOME": str(workdir)}


def uv_binary() -> str:
    found = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    if not Path(found).exists():
        raise SystemExit("uv not found: pip install uv (requirements-dev.txt)")
    return found


def installed(python: Path) -> dict[str, str]:
    out = subprocess.run([str(python), "-c", "import importlib.metadata as m, json; print(json.dumps("
                          "{d.metadata['Name'].lower(): d.version for d in m.distributions()}))"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def run(command: list[str], *, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done


def prove(root: Path) -> dict:
    """Every check: {check: {package: version}} (or the resolution's lines for other platforms)."""
    pypi, cpu = build(root / "index")
    pypi_url, pypi_server = serve(pypi)
    cpu_url, cpu_server = serve(cpu)
    work = root / "app"
    work.mkdir()
    for name in ("requirements.txt", "pyproject.toml"):  # the real files, the CPU index's address swapped
        (work / name).write_text((ROOT / name).read_text().replace(PYTORCH_CPU, cpu_url))
    env, uv, results = clean_env(root), uv_binary(), {}
    try:
        for tool in ("pip", "uv"):
            target = root / f"venv-{tool}"
            venv.create(target, with_pip=(tool == "pip"))
            python = target / "bin" / "python"
            if tool == "pip":
                run([str(python), "-m", "pip", "install", "-q", "--index-url", pypi_url, "-r", "requirements.txt"],
                    cwd=work, env=env)
            else:
                run([uv, "pip", "install", "-q", "--python", str(python), "--index-url", pypi_url,
                     "-r", "requirements.txt"], cwd=work, env=env)
            results[tool] = installed(python)
        # the same in a folder without pyproject.toml: uv's default, the first index that has a package
        bare = root / "bare"
        bare.mkdir()
        shutil.copy(work / "requirements.txt", bare)
        target = root / "venv-uv-bare"
        venv.create(target)
        run([uv, "pip", "install", "-q", "--python", str(target / "bin" / "python"), "--index-url", pypi_url,
             "-r", "requirements.txt"], cwd=bare, env=env)
        results["uv, no pyproject.toml"] = installed(target / "bin" / "python")
        for platform in ("aarch64-apple-darwin", "x86_64-pc-windows-msvc"):
            out = run([uv, "pip", "compile", "-q", "--no-header", "--python-platform", platform, "--python-version",
                       f"{sys.version_info.major}.{sys.version_info.minor}", "--index-url", pypi_url,
                       "requirements.txt"], cwd=work, env=env).stdout
            results[f"uv, {platform}"] = dict(re.findall(r"^([a-z0-9_.-]+)==(\S+)", out, flags=re.M))
        # offline: a wheel folder, no index at all (the index lines in the file are ignored)
        wheels = root / "wheels"
        wheels.mkdir()
        for path in [*cpu.glob("torch-*.whl"), *pypi.glob("*.whl")]:
            if not path.name.startswith("torch-2.13.0-") or MACOS in path.name:
                shutil.copy(path, wheels)
        target = root / "venv-offline"
        venv.create(target, with_pip=True)
        run([str(target / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheels),
             "-r", "requirements.txt"], cwd=work, env=env)
        results["pip, offline"] = installed(target / "bin" / "python")
    finally:
        pypi_server.shutdown()
        cpu_server.shutdown()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python deploy/standin_index.py", description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="build in this (new) folder and leave it there")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        root = args.keep or Path(folder)
        results = prove(root)
    for check, packages in results.items():
        shown = {k: packages.get(k) for k in ("torch", "numpy", "nvidia-cublas-cu12")}
        print(f"{check:32} {shown}")
    good = all(r.get("torch") == "2.13.0+cpu" and "nvidia-cublas-cu12" not in r
               for c, r in results.items() if "apple" not in c)
    return 0 if good and results["uv"].get("numpy") == "2.4.6" else 1


if __name__ == "__main__":
    sys.exit(main())
