"""A lecture hall on one machine: N `streamlit run app.py` replicas behind HAProxy, all on 127.0.0.1.

    python deploy/hall.py start [--replicas 3] [--port 8500]   # returns once every replica is UP
    python deploy/hall.py status                               # HAProxy's view of each replica
    python deploy/hall.py stop

`start` gives every replica the same cookie secret (LPOS_COOKIE_SECRET, or a random one written to
the run folder, mode 600), starts each replica and waits for its /_stcore/health, writes HAProxy's
configuration from deploy/haproxy.cfg (its `server` line once per replica, the ports filled in),
starts HAProxy and waits until HAProxy's own health checks see every replica UP. The processes and
their logs are in the run folder (--dir, default /tmp/lpos-hall); `stop` ends them by the process
ids recorded there. Students open http://127.0.0.1:8500 (or the proxy's address on your network:
edit the `bind` line of deploy/haproxy.cfg).

tests/deploy/test_deploy.py and load/lecture_hall.py use the Hall class.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = Path(__file__).resolve().parent / "haproxy.cfg"
SERVER_LINE = re.compile(r"^([ \t]*)server app\d+ 127\.0\.0\.1:\d+ cookie app\d+[ \t]*$")
START_TIMEOUT_S = 180  # a replica imports torch, Streamlit and Plotly first: slow on a busy 2-core machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def render_config(template: str, *, port: int, stats_port: int, replica_ports: list[int]) -> str:
    """deploy/haproxy.cfg for these ports: the proxy's, the stats page's, one `server` line per replica."""
    lines = template.splitlines()
    at = [i for i, line in enumerate(lines) if SERVER_LINE.match(line)]
    if not at:
        raise ValueError("deploy/haproxy.cfg has no `server appN 127.0.0.1:PORT cookie appN` line")
    indent = SERVER_LINE.match(lines[at[0]]).group(1)
    servers = [f"{indent}server app{i + 1} 127.0.0.1:{p} cookie app{i + 1}" for i, p in enumerate(replica_ports)]
    lines = lines[:at[0]] + servers + [line for i, line in enumerate(lines) if i > at[0] and i not in at]
    config = "\n".join(lines) + "\n"
    config = config.replace("bind 127.0.0.1:8500", f"bind 127.0.0.1:{port}")
    return config.replace("bind 127.0.0.1:8404", f"bind 127.0.0.1:{stats_port}")


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@dataclass
class Hall:
    """Replicas and their proxy, started by start() and ended by stop() (or `with Hall(...) as hall`)."""
    replicas: int = 3
    port: int = 8500  # 0: any free port (tests)
    folder: Path = Path("/tmp/lpos-hall")
    env: dict = field(default_factory=dict)  # extra environment for the replicas
    replica_ports: list[int] = field(default_factory=list)
    stats_port: int = 0
    pids: dict[str, int] = field(default_factory=dict)  # "app1".. and "haproxy" -> process id
    children: dict = field(default_factory=dict, repr=False)  # name -> Popen, for those this process started
    killed: set = field(default_factory=set)  # replicas ended on purpose by kill()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def stats_url(self) -> str:
        return f"http://127.0.0.1:{self.stats_port}/stats;csv"

    def replica_url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.replica_ports[int(name.removeprefix('app')) - 1]}"

    def _spawn(self, name: str, command: list[str], env: dict | None = None) -> int:
        log = (self.folder / f"{name}.log").open("w")
        process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env={**os.environ, **(env or {})}, start_new_session=True)
        self.pids[name], self.children[name] = process.pid, process
        return process.pid

    def _secret(self) -> str:
        if os.environ.get("LPOS_COOKIE_SECRET"):
            return os.environ["LPOS_COOKIE_SECRET"]
        path = self.folder / "cookie-secret"
        if not path.exists():
            path.touch(mode=0o600)
            path.write_text(secrets.token_hex(32))
        return path.read_text().strip()

    def start(self) -> Hall:
        if not shutil.which("haproxy"):
            raise RuntimeError("haproxy not found: apt-get install -y haproxy (Debian's package)")
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.port == 0:  # any free ports
            self.port, self.stats_port = free_port(), free_port()
            self.replica_ports = [free_port() for _ in range(self.replicas)]
        else:  # the proxy's port, the replicas on the next ones
            self.stats_port = self.stats_port or 8404
            self.replica_ports = [self.port + 1 + i for i in range(self.replicas)]
        secret = self._secret()
        try:
            for i, replica_port in enumerate(self.replica_ports):
                self._spawn(f"app{i + 1}", [
                    sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless=true",
                    f"--server.port={replica_port}", "--server.address=127.0.0.1", "--browser.gatherUsageStats=false",
                    "--server.fileWatcherType=none"], env={"STREAMLIT_SERVER_COOKIE_SECRET": secret, **self.env})
            self._wait(lambda: all(healthy(self.replica_url(f"app{i + 1}")) for i in range(self.replicas)), "the replicas")
            config = self.folder / "haproxy.cfg"
            config.write_text(render_config(TEMPLATE.read_text(), port=self.port, stats_port=self.stats_port,
                                            replica_ports=self.replica_ports))
            subprocess.run(["haproxy", "-c", "-q", "-f", str(config)], check=True)
            self._spawn("haproxy", ["haproxy", "-db", "-f", str(config)])
            self._wait(lambda: healthy(self.url) and all(s == "UP" for s in self.status().values()), "HAProxy")
        except BaseException:
            self.stop()
            raise
        (self.folder / "hall.json").write_text(json.dumps(
            {"url": self.url, "stats": self.stats_url, "pids": self.pids, "replica_ports": self.replica_ports}, indent=2))
        return self

    def _wait(self, ready, what: str) -> None:
        deadline = time.time() + START_TIMEOUT_S
        while time.time() < deadline:
            dead = [name for name, process in self.children.items() if process.poll() is not None
                    and name not in self.killed]
            if dead:
                raise RuntimeError(f"{dead} exited: see {self.folder}/{dead[0]}.log")
            if ready():
                return
            time.sleep(0.5)
        raise RuntimeError(f"{what} did not come up within {START_TIMEOUT_S} s: logs in {self.folder}")

    def status(self) -> dict[str, str]:
        """HAProxy's view of each replica: {"app1": "UP", "app2": "DOWN", ...} (empty if it cannot be asked)."""
        try:
            with urllib.request.urlopen(self.stats_url, timeout=2) as response:
                rows = csv.DictReader(io.StringIO(response.read().decode().lstrip("# ")))
                return {row["svname"]: row["status"] for row in rows if row["pxname"] == "replicas"
                        and row["svname"] not in ("FRONTEND", "BACKEND")}
        except OSError:
            return {}

    def kill(self, name: str) -> None:
        """The fault: SIGKILL one replica (no goodbye to its browsers)."""
        self.killed.add(name)
        os.kill(self.pids[name], signal.SIGKILL)

    def stop(self) -> None:
        for name, pid in reversed(list(self.pids.items())):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for name, pid in self.pids.items():
            process = self.children.get(name)
            deadline = time.time() + 20
            while time.time() < deadline and (process.poll() is None if process else _alive(pid)):
                time.sleep(0.1)
            if process.poll() is None if process else _alive(pid):
                os.kill(pid, signal.SIGKILL)
        self.pids, self.children = {}, {}
        (self.folder / "hall.json").unlink(missing_ok=True)

    def __enter__(self) -> Hall:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python deploy/hall.py", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--port", type=int, default=8500, help="the proxy's port (replicas: the next ones)")
    parser.add_argument("--stats-port", type=int, default=8404, help="HAProxy's status page")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/lpos-hall"), help="run folder: logs, pids, config")
    args = parser.parse_args(argv)
    record = args.dir / "hall.json"
    if args.action == "start":
        if record.exists():
            print(f"a hall is already recorded in {record}: `python deploy/hall.py stop` first", file=sys.stderr)
            return 1
        if args.replicas < 1:
            parser.error("--replicas must be at least 1")
        hall = Hall(replicas=args.replicas, port=args.port, stats_port=args.stats_port, folder=args.dir).start()
        print(f"{args.replicas} replicas behind {hall.url} (HAProxy's page: {hall.stats_url.removesuffix(';csv')})")
        return 0
    if not record.exists():
        print(f"no hall recorded in {record}", file=sys.stderr)
        return 1
    saved = json.loads(record.read_text())
    hall = Hall(folder=args.dir, pids=saved["pids"], replica_ports=saved["replica_ports"],
                port=int(saved["url"].rsplit(":", 1)[1]), stats_port=int(saved["stats"].split(":")[2].split("/")[0]))
    if args.action == "status":
        print(json.dumps(hall.status(), indent=2))
        return 0
    hall.stop()
    print("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
