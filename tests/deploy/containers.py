"""Docker for tests/deploy/test_container.py: lpos.bench.docker's engine, images and containers (the
engine installed and started when missing, the base and app images, one replica, their removal), and
for the tests alone the hall's HAProxy and Redis from deploy/service.Dockerfile and the Compose hall
(deploy/compose.yaml), with `docker stats` memory figures.

Everything a `Docker` makes carries its run's name (lpos-test-<hex>): image tags, container names, the
Compose project (and so its network). `Docker.cleanup()` removes all of it and every image made since
it started (a failed build's intermediate images too), and stops the engine if it started it.
"""
from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from lpos.bench import docker as engine
from lpos.bench.docker import apt_install, healthy, run, wait_for  # noqa: F401 - the tests import healthy, wait_for from here

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "deploy"))
from hall import Hall, free_port  # noqa: E402 - the hall's status reader

RUN_PREFIX = "lpos-test-"  # a test run's name: its containers, image tags and (without "-") its Compose project
COMPOSE_PACKAGE = "docker-compose"  # Debian's Compose 1.29, when the `docker compose` plugin is not there
CUDA_LIBRARIES = ("libcuda.so*", "libcudart*", "libcublas*", "libcudnn*", "libnccl*", "libnvrtc*", "libcufft*",
                  "libcusparse*", "libtorch_cuda*", "libc10_cuda*")
# compiler commands (the test also looks for GCC's own cc1 and cc1plus as files)
COMPILERS = ("gcc", "cc", "c++", "g++", "clang", "tcc")


def compose_command() -> list[str] | None:
    if shutil.which("docker") and run(["docker", "compose", "version"], timeout=30, check=False).returncode == 0:
        return ["docker", "compose"]
    return ["docker-compose"] if shutil.which("docker-compose") else None


def mebibytes(text: str) -> float:
    """docker stats' "612.3MiB" (or kB, GiB) in MiB."""
    number, unit = re.fullmatch(r"([\d.]+)\s*([KMG]i?B|B|kB)", text.strip()).groups()
    scale = {"B": 2 ** -20, "kB": 1e3 / 2 ** 20, "KiB": 2 ** -10, "MiB": 1, "MB": 1e6 / 2 ** 20, "GiB": 1024,
             "GB": 1e9 / 2 ** 20}[unit]
    return float(number) * scale


@dataclass
class Docker(engine.Docker):
    """lpos.bench.docker's Docker with Compose halls; `cleanup()` takes them down first."""
    halls: list[ComposeHall] = field(default_factory=list)
    earlier_runs_removed: list[str] = field(default_factory=list)

    def start(self) -> Docker:
        if compose_command() is None:
            apt_install([COMPOSE_PACKAGE])
            self.installed.append(COMPOSE_PACKAGE)
        installed = self.installed
        super().start()
        self.installed = installed + self.installed
        self.earlier_runs_removed = remove_earlier_runs()
        self.images_before = engine.image_ids()
        return self

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

    def _remove_what_was_made(self) -> list[str]:
        left = [item for hall in self.halls for item in hall.down()] if engine.engine_answers() else []
        return left + super()._remove_what_was_made()


def remove_earlier_runs() -> list[str]:
    """Remove what an earlier test run that was killed left: its containers (a hall's restart with the
    engine and run beside this one), images and networks. What was removed."""
    named = run(["docker", "ps", "-a", "--format", "{{.Names}}"], timeout=60).stdout.split()
    project = RUN_PREFIX.replace("-", "")  # a Compose project's name (and its containers' and network's)
    containers = [name for name in named if name.startswith((RUN_PREFIX, project))]
    if containers:
        run(["docker", "rm", "-f", "-v", *containers], timeout=300, check=False)
    tags = run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"], timeout=60).stdout.split()
    # a base after the images built on it
    images = sorted((t for t in tags if t.partition(":")[2].startswith(RUN_PREFIX)),
                    key=lambda t: t.startswith("lpos-base"))
    if images:
        run(["docker", "rmi", "-f", *images], timeout=600, check=False)
    networks = run(["docker", "network", "ls", "--format", "{{.Name}}", "--filter", f"name={project}"],
                   timeout=60).stdout.split()
    if networks:
        run(["docker", "network", "rm", *networks], timeout=120, check=False)
    return containers + images + networks


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
