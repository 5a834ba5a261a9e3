"""Where a live class lives: `open_store` gives this process's store, a RedisStore (LPOS_REDIS_URL: every replica
behind a proxy sees the same classes) or lpos.classroom's MemoryStore (what a class is, lpos.classroom says)."""
from __future__ import annotations

from lpos import settings
from lpos.classroom import (ENDED, FOLLOWER_SEEN_S, FULL, IDLE_EXPIRY_S, MAX_FOLLOWERS, NOT_TEACHER, READ, VIEW,
                            Broadcast, ClassEnded, ClassFull, MemoryStore, NotTeacher, StoreUnavailable, new_code,
                            new_secret, parse_code, secret_digest)

# Each Redis step is one Lua script: atomic across replicas, timed by the Redis server's own clock.
# KEYS[1]: the class hash (digest, version and the VIEW fields); KEYS[2]: its followers (a sorted set,
# session -> last poll). Both expire together IDLE_EXPIRY_S after the teacher's last word. The VIEW fields
# travel as names and values, so a field added to Broadcast changes no script.
_TEACHER = """local digest = redis.call('HGET', KEYS[1], 'digest')
if not digest then return 'ended' end
if digest ~= ARGV[1] then return 'not_teacher' end
"""  # a script's first lines when only the class's teacher may run it
_START = """if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'digest', ARGV[1], 'version', 1, unpack(ARGV, 3))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1"""  # ARGV: digest, expiry in ms, then each VIEW field's name and value
_PUBLISH = _TEACHER + """local names, changed = {}, false
for i = 3, #ARGV, 2 do
  names[#names + 1] = ARGV[i]
  if redis.call('HGET', KEYS[1], ARGV[i]) ~= ARGV[i + 1] then changed = true end
end
if changed then
  redis.call('HINCRBY', KEYS[1], 'version', 1)
  redis.call('HSET', KEYS[1], unpack(ARGV, 3))
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
names[#names + 1] = 'version'
return redis.call('HMGET', KEYS[1], unpack(names))"""  # ARGV as _START's
_RESUME = _TEACHER + """redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return redis.call('HMGET', KEYS[1], unpack(ARGV, 3))"""  # ARGV: digest, expiry in ms, the fields to read
_PRUNE = """local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. string.format('%.6f', now - tonumber(ARGV[1])))
"""
_FOLLOW = """local version = redis.call('HGET', KEYS[1], 'version')
if not version then return 'ended' end
""" + _PRUNE + """if not redis.call('ZSCORE', KEYS[2], ARGV[2]) and redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then
  return 'full'
end
redis.call('ZADD', KEYS[2], now, ARGV[2])
redis.call('PEXPIRE', KEYS[2], math.max(redis.call('PTTL', KEYS[1]), 1))
if version == ARGV[4] then return tonumber(version) end
return redis.call('HMGET', KEYS[1], unpack(ARGV, 5))"""  # ARGV: seen within, session, most followers, known version, fields
_FOLLOWERS = """if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
""" + _PRUNE + "return redis.call('ZCARD', KEYS[2])"
_END = """local digest = redis.call('HGET', KEYS[1], 'digest')
if not digest then return 1 end
if digest ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1], KEYS[2])
return 1"""


class RedisStore:
    """Classes in Redis (LPOS_REDIS_URL): every replica behind a proxy sees the same classes."""

    def __init__(self, url: str, *, idle_expiry_s: float = IDLE_EXPIRY_S, max_followers: int = MAX_FOLLOWERS):
        import redis  # only a Redis deployment needs the client

        self._errors = redis.RedisError
        self.idle_ms, self.max_followers = max(1, round(idle_expiry_s * 1000)), max_followers
        self.redis = redis.Redis.from_url(url, decode_responses=True, socket_timeout=3, socket_connect_timeout=3)
        self._scripts = {name: self.redis.register_script(source) for name, source in
                         {"start": _START, "publish": _PUBLISH, "resume": _RESUME, "follow": _FOLLOW, "followers": _FOLLOWERS,
                          "end": _END}.items()}

    def _run(self, name: str, code: str, *args) -> object:
        if parse_code(code) != code:  # only the alphabet's own codes become keys
            raise ClassEnded(ENDED)
        try:
            return self._scripts[name](keys=[f"lpos:class:{code}", f"lpos:class:{code}:followers"], args=args)
        except self._errors as error:
            raise StoreUnavailable(f"The class server cannot be reached ({type(error).__name__}); "
                                   "the page works on its own meanwhile.") from error

    @staticmethod
    def _broadcast(found: list[str | None]) -> Broadcast:
        """A broadcast from the READ fields (one a class started by an older lpos lacks reads as "")."""
        step, *view, version = [value or "" for value in found]
        return Broadcast(int(step), *view, version=int(version))

    @classmethod
    def _taught(cls, answer) -> Broadcast:
        """A teacher's script's answer: the class's view, or why not."""
        if answer in ("ended", "not_teacher"):
            raise ClassEnded(ENDED) if answer == "ended" else NotTeacher(NOT_TEACHER)
        return cls._broadcast(answer)

    @staticmethod
    def _named(broadcast: Broadcast) -> list:
        """The VIEW fields as name, value, name, value, ... (what _START and _PUBLISH take)."""
        return [item for name in VIEW for item in (name, getattr(broadcast, name))]

    def start(self, broadcast: Broadcast) -> tuple[str, str]:
        broadcast, secret = broadcast.checked(), new_secret()
        while True:
            code = new_code()
            if self._run("start", code, secret_digest(secret), self.idle_ms, *self._named(broadcast)):
                return code, secret

    def publish(self, code: str, secret: str, broadcast: Broadcast) -> Broadcast:
        return self._taught(self._run("publish", code, secret_digest(secret), self.idle_ms,
                                      *self._named(broadcast.checked())))

    def resume(self, code: str, secret: str) -> Broadcast:
        return self._taught(self._run("resume", code, secret_digest(secret), self.idle_ms, *READ))

    def follow(self, code: str, session: str, *, known_version: int = -1) -> Broadcast | int:
        answer = self._run("follow", code, FOLLOWER_SEEN_S, session[:64], self.max_followers, known_version, *READ)
        if answer == "ended":
            raise ClassEnded(ENDED)
        if answer == "full":
            raise ClassFull(FULL)
        return answer if isinstance(answer, int) else self._broadcast(answer)

    def leave(self, code: str, session: str) -> None:
        if parse_code(code) == code:
            try:
                self.redis.zrem(f"lpos:class:{code}:followers", session[:64])
            except self._errors:
                pass  # the follower drops out of the count by itself after FOLLOWER_SEEN_S

    def followers(self, code: str) -> int:
        count = self._run("followers", code, FOLLOWER_SEEN_S)
        if count < 0:
            raise ClassEnded(ENDED)
        return count

    def end(self, code: str, secret: str) -> None:
        if not self._run("end", code, secret_digest(secret)):
            raise NotTeacher(NOT_TEACHER)


def open_store(redis_url: str | None = None) -> MemoryStore | RedisStore:
    """A RedisStore at `redis_url` (LPOS_REDIS_URL when not given), else a MemoryStore for this process."""
    url = (settings.redis_url() if redis_url is None else redis_url).strip()
    return RedisStore(url) if url else MemoryStore()
