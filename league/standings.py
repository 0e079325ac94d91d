"""A league's standings: the one service the LM, the conductor, the export and the pages read.

The ranking is :mod:`leagueproto.scoring`'s; this module decides who is in the table and reads
the results. Who is in the table, everywhere: every player that is not REMOVED, and a REMOVED
player that has results (they count for its opponents too, so the table shows where those points
came from). A player removed before it played is left out.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

from django.db.models import Count, Max, Q

from league.models import AgentStatus, League, MatchResult, Player
from leagueproto.scoring import ResultRow, StandingRow, compute_standings

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


def result_rows(league: League) -> list[ResultRow]:
    """Every result of ``league``, as the ranking reads it."""
    rows = MatchResult.objects.filter(league=league).order_by().values_list(*RESULT_FIELDS)
    return [ResultRow(*row) for row in rows]


def entrants(players: Iterable[tuple[str, str, str]], results: Iterable[ResultRow]) -> dict[str, str]:
    """Who the table lists: ``{player_id: display_name}`` of the ``players``
    (``(player_id, display_name, status)``) that are not REMOVED or that have a result."""
    played = {p for r in results for p in (r.player_a, r.player_b)}
    return {pid: name for pid, name, status in players if status != AgentStatus.REMOVED or pid in played}


def rank(players: Iterable[tuple[str, str, str]], results: Iterable[ResultRow]) -> list[tuple[StandingRow, str]]:
    """The ranked rows of ``entrants(players, results)``, each with its player's display name."""
    results = list(results)
    names = entrants(players, results)
    return [(row, names[row.player_id]) for row in compute_standings(names, results)]


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


def compute(league: League) -> list[dict[str, Any]]:
    """The standings of ``league`` from every result (no cache)."""
    players = Player.objects.filter(league=league).order_by().values_list("player_id", "display_name", "status")
    return [standing_dict(row, name) for row, name in rank(players, result_rows(league))]


# Standings per league and process, recomputed only when what they are made of changed: the
# results (count, latest id) or the players (count, latest id, removals, re-registrations). A
# display name edited by hand in the admin shows within STANDINGS_TTL seconds.
STANDINGS_TTL = 5.0
_cache: dict[int, tuple[tuple, float, list[dict[str, Any]]]] = {}
_cache_lock = threading.Lock()


def standings_key(league: League) -> tuple:
    """What the standings of ``league`` depend on, in two aggregate queries. Results are
    appended, never changed (an admin edit shows within STANDINGS_TTL): their count and latest
    id say when one was added."""
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
    return (league.created_at, *results.values(), *players.values())


def standings(league: League) -> list[dict[str, Any]]:
    """The ranked rows of ``league`` (``standing_dict``), cached (see ``standings_key``); callers
    get their own copies."""
    key = standings_key(league)
    now = time.monotonic()
    cached = _cache.get(league.pk)
    if cached is not None and cached[0] == key and now - cached[1] < STANDINGS_TTL:
        return [dict(row) for row in cached[2]]
    rows = compute(league)
    with _cache_lock:
        if len(_cache) > 1000:
            _cache.clear()
        _cache[league.pk] = (key, now, rows)
    return [dict(row) for row in rows]
