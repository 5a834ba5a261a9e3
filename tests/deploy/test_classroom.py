"""The live class store (lpos.classroom): codes, the teacher's secret, following, expiry, bounds,
on both backends: MemoryStore, and RedisStore against a real `redis-server` on a free local port."""
from __future__ import annotations

import math
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import replace

import pytest

from conftest import ROOT, free_port
from lpos import classroom
from lpos.classroom import (CODE_ALPHABET, Broadcast, ClassEnded, ClassFull, GuessLimiter, MemoryStore, NotTeacher,
                            StoreUnavailable, parse_code, shown_code)
from lpos.class_store import RedisStore, open_store

VIEW = Broadcast(step=3, text="The dog bit the man", scheme="learned", model="learned")


class Clock:
    def __init__(self):
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    """A real redis-server on 127.0.0.1 and a free port, its files in a temp folder; stopped after the module."""
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed (Debian: apt-get install -y redis-server; .ci/run installs it)")
    port, folder = free_port(), tmp_path_factory.mktemp("redis")
    process = subprocess.Popen([server, "--bind", "127.0.0.1", "--port", str(port), "--dir", str(folder),
                                "--save", "", "--appendonly", "no", "--protected-mode", "yes"],
                               stdout=(folder / "redis.log").open("w"), stderr=subprocess.STDOUT)
    import redis

    client = redis.Redis(host="127.0.0.1", port=port)
    deadline = time.monotonic() + 20
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise RuntimeError(f"redis-server did not start: {(folder / 'redis.log').read_text()[-1000:]}")
            time.sleep(0.05)
    yield f"redis://127.0.0.1:{port}/0"
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture(params=["memory", "redis"])
def make_store(request):
    """A factory of empty stores of one backend: make_store(max_followers=3)."""
    if request.param == "memory":
        return MemoryStore
    url = request.getfixturevalue("redis_url")

    def make(**options):
        store = RedisStore(url, **options)
        store.redis.flushdb()
        return store
    return make


@pytest.fixture
def store(make_store):
    return make_store()


def test_codes_have_thirty_bits_and_no_look_alikes():
    assert not set(CODE_ALPHABET) & set("01OIL")
    assert classroom.CODE_BITS >= 30
    codes = [classroom.new_code() for _ in range(3_000)]
    assert len(set(codes)) == len(codes)
    assert all(len(c) == classroom.CODE_LENGTH and set(c) <= set(CODE_ALPHABET) for c in codes)
    counts = Counter("".join(codes))  # every symbol drawn, none far from uniform (24,000 draws, 774 each expected)
    assert set(counts) == set(CODE_ALPHABET)
    expected = len(codes) * classroom.CODE_LENGTH / len(CODE_ALPHABET)
    assert all(abs(n - expected) < 6 * math.sqrt(expected) for n in counts.values())


@pytest.mark.parametrize(("typed", "stored"), [("k7qm-x4tr", "K7QMX4TR"), (" K7QM X4TR ", "K7QMX4TR"),
                                              ("K7QMX4T0", None), ("K7QM", None), ("K7QMX4TR9", None),
                                              ("../../etc", None), ("", None), ("ⅠⅠⅠⅠⅠⅠⅠⅠ", None), ("A" * 1000, None)])
def test_codes_are_parsed_strictly(typed, stored):
    assert parse_code(typed) == stored


def test_a_code_is_shown_in_two_groups():
    assert shown_code("K7QMX4TR") == "K7QM-X4TR"


def test_students_follow_what_the_teacher_shows(store):
    code, secret = store.start(VIEW)
    assert parse_code(code) == code and secret not in code
    first = store.follow(code, "student-a")
    assert first.same_view(VIEW) and first.version == 1
    assert store.follow(code, "student-a", known_version=1) == 1  # nothing new: only the version comes back
    moved = store.publish(code, secret, Broadcast(step=4, text="A new sentence", scheme="rope", model="rope"))
    assert moved.version == 2
    seen = store.follow(code, "student-a", known_version=1)
    assert (seen.step, seen.text, seen.scheme, seen.model, seen.version) == (4, "A new sentence", "rope", "rope", 2)
    assert store.publish(code, secret, Broadcast(4, "A new sentence", "rope", "rope")).version == 2  # same view


def test_the_teachers_lab_run_reaches_followers_and_is_checked(store):
    code, secret = store.start(VIEW)
    run_id = "0f3a-9b2c_77"
    assert store.publish(code, secret, replace(VIEW, lab_run=run_id)).version == 2  # a run shown is a change
    seen = store.follow(code, "student", known_version=1)
    assert (seen.lab_run, seen.version) == (run_id, 2) and seen.same_view(replace(VIEW, lab_run=run_id))
    assert store.resume(code, secret).lab_run == run_id
    for forged in ("../x", "a b", "x" * 65, "<b>", "run\n"):
        with pytest.raises(ValueError, match="lab run"):
            store.publish(code, secret, replace(VIEW, lab_run=forged))
    assert store.publish(code, secret, VIEW).lab_run == ""  # the teacher stops showing it
    assert store.follow(code, "student").version == 3


def test_only_the_teachers_secret_moves_or_ends_the_class(store):
    code, secret = store.start(VIEW)
    for forged in ("", code, secret[:-1] + ("A" if secret[-1] != "A" else "B"), "x" * 10_000):
        with pytest.raises(NotTeacher):
            store.publish(code, forged, Broadcast(9, "hijacked", "none", "none"))
        with pytest.raises(NotTeacher):
            store.end(code, forged)
    assert store.follow(code, "student").same_view(VIEW)
    other_code, other_secret = store.start(VIEW)
    with pytest.raises(NotTeacher):  # one class's secret does not move another
        store.publish(code, other_secret, Broadcast(9, "hijacked", "none", "none"))
    store.end(code, secret)
    with pytest.raises(ClassEnded):
        store.follow(code, "student")
    assert store.follow(other_code, "student").same_view(VIEW)


def test_the_teacher_takes_the_class_back_with_its_secret_only(store):
    """A teacher's new session (another replica) gets the class's current view back; a forged secret does
    not, an ended class is ended, and taking back counts no follower."""
    code, secret = store.start(VIEW)
    store.publish(code, secret, Broadcast(step=5, text="Where it was", scheme="alibi", model="alibi"))
    back = store.resume(code, secret)
    assert (back.step, back.text, back.scheme, back.model, back.version) == (5, "Where it was", "alibi", "alibi", 2)
    assert store.followers(code) == 0
    for forged in ("", secret[:-1] + ("A" if secret[-1] != "A" else "B")):
        with pytest.raises(NotTeacher):
            store.resume(code, forged)
    store.end(code, secret)
    with pytest.raises(ClassEnded):
        store.resume(code, secret)


def test_unknown_and_forged_codes_are_ended_classes(store):
    with pytest.raises(ClassEnded, match="ended"):
        store.follow(classroom.new_code(), "student")
    with pytest.raises(ClassEnded):
        store.followers(classroom.new_code())


def test_followers_are_counted_and_leaving_drops_one(store):
    code, secret = store.start(VIEW)
    assert store.followers(code) == 0
    for name in ("a", "b", "c"):
        store.follow(code, name)
    store.follow(code, "a")  # polling again does not count twice
    assert store.followers(code) == 3
    store.leave(code, "b")
    assert store.followers(code) == 2


def test_a_class_holds_a_bounded_number_of_followers(make_store):
    bounded = make_store(max_followers=3)
    code, _ = bounded.start(VIEW)
    for name in ("a", "b", "c"):
        bounded.follow(code, name)
    with pytest.raises(ClassFull):
        bounded.follow(code, "d")
    bounded.follow(code, "a")  # one already in keeps following
    bounded.leave(code, "c")
    bounded.follow(code, "d")  # a seat freed is taken
    assert bounded.followers(code) == 3


def test_a_follower_that_stops_polling_stops_counting_and_frees_its_seat():
    clock = Clock()
    store = MemoryStore(clock=clock, max_followers=1)
    code, _ = store.start(VIEW)
    store.follow(code, "a")
    with pytest.raises(ClassFull):
        store.follow(code, "b")
    clock.now += classroom.FOLLOWER_SEEN_S
    assert store.followers(code) == 0
    store.follow(code, "b")


def test_a_class_expires_after_hours_without_its_teacher():
    clock = Clock()
    store = MemoryStore(clock=clock)
    code, secret = store.start(VIEW)
    clock.now += classroom.IDLE_EXPIRY_S - 1
    store.follow(code, "student")  # students polling do not keep a class alive; the teacher does
    store.publish(code, secret, VIEW)
    clock.now += classroom.IDLE_EXPIRY_S - 1
    assert store.follow(code, "student").same_view(VIEW)
    clock.now += 1
    with pytest.raises(ClassEnded):
        store.follow(code, "student")
    with pytest.raises(ClassEnded):
        store.publish(code, secret, VIEW)


def test_redis_classes_expire_with_their_teacher(redis_url):
    store = RedisStore(redis_url, idle_expiry_s=0.3)
    code, secret = store.start(VIEW)
    store.follow(code, "student")
    assert 0 < store.redis.pttl(f"lpos:class:{code}") <= 300
    assert 0 < store.redis.pttl(f"lpos:class:{code}:followers") <= 300
    deadline = time.monotonic() + 5
    while store.redis.exists(f"lpos:class:{code}") and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(ClassEnded):
        store.follow(code, "student")
    assert not store.redis.exists(f"lpos:class:{code}:followers")


def test_redis_keeps_only_a_digest_of_the_secret(redis_url):
    store = RedisStore(redis_url)
    code, secret = store.start(VIEW)
    held = store.redis.hgetall(f"lpos:class:{code}")
    assert secret not in "".join(held.values())
    assert held["digest"] == classroom.secret_digest(secret)


def test_the_broadcast_is_bounded_and_checked(store):
    code, secret = store.start(VIEW)
    long = store.publish(code, secret, Broadcast(2, "x" * 50_000, "s" * 500, "m" * 500))
    assert (len(long.text), len(long.scheme), len(long.model)) == (classroom.MAX_TEXT_CHARS, 200, 200)
    for bad in (Broadcast(0, "", "none", "none"), Broadcast(True, "", "none", "none"),
                Broadcast("4", "", "none", "none"), Broadcast(2, None, "none", "none")):
        with pytest.raises(ValueError):
            store.publish(code, secret, bad)
    text = "<script>alert(1)</script> **bold** \x00 🦄 ' \" -- ]]"
    store.publish(code, secret, Broadcast(5, text, "rope", "rope"))
    assert store.follow(code, "student").text == text  # kept as given; the page shows it as text


def test_guesses_are_rate_limited():
    limiter = GuessLimiter(limit=3, window_s=60)
    for t in (0, 1, 2):
        assert limiter.wait_s(t) == 0
        limiter.failed(t)
    assert limiter.wait_s(3) == pytest.approx(57)
    assert limiter.wait_s(60.5) == 0  # the first failure left the window


def test_a_class_in_redis_outlives_the_process_that_started_it(redis_url):
    """A replica restart: one Python process starts a class and exits; a fresh one follows and moves it."""
    started = subprocess.run(
        [sys.executable, "-c", "from lpos.classroom import Broadcast; from lpos.class_store import RedisStore; "
         f"c, s = RedisStore({redis_url!r}).start(Broadcast(6, 'Kept in Redis', 'rope', 'rope')); print(c, s)"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    code, secret = started.stdout.split()
    store = open_store(redis_url)
    assert isinstance(store, RedisStore)
    assert store.follow(code, "student").same_view(Broadcast(6, "Kept in Redis", "rope", "rope"))
    assert store.publish(code, secret, Broadcast(7, "Kept in Redis", "rope", "rope")).version == 2


def test_an_unreachable_redis_is_a_message_not_a_crash():
    store = RedisStore(f"redis://127.0.0.1:{free_port()}/0")
    with pytest.raises(StoreUnavailable, match="cannot be reached"):
        store.start(VIEW)
    with pytest.raises(StoreUnavailable):
        store.follow("K7QMX4TR", "student")


def test_without_a_url_classes_live_in_memory(monkeypatch):
    monkeypatch.delenv("LPOS_REDIS_URL", raising=False)
    assert isinstance(open_store(), MemoryStore)
    monkeypatch.setenv("LPOS_REDIS_URL", "redis://127.0.0.1:1/0")
    assert isinstance(open_store(), RedisStore)
