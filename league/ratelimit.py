"""Rate limits on the LM's ``/mcp``: one token bucket per agent token and one per client address.

Limits count items, not requests: every item of a JSON-RPC batch is one call. A tool call
(registration included) takes one token from each bucket that applies to it, and any other request
(``initialize``, ``tools/list``, ``resources/read``, an unknown method: ``LeagueManagerToolset.admit``
in league/mcp/toolset.py) one from those of its bearer token and its address:

* the presented token's bucket (``auth_token`` or ``Authorization: Bearer``), refilled at the
  league's ``rate_limit_per_minute``; a referee's token gets ``MCP_RATE_LIMIT_REFEREE_FACTOR``
  times that, because one referee reports the results of many matches;
* the client address's bucket in that league, refilled at ``rate_limit_per_minute`` times
  ``MCP_RATE_LIMIT_ADDRESS_FACTOR`` (several agents may share an address: one host, a NAT);
* when the message names no league, the address's site-wide bucket, refilled at
  ``MCP_RATE_LIMIT_PER_ADDRESS`` per minute.

Registrations (``register_player``, ``register_referee``) also draw from buckets of their own,
so that one machine cannot fill a league with agents: the client address's, holding
``REGISTRATION_RATE_PER_ADDRESS`` registrations refilled over ``REGISTRATION_RATE_PER_ADDRESS_WINDOW``
seconds; its network's (its /24 or /64: rotating addresses in one network is one sender),
``REGISTRATION_RATE_PER_NETWORK`` over the same window; and the league's (named, or the one
open when none is named), ``REGISTRATION_RATE_PER_LEAGUE``
over ``REGISTRATION_RATE_PER_LEAGUE_WINDOW`` seconds. Addresses in
``REGISTRATION_RATE_EXEMPT_NETWORKS`` (loopback by default: the LM's own machine, where the demo,
the benchmarks and the organiser's referees run) skip them all.

A bucket holds at most one window's worth (a minute for calls), so a burst is fine and a steady
overload is not.
An empty bucket is answered with LEAGUE_ERROR E017 (retryable) and HTTP 429, before the call
touches the database or the event log.

Without ``REDIS_URL`` the buckets live in this process (one LM process); with it they live in
Redis (one Lua script per call, atomic), so several LM processes share the limits. If Redis
cannot be reached the call is let through: the league keeps running, the limit is best effort.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import ipaddress
import logging
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from league.endpoints import network_of
from leagueproto.errors import ErrorCode, LeagueError

log = logging.getLogger(__name__)

_MAX_LOCAL_BUCKETS = 100_000


@dataclass(frozen=True)
class Bucket:
    key: str
    per_minute: int  # the bucket's size: this many calls per ``window`` seconds
    what: str  # for the error description: "token", "address", "league"
    window: float = 60.0
    counts: str = "calls"  # or "registrations"

    @property
    def capacity(self) -> float:
        return float(self.per_minute)

    @property
    def rate(self) -> float:
        return self.per_minute / self.window


# -- choosing the buckets -------------------------------------------------------------------------
_league_limits: dict[str, tuple[int | None, float]] = {}


def league_limit(league_id: str) -> int | None:
    """The league's ``rate_limit_per_minute`` (cached a few seconds); None for an unknown league."""
    now = time.monotonic()
    cached = _league_limits.get(league_id)
    if cached is not None and cached[1] > now:
        return cached[0]
    from league.models import League

    limit = League.objects.filter(league_id=league_id).values_list("rate_limit_per_minute", flat=True).first()
    if len(_league_limits) > 10_000:
        _league_limits.clear()
    _league_limits[league_id] = (limit, now + settings.LEAGUE_RATE_LIMIT_CACHE_TTL)
    return limit


def buckets_for(message: Any, bearer: str | None, client_host: str | None, limit: int | None) -> list[Bucket]:
    """The buckets one call draws from. ``limit`` is the named league's limit (None: no league)."""
    prefix = settings.MCP_RATE_LIMIT_PREFIX
    found: list[Bucket] = []
    league_id = message.get("league_id") if isinstance(message, dict) else None
    league_key = league_id if isinstance(league_id, str) and limit is not None else ""
    token = message.get("auth_token") if isinstance(message, dict) else None
    if not isinstance(token, str) or not token:
        token = bearer
    if token:
        sender = message.get("sender") if isinstance(message, dict) else None
        per_token = limit if limit is not None else settings.MCP_RATE_LIMIT_PER_TOKEN
        if isinstance(sender, str) and sender.startswith("referee:"):
            per_token *= settings.MCP_RATE_LIMIT_REFEREE_FACTOR
        digest = hashlib.sha256(token.encode()).hexdigest()[:24]
        found.append(Bucket(f"{prefix}t:{digest}", per_token, "token"))
    if client_host:
        if league_key:
            per_address = (limit or 0) * settings.MCP_RATE_LIMIT_ADDRESS_FACTOR
        else:
            per_address = settings.MCP_RATE_LIMIT_PER_ADDRESS
        found.append(Bucket(f"{prefix}a:{league_key}:{client_host}", per_address, "address"))
    return [b for b in found if b.per_minute > 0]


REGISTRATION_TOOLS = frozenset({"register_player", "register_referee"})


@functools.lru_cache(maxsize=1024)
def _exempt(client_host: str, exempt: tuple[str, ...]) -> bool:
    try:
        address = ipaddress.ip_address(client_host.split("%")[0])
    except ValueError:
        return False
    return any(address in ipaddress.ip_network(net, strict=False) for net in exempt)


def registration_buckets(message: Any, client_host: str | None) -> list[Bucket]:
    """The buckets a registration draws from besides ``buckets_for``'s: its address's and its
    league's (the league as named: a registration naming none goes to the one league open)."""
    if client_host and _exempt(client_host, tuple(settings.REGISTRATION_RATE_EXEMPT_NETWORKS)):
        return []
    prefix = settings.MCP_RATE_LIMIT_PREFIX
    league_id = message.get("league_id") if isinstance(message, dict) else None
    league_key = league_id if isinstance(league_id, str) and 0 < len(league_id) <= 64 else ""
    found = [
        Bucket(
            f"{prefix}rl:{league_key}",
            settings.REGISTRATION_RATE_PER_LEAGUE,
            "league",
            float(settings.REGISTRATION_RATE_PER_LEAGUE_WINDOW),
            "registrations",
        )
    ]
    if client_host:
        found.append(
            Bucket(
                f"{prefix}ra:{client_host}",
                settings.REGISTRATION_RATE_PER_ADDRESS,
                "address",
                float(settings.REGISTRATION_RATE_PER_ADDRESS_WINDOW),
                "registrations",
            )
        )
        # Its network's too (a /24, a /64): rotating addresses inside one network (IPv6 gives a
        # host a whole /64) is still one sender.
        network = network_of(client_host)
        if network:
            found.append(
                Bucket(
                    f"{prefix}rn:{network}",
                    settings.REGISTRATION_RATE_PER_NETWORK,
                    "network",
                    float(settings.REGISTRATION_RATE_PER_ADDRESS_WINDOW),
                    "registrations",
                )
            )
    return [b for b in found if b.per_minute > 0 and b.window > 0]


# -- the two stores -------------------------------------------------------------------------------
class LocalBuckets:
    """Token buckets in this process (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state: dict[str, tuple[float, float]] = {}

    def take(self, buckets: list[Bucket]) -> Bucket | None:
        """Take one token from every bucket, or from none: returns the first empty bucket."""
        now = time.monotonic()
        with self._lock:
            levels = []
            for bucket in buckets:
                tokens, stamp = self._state.get(bucket.key, (bucket.capacity, now))
                tokens = min(bucket.capacity, tokens + (now - stamp) * bucket.rate)
                if tokens < 1.0:
                    self._state[bucket.key] = (tokens, now)
                    return bucket
                levels.append(tokens)
            for bucket, tokens in zip(buckets, levels, strict=True):
                self._state[bucket.key] = (tokens - 1.0, now)
            if len(self._state) > _MAX_LOCAL_BUCKETS:
                self._forget_full(now)
        return None

    def _forget_full(self, now: float) -> None:
        # A bucket idle for a minute is full again: forgetting it changes nothing.
        self._state = {k: v for k, v in self._state.items() if now - v[1] < 60.0}

    def clear(self) -> None:
        with self._lock:
            self._state.clear()


# KEYS: bucket keys; ARGV: per key (capacity, rate per second). Returns 0, or the 1-based index
# of the first empty bucket (then nothing is taken). Redis's clock, so all LM processes agree.
_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local levels = {}
for i, key in ipairs(KEYS) do
  local cap = tonumber(ARGV[2 * i - 1])
  local rate = tonumber(ARGV[2 * i])
  local v = redis.call('HMGET', key, 'tokens', 'at')
  local tokens = tonumber(v[1]) or cap
  local at = tonumber(v[2]) or now
  tokens = math.min(cap, tokens + math.max(0, now - at) * rate)
  if tokens < 1 then return i end
  levels[i] = tokens
end
for i, key in ipairs(KEYS) do
  local cap = tonumber(ARGV[2 * i - 1])
  local rate = tonumber(ARGV[2 * i])
  redis.call('HSET', key, 'tokens', tostring(levels[i] - 1), 'at', tostring(now))
  redis.call('EXPIRE', key, math.ceil(cap / rate) + 1)
end
return 0
"""


class RedisBuckets:
    """Token buckets in Redis, shared by every LM process that uses the same ``REDIS_URL``."""

    def __init__(self, url: str) -> None:
        self.url = url
        # One client per event loop: redis.asyncio connections belong to the loop that made them.
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()

    def _script(self) -> Any:
        loop = asyncio.get_running_loop()
        entry = self._clients.get(loop)
        if entry is None:
            import redis.asyncio as redis

            client = redis.Redis.from_url(self.url, socket_timeout=0.5, socket_connect_timeout=0.5)
            entry = self._clients[loop] = (client, client.register_script(_LUA))
        return entry[1]

    async def take(self, buckets: list[Bucket]) -> Bucket | None:
        args: list[float] = []
        for bucket in buckets:
            args += [bucket.capacity, bucket.rate]
        try:
            empty = int(await self._script()(keys=[b.key for b in buckets], args=args))
        except Exception as exc:  # Redis down: let the call through rather than stop the league
            log.warning("rate limit store unavailable, call let through: %s", exc)
            return None
        return buckets[empty - 1] if empty else None

    async def clear(self, prefix: str) -> None:
        script = self._script()
        client = script.registered_client
        keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
        if keys:
            await client.delete(*keys)


# -- the limiter ----------------------------------------------------------------------------------
class RateLimiter:
    def __init__(self) -> None:
        self.local = LocalBuckets()
        self._redis: RedisBuckets | None = None

    def _store(self) -> RedisBuckets | None:
        url = settings.REDIS_URL
        if not url:
            return None
        if self._redis is None or self._redis.url != url:
            self._redis = RedisBuckets(url)
        return self._redis

    async def check(self, message: Any, bearer: str | None, client_host: str | None, tool: str = "") -> None:
        """Raise LEAGUE_ERROR E017 (HTTP 429) when this call exceeds a limit; else take one token.
        ``tool``: the tool called (registrations have limits of their own)."""
        if not settings.MCP_RATE_LIMIT_ENABLED:
            return
        league_id = message.get("league_id") if isinstance(message, dict) else None
        limit = None
        if isinstance(league_id, str) and 0 < len(league_id) <= 64:
            limit = await _league_limit_async(league_id)
        buckets = buckets_for(message, bearer, client_host, limit)
        if tool in REGISTRATION_TOOLS:
            buckets += registration_buckets(message, client_host)
        if not buckets:
            return
        empty = await self.take(buckets)
        if empty is None:
            return
        if empty.counts == "registrations":
            raise LeagueError(
                ErrorCode.RATE_LIMIT_EXCEEDED,
                f"too many registrations: at most {empty.per_minute} per {empty.window:g} s per {empty.what};"
                " try again later",
                context={
                    "limit": empty.per_minute,
                    "window_seconds": empty.window,
                    "per": empty.what,
                    "counts": empty.counts,
                    "retry_after_seconds": round(empty.window / empty.per_minute, 3),
                },
                retryable=True,
                http_status=429,
            )
        raise LeagueError(
            ErrorCode.RATE_LIMIT_EXCEEDED,
            f"rate limit exceeded: at most {empty.per_minute} calls a minute per {empty.what}; slow down",
            context={
                "limit_per_minute": empty.per_minute,
                "per": empty.what,
                "retry_after_seconds": 60 / empty.per_minute,
            },
            retryable=True,
            http_status=429,
        )

    async def take(self, buckets: list[Bucket]) -> Bucket | None:
        """Take one token from every bucket (in Redis when there is one), or from none: returns the
        first empty bucket. Other limits (``league.checkagent``'s) draw from the same store."""
        store = self._store()
        return await store.take(buckets) if store is not None else self.local.take(buckets)

    async def reset(self) -> None:
        """Forget every bucket (tests; an admin lifting a block at once)."""
        _league_limits.clear()
        self.local.clear()
        store = self._store()
        if store is not None:
            await store.clear(settings.MCP_RATE_LIMIT_PREFIX)


async def _league_limit_async(league_id: str) -> int | None:
    cached = _league_limits.get(league_id)
    if cached is not None and cached[1] > time.monotonic():
        return cached[0]
    from league.mcp.database import database_job  # league.mcp imports this module

    return await database_job(league_limit, league_id)


limiter = RateLimiter()
