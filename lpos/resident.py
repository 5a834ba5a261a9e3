"""What an app process holds in memory: its resident size, and which of the models it loaded have gone idle.

A server keeps every model it loaded for the next run that asks for it (lpos.ui.models). Above a
resident size (`LPOS_MODEL_MEMORY_MB`) it lets go of the models no run has asked for in the last
`idle_s` seconds, least recently used first: a page that needs one again loads it again (a shipped
model in about 0.05 s). A model asked for within `idle_s` is kept however much the process holds,
so a run comparing every shipped model never loses one it is using.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable


def memory_mb() -> float:
    """This process's resident memory in MB (Linux: /proc/self/status; elsewhere 0)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class LastUse:
    """When each model was last asked for, by key; which are idle (not asked for in `idle_s` seconds)."""

    def __init__(self, idle_s: float, clock: Callable[[], float] = time.monotonic):
        self.idle_s, self.clock = idle_s, clock
        self._used: dict[str, float] = {}
        self._lock = threading.Lock()  # every session's script thread notes its models here

    def used(self, key: str) -> None:
        with self._lock:
            self._used[key] = self.clock()

    def forget(self, key: str) -> None:
        with self._lock:
            self._used.pop(key, None)

    def idle(self) -> list[str]:
        """The keys not asked for in the last `idle_s` seconds, least recently used first."""
        now = self.clock()
        with self._lock:
            return sorted((key for key, when in self._used.items() if now - when >= self.idle_s), key=self._used.get)


def release_idle(last_use: LastUse, release: Callable[[str], None], *, limit_mb: float,
                 held_mb: Callable[[], float] = memory_mb) -> list[str]:
    """While the process holds more than `limit_mb`, `release` the idle models one at a time, least recently
    used first (each release is measured before the next); returns the keys released."""
    released = []
    for key in last_use.idle():
        if held_mb() <= limit_mb:
            break
        release(key)
        last_use.forget(key)
        released.append(key)
    return released
