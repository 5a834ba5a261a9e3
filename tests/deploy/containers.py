"""Docker for tests/deploy/test_container.py: the engine (Debian's docker.io, installed and started when
missing), the images (deploy/base_image.sh's base, deploy/Dockerfile's app, the hall's HAProxy and
Redis from deploy/service.Dockerfile), one replica, the Compose hall (deploy/compose.yaml), and the
removal of everything made.

Everything a `Docker` makes carries its run's name (lpos-test-<hex>): image tags, container names, the
Compose project (and so its network). `Docker.cleanup()` removes all of it and every image made since
it started (a failed build's intermediate images too), and stops the engine if it started it.
"""
from __future__ import annotations

import functools
import http.server
import os
import re
import secrets
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "deploy"))
from hall import Hall, free_port, healthy  # noqa: E402,F401 - the hall's own health and status readers

# the commands this module runs -> Debian's package that has it
PACKAGES = {"dockerd": "docker.io", "debootstrap": "debootstrap"}
COMPOSE_PACKAGE = "docker-compose"  # Debian's Compose 1.29, when the `docker compose` plugin is not there
DEBIAN_PYTHON = "/usr/bin/python3"  # the Debian base's own Python (3.11.2): it makes the wheel folder
# the PyTorch CPU index and PyPI, asked from inside a container as the image's pip would ask them
INDEXES = ("https://download.pytorch.org/whl/cpu/torch/", "https://pypi.org/simple/pip/")
CUDA_LIBRARIES = ("libcuda.so*", "libcudart*", "libcublas*", "libcudnn*", "libnccl*", "libnvrtc*", "libcufft*",
                  "libcusparse*", "libtorch_cuda*", "libc10_cuda*")
# compiler commands (the test also looks for GCC's own cc1 and cc1plus as files)
COMPILERS = ("gcc", "cc", "c++", "g++", "clang", "tcc")


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


def compose_command() -> list[str] | None:
    if shutil.which("docker") and run(["docker", "compose", "version"], timeout=30, check=False).returncode == 0:
        return ["docker", "compose"]
    return ["docker-compose"] if shutil.which("docker-compose") else None


def install_missing() -> list[str]:
    """apt-get install what is missing (one `apt-get update` only if the first try fails); the packages."""
    missing = [package for tool, package in PACKAGES.items() if not shutil.which(tool)]
    if compose_command() is None:
        missing.append(COMPOSE_PACKAGE)
    if run([DEBIAN_PYTHON, "-c", "import ensurepip, venv"], timeout=30, check=False).returncode:
        missing.append("python3-venv")
    if missing:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install = ["apt-get", "install", "-y", "--no-install-recommends", *missing]
        if run(install, timeout=900, check=False, env=env).returncode:
            run(["apt-get", "update"], timeout=300, env=env)
            run(install, timeout=900, env=env)
    return missing


def engine_answers() -> bool:
    return run(["docker", "info"], timeout=30, check=False).returncode == 0


def image_ids() -> set[str]:
    return set(run(["docker", "images", "-aq", "--no-trunc"], timeout=60).stdout.split())


def serve(folder: Path) -> tuple[str, http.server.ThreadingHTTPServer]:
    """`folder` over HTTP on 127.0.0.1 (its listing is a page of links: a pip --find-links source)."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/", server


def mebibytes(text: str) -> float:
    """docker stats' "612.3MiB" (or kB, GiB) in MiB."""
    number, unit = re.fullmatch(r"([\d.]+)\s*([KMG]i?B|B|kB)", text.strip()).groups()
    scale = {"B": 2 ** -20, "kB": 1e3 / 2 ** 20, "KiB": 2 ** -10, "MiB": 1, "MB": 1e6 / 2 ** 20, "GiB": 1024,
             "GB": 1e9 / 2 ** 20}[unit]
    return float(number) * scale


@dataclass
class Docker:
    """One run's engine, images and containers; `cleanup()` removes what it made."""
    folder: Path  # logs and the wheel folder
    name: str = field(default_factory=lambda: f"lpos-test-{secrets.token_hex(4)}")
    installed: list[str] = field(default_factory=list)
    engine: subprocess.Popen | None = None  # dockerd, when this run started it
    images_before: set[str] | None = None  # the engine's images when this run began (None: not begun)
    tags: list[str] = field(default_factory=list)
    containers: list[str] = field(default_factory=list)
    halls: list[ComposeHall] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"lpos-base:{self.name}"

    @property
    def app(self) -> str:
        return f"lpos:{self.name}"

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
        done = run(["docker", "build", "--force-rm", "-f", str(ROOT / "deploy" / "Dockerfile"),
                    "--build-arg", f"BASE={self.base}", *options, "-t", self.app, str(ROOT)], timeout=2400,
                   check=False)
        (self.folder / "build.log").write_text(done.stdout + done.stderr)
        if done.returncode:
            raise RuntimeError(f"docker build failed: {(done.stdout + done.stderr)[-3000:]}")
        return time.perf_counter() - start

    def image_mb(self, tag: str) -> float:
        return int(run(["docker", "image", "inspect", "-f", "{{.Size}}", tag], timeout=60).stdout) / 1e6

    def run_replica(self, port: int) -> str:
        """One container of the app image, its port published on 127.0.0.1 only; its name."""
        name = f"{self.name}-one"
        self.containers.append(name)
        run(["docker", "run", "-d", "--name", name, "-p", f"127.0.0.1:{port}:8501", self.app], timeout=120)
        return name

    def health(self, container: str) -> str:
        return run(["docker", "inspect", "-f", "{{.State.Health.Status}}", container], timeout=30).stdout.strip()

    def exec(self, container: str, script: str) -> str:
        return run(["docker", "exec", container, "sh", "-c", script], timeout=300).stdout

    def memory_mb(self, containers: list[str]) -> dict[str, float]:
        """Each container's memory as `docker stats` shows it (MiB)."""
        out = run(["docker", "stats", "--no-stream", "--format", "{{.Name}}\t{{.MemUsage}}", *containers],
                  timeout=120).stdout
        return {name: round(mebibytes(usage.split("/")[0]), 1)
                for name, usage in (line.split("\t") for line in out.strip().splitlines())}

    def hall(self) -> ComposeHall:
        hall = ComposeHall(docker=self, project=self.name.replace("-", ""))
        self.halls.append(hall)
        return hall

    def cleanup(self) -> list[str]:
        """Remove every hall, container, tag and new image; stop the engine if this run started it.
        Returns what could not be removed (empty when all went)."""
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
        left = []
        for hall in self.halls:
            left += hall.down()
        for container in self.containers:
            run(["docker", "rm", "-f", "-v", container], timeout=120, check=False)
        for tag in self.tags:
            run(["docker", "rmi", "-f", tag], timeout=300, check=False)
        new = image_ids() - self.images_before
        if new:  # untagged leftovers of this run (a build that failed half-way)
            run(["docker", "rmi", "-f", *new], timeout=300, check=False)
        left += [f"image {i}" for i in image_ids() - self.images_before]
        return left + [f"container {c}" for c in run(["docker", "ps", "-aq", "--filter", f"name={self.name}"],
                                                     timeout=60).stdout.split()]


@dataclass
class ComposeHall:
    """deploy/compose.yaml under one project name, on free loopback ports."""
    docker: Docker
    project: str
    port: int = field(default_factory=free_port)
    stats_port: int = field(default_factory=free_port)
    cookie_secret: str = field(default_factory=lambda: secrets.token_hex(32), repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def compose(self, *arguments: str, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess:
        env = {**os.environ, "LPOS_IMAGE": self.docker.app, "LPOS_BASE": self.docker.base,
               "LPOS_HALL_PORT": str(self.port), "LPOS_STATS_PORT": str(self.stats_port),
               "LPOS_COOKIE_SECRET": self.cookie_secret}
        return run([*compose_command(), "-f", str(ROOT / "deploy" / "compose.yaml"), "-p", self.project, *arguments],
                   timeout=timeout, env=env, check=check)

    def build_services(self) -> float:
        """HAProxy's and Redis's images (Debian's packages on the base), timed."""
        self.docker.tags += [f"{self.docker.app}-haproxy", f"{self.docker.app}-redis"]
        start = time.perf_counter()
        self.compose("build", "redis", "proxy", timeout=1800)
        return time.perf_counter() - start

    def up(self) -> float:
        """Start the hall; seconds until HAProxy sees every replica UP."""
        start = time.perf_counter()
        self.compose("up", "-d", "--no-build")
        wait_for(lambda: healthy(self.url) and self.status() == {f"app{i}": "UP" for i in (1, 2, 3)},
                 timeout=600, what="HAProxy seeing every replica UP")
        return time.perf_counter() - start

    def status(self) -> dict[str, str]:
        """HAProxy's view of each replica ({"app1": "UP", ...})."""
        return Hall(stats_port=self.stats_port).status()

    def container(self, service: str) -> str:
        return self.compose("ps", "-q", service, timeout=60).stdout.strip()

    def kill(self, service: str) -> None:
        run(["docker", "kill", self.container(service)], timeout=60)

    def down(self) -> list[str]:
        done = self.compose("down", "-v", "--remove-orphans", "--timeout", "10", timeout=300, check=False)
        left = [] if done.returncode == 0 else [f"compose down: {done.stderr[-500:]}"]
        networks = run(["docker", "network", "ls", "-q", "--filter", f"name={self.project}"], timeout=60).stdout.split()
        return left + [f"network {n}" for n in networks]
