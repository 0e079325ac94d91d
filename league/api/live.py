"""The live league page's state: one snapshot per league version, shared by every reader, and
the patch that takes a page from one version to the next.

A league's *version* is a digest of two indexed queries (the league row, and the counts and
latest rows of its matches, results, rounds, players and referees): it changes
whenever anything the page shows changes, whichever process changed it, and costs a few
milliseconds however big the league is. The snapshot (:func:`league.api.readmodel.snapshot`,
the expensive part) is built once per version and kept, encoded, in Django's cache under
``live:<version>`` (a version starts with the league's pk): the websocket pushes
(``league.consumers``), the page view and ``/api/leagues/<id>/live/`` all read that one copy.
A key names its version, so nothing is ever invalidated: a change makes a new key, and old ones
expire (``SNAPSHOT_TTL``, which also bounds how long a hand edit the digest cannot see, such as
a display name changed in the admin, takes to show).

:func:`diff` and ``applyPatch`` in static/league/site.js are the two halves of a patch: lists
of rows with an id (standings, feed, schedule, chart series, crosstable rows) are patched row by
row, so a finished match sends its few changed rows, not the league.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

import orjson
from django.core.cache import cache
from django.db import connection
from django.db.models import Max

from league.api import arenaboard, readmodel
from league.models import AgentStatus, Event, League, Match, MatchResult, Player, Referee, Round
from league.sql import column, table

log = logging.getLogger(__name__)

# How long a built snapshot is kept. A new version makes a new key at once; this only bounds
# what the version cannot see (hand edits of names in the admin) and the cache's size.
SNAPSHOT_TTL = 30.0
# One snapshot of a league built at a time in this process: readers that miss together wait for
# the one build instead of each making its own. A lock per league (by its pk), so a build of one
# league, or a wait for another process's build of it, never holds up another league's readers.
# Locks, not a cache: they hold nothing, one per league this process has served.
_building: dict[int, threading.Lock] = {}
# Between processes (several LM processes sharing Django's cache in Redis): the first to miss a
# version claims its build in the cache for BUILD_CLAIM seconds, and the others wait for it, up to
# that long, instead of building the same snapshot at the same moment (they push on the same
# events); a build that never lands (its process died) is made by the first reader after.
BUILD_CLAIM = 2.0
BUILD_POLL = 0.01


def _counts_sql() -> str:
    return (
        "SELECT * FROM "
        "(SELECT COUNT(*), COUNT(CASE WHEN {m_status} = %s THEN 1 END), "
        "COUNT(CASE WHEN {m_status} IN (%s, %s) THEN 1 END), MAX({m_assigned}), COUNT({m_referee}) "
        "FROM {matches} WHERE {m_league} = %s) m, "
        "(SELECT COUNT(*), MAX({r_pk}) FROM {results} WHERE {r_league} = %s) r, "
        "(SELECT COUNT(*), COUNT(CASE WHEN {d_status} IN (%s, %s) THEN 1 END), "
        "COUNT(CASE WHEN {d_status} = %s THEN 1 END) FROM {rounds} WHERE {d_league} = %s) d, "
        "(SELECT COUNT(*), MAX({p_pk}), COUNT(CASE WHEN {p_status} = %s THEN 1 END), "
        "COUNT(CASE WHEN {p_status} = %s THEN 1 END) FROM {players} WHERE {p_league} = %s) p, "
        "(SELECT COUNT(*), COUNT(CASE WHEN {f_status} IN (%s, %s) THEN 1 END) "
        "FROM {referees} WHERE {f_league} = %s) f"
    ).format(
        matches=table(Match),
        m_status=column(Match, "status"),
        m_assigned=column(Match, "assigned_at"),
        m_referee=column(Match, "referee"),
        m_league=column(Match, "league"),
        results=table(MatchResult),
        r_pk=column(MatchResult, "pk"),
        r_league=column(MatchResult, "league"),
        rounds=table(Round),
        d_status=column(Round, "status"),
        d_league=column(Round, "league"),
        players=table(Player),
        p_pk=column(Player, "pk"),
        p_status=column(Player, "status"),
        p_league=column(Player, "league"),
        referees=table(Referee),
        f_status=column(Referee, "status"),
        f_league=column(Referee, "league"),
    )


# What the version digests besides the league's row: its matches (how many, finished, in play,
# the latest assignment, how many have a referee), results (count, latest), rounds (count, played
# or completed, completed), players (count, latest, removed, suspended) and referees (count,
# live). One statement of our own: the five aggregate queries through the ORM cost ~10.5 ms a
# version at the end of a 100-player league, 6.5 of them compiling the queries (the database
# answers in 4), and the version is read at every push and every page check.
_COUNTS = _counts_sql()


def _counts_params(league: int) -> list[Any]:
    return [
        *(Match.Status.FINISHED, *readmodel.RUNNING_MATCH, league),
        league,
        *(Round.Status.PLAYED, Round.Status.COMPLETED, Round.Status.COMPLETED, league),
        *(AgentStatus.REMOVED, AgentStatus.SUSPENDED, league),
        *(*readmodel.LIVE_AGENT, league),
    ]


def version(league_id: str) -> str | None:
    """The league's version: a digest of what its page shows, in two indexed queries (four
    while registration is open); None when there is no such league."""
    row = League.objects.filter(league_id=league_id).values().first()
    if row is None:
        return None
    league = row["id"]
    with connection.cursor() as cursor:
        cursor.execute(_COUNTS, _counts_params(league))
        parts: list[Any] = [row, cursor.fetchone()]
    if League(**row).registration_open():
        # While registration is open the page shows how each agent answered (the Event log):
        # the window's opening and closing are in the league row's times.
        # Reachability: a first answer and a mark are Event rows; a relay socket is its own.
        players = Player.objects.filter(league_id=league).order_by()
        parts.append(players.aggregate(seen=Max("last_seen_at"), relay=Max("relay_changed_at")))
        parts.append(Event.objects.filter(league_id=league).aggregate(latest=Max("pk")))
        parts.append(True)
    return f"{league}.{hashlib.blake2b(repr(parts).encode(), digest_size=8).hexdigest()}"


@dataclass(frozen=True)
class Snapshot:
    """A league's snapshot at one version, encoded once (``blob``: the snapshot's JSON)."""

    league_id: str
    version: str
    blob: bytes

    def data(self) -> dict[str, Any]:
        return orjson.loads(self.blob)


def _key(at: str) -> str:
    # The version starts with the league's pk: any league id can be looked up, even one no
    # cache key could carry.
    return f"live:{at}"


def snapshot_data(league_id: str) -> dict[str, Any] | None:
    """What the league's page shows: an arena's leaderboard (``arenaboard``), else the league's
    page (``readmodel``); None when there is no such league."""
    league = League.objects.select_related("champion").filter(league_id=league_id).first()
    if league is None:
        return None
    return arenaboard.snapshot(league) if league.is_arena else readmodel.league_snapshot(league)


def current(league_id: str) -> Snapshot | None:
    """The league's snapshot at its current version, built by the first reader that asks and
    shared by all; None when there is no such league."""
    found = _current(league_id)
    return found[0] if found is not None else None


def _current(league_id: str) -> tuple[Snapshot, dict[str, Any] | None] | None:
    """``current``, and the snapshot's data when this call built it (a caller that needs the data
    then takes it instead of decoding the blob just encoded)."""
    at = version(league_id)
    if at is None:
        return None
    key = _key(at)
    blob = cache.get(key)
    data = None
    if blob is None:
        league_pk = int(at.split(".", 1)[0])
        # setdefault is one step under the GIL: two threads meeting here get the same lock (a new
        # one is made only for a league this process has not built yet).
        lock = _building.get(league_pk) or _building.setdefault(league_pk, threading.Lock())
        with lock:
            blob = cache.get(key)  # built while this reader waited for the lock
            claim = f"{key}:building"
            if blob is None and not cache.add(claim, True, BUILD_CLAIM):
                blob = _built_elsewhere(key)
            if blob is None:
                try:
                    data = snapshot_data(league_id)
                    if data is None:
                        return None
                    blob = orjson.dumps(data)
                    cache.set(key, blob, SNAPSHOT_TTL)
                finally:
                    cache.delete(claim)  # (a failed build leaves no one waiting for it)
                log.debug("built the snapshot of %s at version %s (%d bytes)", league_id, at, len(blob))
    return Snapshot(league_id, at, blob), data


def kept(league_id: str, at: str | None) -> Snapshot | None:
    """The league's snapshot at version ``at`` (one of its own versions) if the cache still keeps
    it, as the lead of its audiences left it there (``league.consumers.Audience``); else None."""
    blob = cache.get(_key(at)) if at is not None else None
    return Snapshot(league_id, at, blob) if blob is not None else None


def at_version(league_id: str, at: str | None) -> Snapshot | None:
    """The league's snapshot at version ``at`` when the cache keeps it, else at its current
    version (None when there is no such league)."""
    return kept(league_id, at) or current(league_id)


def _built_elsewhere(key: str) -> bytes | None:
    """The snapshot under ``key`` once the process that claimed its build has put it there; None
    when it has not within ``BUILD_CLAIM`` seconds."""
    deadline = time.monotonic() + BUILD_CLAIM
    while time.monotonic() < deadline:
        time.sleep(BUILD_POLL)
        blob = cache.get(key)
        if blob is not None:
            return blob
    return None


def current_data(league_id: str) -> dict[str, Any] | None:
    """``current(league_id)`` decoded (the page view renders from it)."""
    snapshot = current(league_id)
    return snapshot.data() if snapshot is not None else None


# -- patches ----------------------------------------------------------------------------------
# The ids of rows in the snapshot's lists, tried in this order.
ROW_KEYS = ("match_id", "player_id", "number")


def _row_key(old: list[Any], new: list[Any]) -> str | None:
    """The id field shared by every row of both lists (unique in each), if there is one."""
    rows = [*old, *new]
    if not rows or not all(isinstance(r, dict) for r in rows):
        return None
    for key in ROW_KEYS:
        unique = all(key in r for r in rows) and all(len({r[key] for r in side}) == len(side) for side in (old, new))
        if unique:
            return key
    return None


def _slid_by(old: list[Any], new: list[Any]) -> int | None:
    """The smallest ``k`` with ``new`` = ``old[k:]`` + a tail, keeping some of ``old``: a list that
    grows at its end (a chart's points) or slides (a player's last five results)."""
    if not old or not new:
        return None
    for k in range(len(old)):
        kept = len(old) - k
        if kept <= len(new) and old[k] == new[0] and old[k:] == new[:kept]:
            return k
    return None


def diff(old: Any, new: Any) -> dict[str, Any] | None:
    """A patch from ``old`` to ``new`` (None when equal). Ops are dicts: ``{"$r": value}``
    replaces a value; ``{"$d": {name: patch}}`` patches a dict's changed entries, where a patch
    that is not a dict is the entry's new value itself (most changes are numbers and strings);
    ``{"$a": tail, "x": k}`` drops a list's first ``k`` items and appends ``tail``; ``{"$l":
    id_field, "o": ids or None, "i": {id: patch}}`` patches a list of rows by id (``o``: the new
    order of ids when it changed; a new row comes as ``{"$r": row}``); ``{"$t": tail, "n": n}``
    keeps a list's first ``n`` items and appends ``tail`` (a chart's series while a round is
    played: its last point changes, the points before it do not)."""
    if old == new:
        return None
    if isinstance(old, dict) and isinstance(new, dict) and old.keys() == new.keys():
        changed: dict[str, Any] = {}
        for name in new:
            d = diff(old[name], new[name])
            if d is not None:
                changed[name] = d["$r"] if "$r" in d and not isinstance(d["$r"], dict) else d
        return {"$d": changed}
    if isinstance(old, list) and isinstance(new, list):
        k = _slid_by(old, new)
        if k is not None:
            return {"$a": new[len(old) - k :], "x": k}
        key = _row_key(old, new)
        if key:
            before = {row[key]: row for row in old}
            items: dict[str, Any] = {}
            for row in new:
                d = diff(before[row[key]], row) if row[key] in before else {"$r": row}
                if d is not None:
                    items[str(row[key])] = d
            ids = [row[key] for row in new]
            return {"$l": key, "o": ids if ids != [row[key] for row in old] else None, "i": items}
        kept = _common_prefix(old, new)
        if kept:
            return {"$t": new[kept:], "n": kept}
    return {"$r": new}


def _common_prefix(old: list[Any], new: list[Any]) -> int:
    """How many items ``old`` and ``new`` have alike at their start."""
    kept = 0
    for a, b in zip(old, new, strict=False):
        if a != b:
            break
        kept += 1
    return kept


def apply(value: Any, patch: dict[str, Any] | None) -> Any:
    """``value`` with ``patch`` applied (what the page does; the bench's viewers use it)."""
    if patch is None:
        return value
    if "$r" in patch:
        return patch["$r"]
    if "$d" in patch:
        return {
            **value,
            **{name: apply(value[name], p) if isinstance(p, dict) else p for name, p in patch["$d"].items()},
        }
    if "$a" in patch:
        return value[patch["x"] :] + patch["$a"]
    if "$t" in patch:
        return value[: patch["n"]] + patch["$t"]
    key, items = patch["$l"], patch["i"]
    rows = {str(row[key]): row for row in value}
    order = patch["o"] if patch["o"] is not None else [row[key] for row in value]
    return [apply(rows.get(str(i)), items.get(str(i))) for i in order]


@dataclass(frozen=True)
class Step:
    """What a league's viewers are sent when its version moves: the snapshot at the new version
    and the patch from the previous one (None when the page must take the whole snapshot)."""

    snapshot: Snapshot
    data: dict[str, Any]
    patch: dict[str, Any] | None
    cpu_seconds: float = 0.0  # what reading it cost this thread (the build, when it built it)


def step(league_id: str, previous: dict[str, Any] | None, previous_version: str | None) -> Step | None:
    """The league's current snapshot and the patch from ``previous`` (at ``previous_version``)
    to it; None when there is no such league. Done once per change for all of a process's
    viewers (``league.consumers.Audience``)."""
    began = time.thread_time()
    found = _current(league_id)
    if found is None:
        return None
    snapshot, built = found
    if previous is not None and snapshot.version == previous_version:
        return Step(snapshot, previous, None, time.thread_time() - began)
    data = built if built is not None else snapshot.data()
    patch = diff(previous, data) if previous is not None else None
    return Step(snapshot, data, patch, time.thread_time() - began)
