"""The cloud bench's memory and CPU figures of a container, read from the host: nothing runs inside
the container to read them."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class Cgroup:
    """A running container's cgroup, read from the host (cgroup v1 or v2): memory as `docker stats`
    counts it (usage less the inactive page cache), the kernel's high-water mark (page cache
    included), CPU seconds and OOM kills. Reads give None once the container is gone."""
    memory: Path  # the memory controller's folder (v2: the unified one)
    cpu: Path  # v1: cpuacct's folder; v2: the unified one
    v2: bool

    @classmethod
    def of(cls, pid: int) -> Cgroup:
        """The cgroup of the process `pid` (a container's first process, seen from the host)."""
        lines = [line.split(":", 2) for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines()]
        paths = {controller: path for _, controllers, path in lines for controller in controllers.split(",")}
        v1 = Path("/sys/fs/cgroup/memory") / paths.get("memory", "").lstrip("/")
        if "memory" in paths and (v1 / "memory.usage_in_bytes").exists():
            return cls(v1, Path("/sys/fs/cgroup/cpuacct") / paths["cpuacct"].lstrip("/"), v2=False)
        unified = Path("/sys/fs/cgroup") / paths.get("", "").lstrip("/")
        if "" in paths and (unified / "memory.current").exists():
            return cls(unified, unified, v2=True)
        raise RuntimeError(f"no memory cgroup of process {pid} under /sys/fs/cgroup: run on the Docker host")

    def _read(self, folder: Path, name: str) -> str | None:
        try:
            return (folder / name).read_text()
        except OSError:
            return None

    def _stat(self, folder: Path, name: str, key: str) -> int | None:
        text = self._read(folder, name)
        values = dict(line.split() for line in text.splitlines()) if text else {}
        return int(values[key]) if key in values else None

    def memory_mb(self) -> float | None:
        usage = self._read(self.memory, "memory.current" if self.v2 else "memory.usage_in_bytes")
        inactive = self._stat(self.memory, "memory.stat", "inactive_file" if self.v2 else "total_inactive_file")
        if usage is None or inactive is None:
            return None
        return (int(usage) - min(inactive, int(usage))) / 2 ** 20

    def high_water_mb(self) -> float | None:
        peak = self._read(self.memory, "memory.peak" if self.v2 else "memory.max_usage_in_bytes")
        return None if peak is None else int(peak) / 2 ** 20

    def cpu_s(self) -> float | None:
        if self.v2:
            usec = self._stat(self.cpu, "cpu.stat", "usage_usec")
            return None if usec is None else usec / 1e6
        ns = self._read(self.cpu, "cpuacct.usage")
        return None if ns is None else int(ns) / 1e9

    def oom_kills(self) -> int | None:
        return self._stat(self.memory, "memory.events" if self.v2 else "memory.oom_control", "oom_kill")
