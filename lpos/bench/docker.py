"""Docker for the cloud bench (lpos.bench.cloud) and the container tests (tests/deploy/containers.py):
the engine (Debian's docker.io, installed and started when missing), the images (deploy/base_image.sh's
base, deploy/Dockerfile's app, from a local folder of wheels where a container cannot reach the
indexes), containers published on 127.0.0.1 only, and the removal of everything made.

Everything a `Docker` makes carries its run's name (lpos-test-<hex> unless told): container names,
and image tags unless given. `Docker.cleanup()` removes its containers and, unless `keep_images`, its
tags, every image made since it started (a failed build's intermediate images too) and every container
of those images under any name (Compose's); it stops the engine if it started it.
"""
from __future__ import annotations

import functools
import hashlib
import http.server
import os
import secrets
import shutil
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from lpos.bench.common import ROOT

# the commands this module runs -> Debian's package that has it
PACKAGES = {"dockerd": "docker.io", "debootstrap": "debootstrap"}
DEBIAN_PYTHON = "/usr/bin/python3"  # the Debian base's own Python (3.11.2): it makes the wheel folder
# the PyTorch CPU index and PyPI, asked from inside a container as the image's pip would ask them
INDEXES = ("https://download.pytorch.org/whl/cpu/torch/", "https://pypi.org/simple/pip/")
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
# what deploy/Dockerfile copies into the app image (and .dockerignore's files left out of it)
APP_SOURCES = ("requirements.txt", "app.py", ".streamlit", "lpos", "pages", "checkpoints")
TENTATIVE = 0x40  # IFA_F_TENTATIVE, an IPv6 address's flag in /proc/net/if_inet6
NOT_SHIPPED = (".pyc", ".resume.pt", ".tmp")  # with every __pycache__ folder


def run(command: list[str], *, timeout: float, check: bool = True, **options) -> subprocess.CompletedProcess:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                          **options)
    if check and done.returncode:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}:\n"
                           f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def wait_for(ready, *, timeout: float, what: str, every: float = 0.5) -> float:
    """Seconds until `ready()` is true; RuntimeError after `timeout`."""
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if ready():
            return time.perf_counter() - start
        time.sleep(every)
    raise RuntimeError(f"{what}: not within {timeout:.0f} s")


def healthy(url: str) -> bool:
    """Whether the Streamlit server at `url` answers its health check."""
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def apt_install(packages: list[str]) -> None:
    """apt-get install `packages` (one `apt-get update` only if the first try fails)."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", *packages]
    if run(install, timeout=900, check=False, env=env).returncode:
        run(["apt-get", "update"], timeout=300, env=env)
        run(install, timeout=900, env=env)


def install_missing() -> list[str]:
    """Install Docker, debootstrap and Debian's venv where missing; the packages installed."""
    missing = [package for tool, package in PACKAGES.items() if not shutil.which(tool)]
    if run([DEBIAN_PYTHON, "-c", "import ensurepip, venv"], timeout=30, check=False).returncode:
        missing.append("python3-venv")
    if missing:
        apt_install(missing)
    return missing


def engine_answers() -> bool:
    return run(["docker", "info"], timeout=30, check=False).returncode == 0


def ipv6_addresses() -> dict[str, int]:
    """The host's IPv6 addresses, "interface address" -> flags ({} without IPv6)."""
    try:
        lines = Path("/proc/net/if_inet6").read_text().splitlines()
    except OSError:
        return {}
    return {f"{f[5]} {f[0]}": int(f[4], 16) for f in map(str.split, lines) if len(f) == 6}


def wait_addresses_settled(before: dict[str, int], *, timeout: float = 10) -> bool:
    """Wait until the host has an IPv6 address more than `before` and none still tentative (under
    duplicate address detection); whether it came. A container's new veth gets its link-local address
    a second or two after `docker run`, and Chromium then drops the connections it has open
    (net::ERR_NETWORK_CHANGED): a page opened before that may never connect."""
    deadline = time.perf_counter() + timeout
    while before and time.perf_counter() < deadline:
        now = ipv6_addresses()
        if now.keys() - before.keys() and not any(flags & TENTATIVE for flags in now.values()):
            return True
        time.sleep(0.05)
    return False


def image_ids() -> set[str]:
    return set(run(["docker", "images", "-aq", "--no-trunc"], timeout=60).stdout.split())


def image_exists(tag: str) -> bool:
    return run(["docker", "image", "inspect", tag], timeout=60, check=False).returncode == 0


def source_digest() -> str:
    """12 hex digits naming what an app image is built from: deploy/base_image.sh, deploy/Dockerfile
    and the files the Dockerfile copies."""
    digest = hashlib.sha256()
    for path in (ROOT / "deploy" / "base_image.sh", DOCKERFILE):
        digest.update(path.read_bytes())
    for source in APP_SOURCES:
        paths = [ROOT / source] if (ROOT / source).is_file() else sorted((ROOT / source).rglob("*"))
        for path in paths:
            if path.is_file() and "__pycache__" not in path.parts and not path.name.endswith(NOT_SHIPPED):
                digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def serve(folder: Path) -> tuple[str, http.server.ThreadingHTTPServer]:
    """`folder` over HTTP on 127.0.0.1 (its listing is a page of links: a pip --find-links source)."""
    # http.server calls log_message by name: a handler whose log_message says nothing
    quiet = type("Quiet", (http.server.SimpleHTTPRequestHandler,), {"log_message": lambda self, *args: None})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/", server


@dataclass
class Docker:
    """One run's engine, images and containers; `cleanup()` removes what it made."""
    folder: Path  # logs and the wheel folder
    name: str = field(default_factory=lambda: f"lpos-test-{secrets.token_hex(4)}")
    base: str = ""  # the base image's tag: lpos-base:<name> unless given
    app: str = ""  # the app image's tag: lpos:<name> unless given
    keep_images: bool = False  # cleanup() leaves the images (kept to be reused by tag)
    installed: list[str] = field(default_factory=list)
    engine: subprocess.Popen | None = None  # dockerd, when this run started it
    images_before: set[str] | None = None  # the engine's images when this run began (None: not begun)
    tags: list[str] = field(default_factory=list)
    containers: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.base = self.base or f"lpos-base:{self.name}"
        self.app = self.app or f"lpos:{self.name}"

    def start(self) -> Docker:
        self.installed = install_missing()
        if not engine_answers():
            log = (self.folder / "dockerd.log").open("w")
            self.engine = subprocess.Popen(["dockerd"], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                           start_new_session=True)
            wait_for(engine_answers, timeout=90, what="dockerd answering (see dockerd.log)", every=1)
        self.images_before = image_ids()
        return self

    def build_base(self) -> float:
        """deploy/base_image.sh, timed."""
        self.tags.append(self.base)
        start = time.perf_counter()
        done = run(["bash", str(ROOT / "deploy" / "base_image.sh"), self.base], timeout=1800, check=False)
        (self.folder / "base_image.log").write_text(done.stdout + done.stderr)
        if done.returncode:
            raise RuntimeError(f"deploy/base_image.sh failed: {done.stderr[-3000:]}")
        return time.perf_counter() - start

    def indexes_reachable(self) -> bool:
        """Whether a container on the base reaches the PyTorch CPU index and PyPI over verified HTTPS."""
        check = ("import sys, urllib.request\nfor url in sys.argv[1:]:\n"
                 "    urllib.request.urlopen(url, timeout=10).close()")
        return run(["docker", "run", "--rm", self.base, "python3", "-c", check, *INDEXES], timeout=120,
                   check=False).returncode == 0

    def wheel_folder(self) -> Path:
        """requirements.txt's wheels as the base's Python needs them (its markers: Debian's 3.11.2 needs
        async-timeout for redis), fetched by this machine's pip and its settings; torch must be +cpu."""
        venv, wheels = self.folder / "download-venv", self.folder / "wheels"
        run([DEBIAN_PYTHON, "-m", "venv", str(venv)], timeout=120)
        run([str(venv / "bin" / "python"), "-m", "pip", "download", "-q", "--retries", "1", "--timeout", "15",
             "--only-binary", ":all:", "-r", str(ROOT / "requirements.txt"), "-d", str(wheels)], timeout=1200)
        torch = [p.name for p in wheels.glob("torch-*.whl")]
        if not (len(torch) == 1 and "+cpu" in torch[0]) or any(wheels.glob("nvidia_*")):
            raise RuntimeError(f"no CPU torch wheel for the image (got {torch}): give this machine's pip one")
        return wheels

    def build_app(self, wheels_url: str | None) -> float:
        """deploy/Dockerfile on the base, timed; from `wheels_url` alone when given (the build then
        shares the host's network to reach it on 127.0.0.1)."""
        self.tags.append(self.app)
        options = ["--network", "host", "--build-arg", f"WHEELS={wheels_url}"] if wheels_url else []
        start = time.perf_counter()
        done = run(["docker", "build", "--force-rm", "-f", str(DOCKERFILE), "--build-arg", f"BASE={self.base}",
                    *options, "-t", self.app, str(ROOT)], timeout=2400, check=False)
        (self.folder / "build.log").write_text(done.stdout + done.stderr)
        if done.returncode:
            raise RuntimeError(f"docker build failed: {(done.stdout + done.stderr)[-3000:]}")
        return time.perf_counter() - start

    def build_images(self, *, reuse: bool = False) -> dict:
        """The base and the app image, timed (`reuse`: an image already at its tag is kept as it is);
        from a local wheel folder where a container cannot reach the indexes. Returns what it did."""
        figures: dict = {"installed": self.installed}
        if reuse and image_exists(self.base):
            figures["base_reused"] = self.base
        else:
            figures["base_build_s"] = round(self.build_base(), 1)
        figures["base_mb"] = round(self.image_mb(self.base))
        if reuse and image_exists(self.app):
            figures["app_reused"] = self.app
        else:
            figures["indexes_reachable_from_a_container"] = self.indexes_reachable()
            wheels_url, server = None, None
            if not figures["indexes_reachable_from_a_container"]:
                start = time.perf_counter()
                folder = self.wheel_folder()
                figures["wheel_folder_s"] = round(time.perf_counter() - start, 1)
                wheels_url, server = serve(folder)
            try:
                figures["app_build_s"] = round(self.build_app(wheels_url), 1)
            finally:
                if server is not None:
                    server.shutdown()
        figures["app_mb"] = round(self.image_mb(self.app))
        return figures

    def image_mb(self, tag: str) -> float:
        return int(run(["docker", "image", "inspect", "-f", "{{.Size}}", tag], timeout=60).stdout) / 1e6

    def run_container(self, suffix: str, port: int, *options: str, command: tuple[str, ...] = ()) -> str:
        """A container of the app image (`options` before the image, `command` after it), its port 8501
        published on 127.0.0.1 only; its name, once the host's network has settled (a browser can open it)."""
        name = f"{self.name}-{suffix}"
        self.containers.append(name)
        addresses = ipv6_addresses()
        run(["docker", "run", "-d", "--name", name, "-p", f"127.0.0.1:{port}:8501", *options, self.app, *command],
            timeout=120)
        wait_addresses_settled(addresses)
        return name

    def run_replica(self, port: int) -> str:
        """One container of the app image as deploy/Dockerfile runs it; its name."""
        return self.run_container("one", port)

    def remove(self, container: str) -> None:
        run(["docker", "rm", "-f", "-v", container], timeout=120, check=False)

    def inspect(self, container: str, template: str) -> str:
        return run(["docker", "inspect", "-f", template, container], timeout=30).stdout.strip()

    def health(self, container: str) -> str:
        return self.inspect(container, "{{.State.Health.Status}}")

    def exec(self, container: str, script: str) -> str:
        return run(["docker", "exec", container, "sh", "-c", script], timeout=300).stdout

    def cleanup(self) -> list[str]:
        """Remove every container, and unless `keep_images` every tag and new image; stop the engine if
        this run started it. Returns what could not be removed (empty when all went)."""
        left = self._remove_what_was_made() if self.images_before is not None else []  # None: nothing made
        if self.engine is not None:
            self.engine.terminate()
            try:
                self.engine.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.engine.kill()
        return left

    def _remove_what_was_made(self) -> list[str]:
        if not engine_answers():
            return ["the engine does not answer"]
        made = [] if self.keep_images else [*self.tags, *sorted(image_ids() - self.images_before)]
        for container in {*self.containers, *users(made)}:  # whatever runs on an image made here, named or not
            self.remove(container)
        left = []
        if made:
            for tag in reversed(self.tags):  # an image before the one it was built on
                run(["docker", "rmi", "-f", tag], timeout=300, check=False)
            new = image_ids() - self.images_before
            if new:  # untagged leftovers of this run (a build that failed half-way)
                done = run(["docker", "rmi", "-f", *new], timeout=300, check=False)
                left += [f"image {i}" for i in image_ids() - self.images_before]
                left += [f"(docker rmi: {done.stderr.strip()[-1000:]})"] if left else []
        named = run(["docker", "ps", "-aq", "--filter", f"name={self.name}"], timeout=60).stdout.split()
        return left + [f"container {c}" for c in {*named, *users(made)}]


def users(images: list[str]) -> set[str]:
    """The containers (running or not) of `images` or of any image built on one of them."""
    found = set()
    for image in images:
        if image_exists(image):
            found |= set(run(["docker", "ps", "-aq", "--no-trunc", "--filter", f"ancestor={image}"],
                             timeout=60).stdout.split())
    return found
