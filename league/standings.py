"""A league's standings: the one service the LM, the conductor, the export and the pages read.

The ranking is :mod:`leagueproto.scoring`'s; this module decides who is in the table and reads
the results. Who is in the table, everywhere: every player that is not REMOVED, and a REMOVED
player that has results (they count for its opponents too, so the table shows where those points
came from). A player removed before it played is left out.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from django.conf import settings
from django.db.models import Count, Max, Q, QuerySet

from league.formats import ROUND_ROBIN, TableFormat, table_format
from league.models import AgentStatus, League, MatchResult, Player, Round
from leagueproto.scoring import ResultRow, StandingRow, StandingsTable

# The MatchResult columns a ResultRow is built from, in ResultRow's field order.
RESULT_FIELDS = (
    "match__match_id",
    "match__player_a__player_id",
    "match__player_b__player_id",
    "points_a",
    "points_b",
    "technical_loss_a",
    "technical_loss_b",
)


def _ranking_results_of(results: QuerySet[MatchResult]) -> list[ResultRow]:
    return [ResultRow(*row) for row in results.order_by().values_list(*RESULT_FIELDS)]


def ranking_results(league: League) -> list[ResultRow]:
    """Every result of ``league``, as the ranking reads it."""
    return _ranking_results_of(MatchResult.objects.filter(league=league))


def entrants(players: Iterable[tuple[str, str, str]], results: Iterable[ResultRow]) -> dict[str, str]:
    """Who the table lists: ``{player_id: display_name}`` of the ``players``
    (``(player_id, display_name, status)``) that are not REMOVED or that have a result."""
    played = {p for r in results for p in (r.player_a, r.player_b)}
    return {pid: name for pid, name, status in players if status != AgentStatus.REMOVED or pid in played}


def table_of(
    players: Iterable[tuple[str, str, str]], results: Iterable[ResultRow], fmt: TableFormat = ROUND_ROBIN
) -> tuple[StandingsTable, dict[str, str]]:
    """The table of ``entrants(players, results)`` with every result added (and, in a Swiss or
    knockout league, ``fmt``'s byes and stages), and their display names."""
    results = list(results)
    names = entrants(players, results)
    table = StandingsTable.for_players(names, fmt.tie_breaks)
    _add(table, results, fmt.byes)
    table.stages = dict(fmt.stages)
    return table, names


def _add(table: StandingsTable, results: Iterable[ResultRow], byes: Iterable[tuple[str, int, int]]) -> None:
    for result in results:
        table.add(result)
    for player_id, points, _ in byes:
        if player_id in table.tallies:
            table.add_bye(player_id, points)


def rank(
    players: Iterable[tuple[str, str, str]], results: Iterable[ResultRow], fmt: TableFormat = ROUND_ROBIN
) -> list[tuple[StandingRow, str]]:
    """The ranked rows of ``entrants(players, results)``, each with its player's display name."""
    table, names = table_of(players, results, fmt)
    return [(row, names[row.player_id]) for row in table.rows()]


def rank_and_before(
    players: Iterable[tuple[str, str, str]], results: Sequence[tuple[int, ResultRow]], fmt: TableFormat = ROUND_ROBIN
) -> tuple[list[tuple[StandingRow, str]], dict[str, int] | None]:
    """``rank`` of ``(round number, result)`` pairs, and each entrant's rank before the latest
    round with results (its results and byes left out, and a knockout's stages); None until a
    second round has results."""
    return RunningRanking().rank_and_before(players, results, fmt)


@dataclass
class _Ranked:
    """A table of results in the order they came, and what ``rank_and_before`` made of it."""

    players: tuple[tuple[str, str, str], ...]
    fmt: TableFormat
    counted: list[tuple[int, ResultRow]]
    latest: int | None  # the latest round with results
    table: StandingsTable
    names: dict[str, str]
    before: dict[str, int] | None
    ranked: list[tuple[StandingRow, str]]


class RunningRanking:
    """``rank_and_before`` of a list of results that grows at its end, kept between calls: a
    league's page ranks every result at each version (4,950 of them for 100 players, two fifths of
    building the page), where the results added since the last call are all that changed. Those
    are added to the table kept from that call, and the ranks before the latest round are taken
    once, when its first result comes. Anything else (a result before them changed or gone, a
    player added or its name or status changed, a result of an earlier round after a later one,
    a format with byes or stages) ranks them all afresh, as ``rank_and_before`` does."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # the table is changed in place, by one reader at a time
        self._kept: _Ranked | None = None

    def rank_and_before(
        self,
        players: Iterable[tuple[str, str, str]],
        results: Sequence[tuple[int, ResultRow]],
        fmt: TableFormat = ROUND_ROBIN,
    ) -> tuple[list[tuple[StandingRow, str]], dict[str, int] | None]:
        players = tuple(players)
        with self._lock:
            kept = self._kept
            if kept is None or not _extended(kept, players, results, fmt):
                kept = self._kept = _ranked_afresh(players, results, fmt)
            return list(kept.ranked), dict(kept.before) if kept.before is not None else None


def _ranked_afresh(
    players: tuple[tuple[str, str, str], ...], results: Sequence[tuple[int, ResultRow]], fmt: TableFormat
) -> _Ranked:
    # One table for the ranks before and after the latest round: the earlier rounds are added
    # and ranked first, then the latest round on top.
    rows = [row for _, row in results]
    numbers = {number for number, _ in results}
    latest = max(numbers, default=None)
    names = entrants(players, rows)
    table = StandingsTable.for_players(names, fmt.tie_breaks)
    before = None
    if len(numbers) < 2:
        _add(table, rows, fmt.byes)
    else:
        _add(table, (row for number, row in results if number < latest), (b for b in fmt.byes if b[2] < latest))
        before = {row.player_id: row.rank for row in table.rows()}
        _add(table, (row for number, row in results if number >= latest), (b for b in fmt.byes if b[2] >= latest))
    table.stages = dict(fmt.stages)
    ranked = [(row, names[row.player_id]) for row in table.rows()]
    return _Ranked(players, fmt, list(results), latest, table, names, before, ranked)


def _extended(
    kept: _Ranked, players: tuple[tuple[str, str, str], ...], results: Sequence[tuple[int, ResultRow]], fmt: TableFormat
) -> bool:
    """Whether ``kept`` could be brought up to ``results`` by adding the ones after those it
    counted (and was); False when they must be ranked afresh (``kept`` may then be half changed)."""
    n = len(kept.counted)
    unchanged = players == kept.players and fmt == kept.fmt and not fmt.byes and not fmt.stages
    # The comparison of the results counted is mostly of the very same rows (readmodel.played keeps them).
    if not unchanged or len(results) < n or list(results[:n]) != kept.counted:
        return False
    added = results[n:]
    for number, row in added:
        if kept.latest is not None and number < kept.latest:
            return False  # an earlier round's result after a later one's
        if row.player_a not in kept.table.tallies or row.player_b not in kept.table.tallies:
            return False  # a removed player's first result puts it in the table (``entrants``)
        if row.match_id in kept.table.match_ids:
            return False
        if kept.latest is not None and number > kept.latest:
            kept.before = {r.player_id: r.rank for r in kept.table.rows()}
        kept.latest = number if kept.latest is None else max(kept.latest, number)
        kept.table.add(row)
        kept.counted.append((number, row))
    if added:
        kept.ranked = [(row, kept.names[row.player_id]) for row in kept.table.rows()]
    return True


def standing_dict(row: StandingRow, display_name: str) -> dict[str, Any]:
    """A row as LEAGUE_STANDINGS / LEAGUE_STANDINGS_UPDATE carry it (docs/protocol.md)."""
    return {
        "rank": row.rank,
        "player_id": row.player_id,
        "display_name": display_name,
        "played": row.played,
        "wins": row.wins,
        "draws": row.draws,
        "losses": row.losses,
        "technical_losses": row.technical_losses,
        "points": row.points,
    }


def _dicts(table: StandingsTable, names: dict[str, str]) -> list[dict[str, Any]]:
    return [standing_dict(row, names[row.player_id]) for row in table.rows()]


def _full_table(league: League) -> tuple[StandingsTable, dict[str, str]]:
    players = Player.objects.filter(league=league).order_by().values_list("player_id", "display_name", "status")
    return table_of(players, ranking_results(league), table_format(league))


def compute(league: League) -> list[dict[str, Any]]:
    """The standings of ``league`` from every result (no cache)."""
    return _dicts(*_full_table(league))


class StandingsKey(NamedTuple):
    """What the standings of a league depend on (``standings_key``)."""

    results: int
    latest_result: int | None
    rest: tuple  # the league's creation, the players' count, latest id, removals, latest seen (and rounds played)


def standings_key(league: League) -> StandingsKey:
    """What the standings of ``league`` depend on, in two aggregate queries (read when its
    version moved on, to tell results added from anything else). Results are appended, never
    changed (an admin edit shows within STANDINGS_CACHE_TTL): their count and latest id say when
    one was added."""
    results = MatchResult.objects.filter(league=league).order_by().aggregate(count=Count("pk"), latest=Max("pk"))
    players = (
        Player.objects.filter(league=league)
        .order_by()
        .aggregate(
            count=Count("pk"),
            latest=Max("pk"),
            removed=Count("pk", filter=Q(status=AgentStatus.REMOVED)),
            seen=Max("last_seen_at"),
        )
    )
    rest = (league.created_at, *players.values())
    if league.draws_rounds:
        # A Swiss or knockout table changes as a round is played too (its byes count, a
        # knockout's stages move on): a round played reads the table afresh.
        rest += (Round.objects.filter(league=league, status__in=(Round.Status.PLAYED, Round.Status.COMPLETED)).count(),)
    return StandingsKey(results["count"], results["latest"], rest)


# Standings per league and process, kept while the league's version (``League.version``, moved
# on by every write they depend on: ``LeagueQuerySet.changed``) stays the same: a read then costs
# one query by key. When it moved, the key says what changed: results added since are added to the
# cached table; anything else (players changed, a result deleted) reads every result again, and so
# does the first call STANDINGS_CACHE_TTL seconds (a setting) after the last full read: that bounds
# how long a result or display name edited by hand in the admin (no version moved) takes to show.

Version = tuple[Any, int]  # the league's creation (a key reused by another league) and version


def league_version(league: League) -> Version | None:
    """The version of ``league`` now (one query by key); None when it is gone."""
    return League.objects.filter(pk=league.pk).order_by().values_list("created_at", "version").first()


@dataclass(frozen=True)
class _Entry:
    version: Version | None
    key: StandingsKey
    read_at: float  # when every result was last read (time.monotonic())
    table: StandingsTable  # changed only under _cache_lock, through the entry cached at the time
    names: dict[str, str]
    rows: list[dict[str, Any]]  # never changed: callers get copies


_cache: dict[int, _Entry] = {}
_cache_lock = threading.Lock()


def clear_cache() -> None:
    """Forget the standings cached in this process: the next read of each league reads every
    result. The test suite calls it so that each test starts from no cache; the LM does not
    need it (the league's version and STANDINGS_CACHE_TTL keep the cache right)."""
    with _cache_lock:
        _cache.clear()


def _only_results_added(old: StandingsKey, new: StandingsKey) -> bool:
    return (
        old.rest == new.rest
        and new.results > old.results
        and new.latest_result is not None
        and new.latest_result > (old.latest_result or 0)
    )


def _add_new_results(
    league: League, cached: _Entry, key: StandingsKey, version: Version | None
) -> list[dict[str, Any]] | None:
    """The rows of ``cached`` with the results added since, or None when the results after its
    latest are not exactly the ones ``key`` counts, or bring a player the table lacks (a REMOVED
    player's first result puts it in the table; ``entrants`` decides that)."""
    # Up to the key's latest, so that the table stays exactly what the key describes.
    new = _ranking_results_of(
        MatchResult.objects.filter(league=league, pk__gt=cached.key.latest_result or 0, pk__lte=key.latest_result)
    )
    if len(new) != key.results - cached.key.results:
        return None
    with _cache_lock:
        if _cache.get(league.pk) is not cached:  # another thread moved this league's entry on
            return None
        table = cached.table
        players = {p for r in new for p in (r.player_a, r.player_b)}
        # A full read can see a result newer than the key read before it: that one is counted.
        if not players <= table.tallies.keys() or any(r.match_id in table.match_ids for r in new):
            return None
        for result in new:
            table.add(result)
        rows = _dicts(table, cached.names)
        _cache[league.pk] = replace(cached, version=version, key=key, rows=rows)
    return rows


def standings(league: League, *, just_read: bool = False) -> list[dict[str, Any]]:
    """The ranked rows of ``league`` (``standing_dict``), cached while its version stays the
    same (see ``league_version``, ``standings_key``); callers get their own copies.
    ``just_read``: the caller read ``league`` from the database for this very answer (an agent's
    query: its token's row and league, one query), so the row's version is the one to compare and
    is not read again; a row kept for longer (the conductor's, a page's) may be behind."""
    # The version is read before anything else: what is read after it is at least as new.
    version = (league.created_at, league.version) if just_read else league_version(league)
    now = time.monotonic()
    cached = _cache.get(league.pk)
    fresh = cached is not None and now - cached.read_at < settings.STANDINGS_CACHE_TTL
    if cached is not None and fresh and version is not None and cached.version == version:
        return [dict(row) for row in cached.rows]
    # Something changed: results added since are added to the table, anything else (a player,
    # a round, a result edited in the admin) reads every result again.
    key = standings_key(league)
    if cached is not None and fresh and _only_results_added(cached.key, key):
        added = _add_new_results(league, cached, key, version)
        if added is not None:
            return [dict(row) for row in added]
    table, names = _full_table(league)
    rows = _dicts(table, names)
    with _cache_lock:
        if len(_cache) > 1000:
            _cache.clear()
        _cache[league.pk] = _Entry(version, key, now, table, names, rows)
    return [dict(row) for row in rows]
