"""A live class: the Lesson view a teacher broadcasts and students' pages follow.

A class is a short code (what students type or open as `?class=CODE`) and a separate teacher
secret that only the teacher's browser session holds: the code reads a class, only the secret
moves it. The store keeps each class's broadcast (step, sentence, scheme, model, the lab run it
watches, and a version that grows with every change) and who follows it now, in this process's
memory (`MemoryStore`) or, with `LPOS_REDIS_URL` set, in Redis (`lpos.class_store.RedisStore`;
`lpos.class_store.open_store` picks one),
so students on other replicas behind a proxy follow the same class. Nothing here imports Streamlit;
lpos.ui.live_class draws it.

A class ends when its teacher stops it or after IDLE_EXPIRY_S without a word from the teacher's
session; a follower counts while it has polled within FOLLOWER_SEEN_S. Codes are drawn with
`secrets` from an alphabet without look-alikes (no 0/O, 1/I/L): CODE_BITS of randomness.
"""
from __future__ import annotations

import hashlib
import hmac
import math
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace

CODE_ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"  # 31 symbols: no 0/O, 1/I/L
CODE_LENGTH = 8  # shown as two groups of four: "K7QM-X4TR"
CODE_BITS = CODE_LENGTH * math.log2(len(CODE_ALPHABET))  # 39.6 bits
IDLE_EXPIRY_S = 3 * 3600  # a class nobody teaches for this long is gone
FOLLOWER_SEEN_S = 15.0  # a follower that has not polled for this long no longer counts
MAX_FOLLOWERS = 300  # per class: a lecture hall, with room to spare
MAX_CLASSES = 1_000  # per process, in memory (Redis holds its own)
MAX_TEXT_CHARS = 20_000  # the sidebar's own limit (lpos.ui.selection.MAX_CHARS): longer is cut
MAX_NAME_CHARS = 200  # a scheme or model name; the receiving page checks it against its own lists
GUESS_LIMIT, GUESS_WINDOW_S = 5, 60.0  # unknown codes one session may try in a window


class ClassError(Exception):
    """A class cannot be read or moved; the message is a sentence for the person using the page."""


class ClassEnded(ClassError):
    pass


class ClassFull(ClassError):
    pass


class NotTeacher(ClassError):
    pass


class StoreUnavailable(ClassError):
    pass


RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # a lab run's id, as lpos.lab.runs gives it (uuid hex or RQ's uuid)


@dataclass(frozen=True)
class Broadcast:
    """What the teacher's Lesson shows, and students' pages copy."""
    step: int  # 1-based lesson step
    text: str  # the sidebar sentence: students' pages show it as text only
    scheme: str
    model: str  # a shipped model's key or "untrained": never an upload, which is one browser's own
    lab_run: str = ""  # the id of the teacher's lab run the class watches train, or ""
    version: int = 0  # grows by one with every change the teacher makes

    def checked(self) -> Broadcast:
        """The same broadcast with types checked and lengths bounded (what a store keeps)."""
        if not isinstance(self.step, int) or isinstance(self.step, bool) or not 1 <= self.step <= 1_000:
            raise ValueError(f"a lesson step is a small positive integer, not {self.step!r}")
        for name in VIEW[1:]:
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"{name} must be a string, not {type(getattr(self, name)).__name__}")
        if self.lab_run and not RUN_ID.fullmatch(self.lab_run):
            raise ValueError(f"a lab run's id is up to 64 letters, digits, '-' and '_', not {self.lab_run[:80]!r}")
        return replace(self, text=self.text[:MAX_TEXT_CHARS], scheme=self.scheme[:MAX_NAME_CHARS],
                       model=self.model[:MAX_NAME_CHARS])

    def view(self) -> tuple:
        return tuple(getattr(self, name) for name in VIEW)

    def same_view(self, other: Broadcast | None) -> bool:
        return other is not None and self.view() == other.view()


VIEW = tuple(f.name for f in fields(Broadcast) if f.name != "version")  # what a class shows; a change bumps its version
READ = (*VIEW, "version")  # the fields a broadcast is read from (RedisStore)


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def secret_digest(secret: str) -> str:
    """What a store keeps of the teacher's secret: its SHA-256, never the secret."""
    return hashlib.sha256(secret.encode()).hexdigest()


def parse_code(raw: str) -> str | None:
    """A typed or linked code in its stored form ("k7qm x4tr" -> "K7QMX4TR"); None if it cannot be one."""
    if not isinstance(raw, str) or len(raw) > 40:
        return None
    code = raw.strip().upper().replace("-", "").replace(" ", "")
    return code if len(code) == CODE_LENGTH and all(c in CODE_ALPHABET for c in code) else None


def shown_code(code: str) -> str:
    return f"{code[:4]}-{code[4:]}"


@dataclass
class GuessLimiter:
    """Unknown codes one browser session tried lately; after GUESS_LIMIT in GUESS_WINDOW_S it must wait."""
    limit: int = GUESS_LIMIT
    window_s: float = GUESS_WINDOW_S
    failures: list[float] = field(default_factory=list)

    def wait_s(self, now: float) -> float:
        """Seconds before another guess is allowed (0: allowed now)."""
        self.failures = [t for t in self.failures if now - t < self.window_s]
        return 0.0 if len(self.failures) < self.limit else self.failures[0] + self.window_s - now

    def failed(self, now: float) -> None:
        self.failures.append(now)


ENDED = "This class has ended (or its code expired): the page is yours to explore."
FULL = f"This class already has {MAX_FOLLOWERS} followers, the most one class takes."
NOT_TEACHER = "Only the browser that started this class can move it."


@dataclass
class _Class:
    broadcast: Broadcast
    digest: str
    active: float  # when the teacher last spoke
    followers: dict[str, float] = field(default_factory=dict)  # session -> last poll


class MemoryStore:
    """Classes in this process's memory: one server, nothing to install."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, idle_expiry_s: float = IDLE_EXPIRY_S,
                 max_followers: int = MAX_FOLLOWERS, max_classes: int = MAX_CLASSES):
        self.clock, self.idle_expiry_s = clock, idle_expiry_s
        self.max_followers, self.max_classes = max_followers, max_classes
        self._classes: dict[str, _Class] = {}
        self._lock = threading.Lock()

    def _live(self, code: str, now: float) -> _Class:
        entry = self._classes.get(code)
        if entry is None or now - entry.active >= self.idle_expiry_s:
            self._classes.pop(code, None)
            raise ClassEnded(ENDED)
        return entry

    def _taught(self, code: str, secret: str) -> _Class:
        """The live class `code`, for its teacher only (kept alive: its teacher spoke). Under the lock."""
        entry = self._live(code, self.clock())
        if not hmac.compare_digest(entry.digest, secret_digest(secret)):
            raise NotTeacher(NOT_TEACHER)
        entry.active = self.clock()
        return entry

    def start(self, broadcast: Broadcast) -> tuple[str, str]:
        """A new class showing `broadcast`: (code, teacher secret)."""
        broadcast, secret = replace(broadcast.checked(), version=1), new_secret()
        with self._lock:
            now = self.clock()
            for code in [c for c, e in self._classes.items() if now - e.active >= self.idle_expiry_s]:
                del self._classes[code]
            if len(self._classes) >= self.max_classes:
                raise ClassFull(f"This server already runs {self.max_classes} classes; try again later.")
            code = new_code()
            while code in self._classes:
                code = new_code()
            self._classes[code] = _Class(broadcast, secret_digest(secret), now)
        return code, secret

    def publish(self, code: str, secret: str, broadcast: Broadcast) -> Broadcast:
        """The teacher's view (a change bumps the version; the same view only keeps the class alive)."""
        broadcast = broadcast.checked()
        with self._lock:
            entry = self._taught(code, secret)
            if not broadcast.same_view(entry.broadcast):
                entry.broadcast = replace(broadcast, version=entry.broadcast.version + 1)
            return entry.broadcast

    def resume(self, code: str, secret: str) -> Broadcast:
        """The class's view for its teacher coming back (on another replica, in a new session): NotTeacher
        for a wrong secret, ClassEnded for a class that is over. Keeps the class alive, counts no follower."""
        with self._lock:
            return self._taught(code, secret).broadcast

    def follow(self, code: str, session: str, *, known_version: int = -1) -> Broadcast | int:
        """A student's poll: counts the session as following, and returns the broadcast, or only its
        version when that is `known_version` (nothing new to send)."""
        with self._lock:
            now = self.clock()
            entry = self._live(code, now)
            entry.followers = {s: t for s, t in entry.followers.items() if now - t < FOLLOWER_SEEN_S}
            if session not in entry.followers and len(entry.followers) >= self.max_followers:
                raise ClassFull(FULL)
            entry.followers[session] = now
            return entry.broadcast.version if entry.broadcast.version == known_version else entry.broadcast

    def leave(self, code: str, session: str) -> None:
        with self._lock:
            if code in self._classes:
                self._classes[code].followers.pop(session, None)

    def followers(self, code: str) -> int:
        """How many sessions follow now (polled within FOLLOWER_SEEN_S)."""
        with self._lock:
            now = self.clock()
            entry = self._live(code, now)
            return sum(1 for t in entry.followers.values() if now - t < FOLLOWER_SEEN_S)

    def end(self, code: str, secret: str) -> None:
        with self._lock:
            entry = self._classes.get(code)
            if entry is not None:
                if not hmac.compare_digest(entry.digest, secret_digest(secret)):
                    raise NotTeacher(NOT_TEACHER)
                del self._classes[code]
