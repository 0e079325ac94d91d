"""What the dashboard and the REST API show of one agent: a player's record and a referee's
matches, built on the league's read model (league/api/readmodel.py)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from django.db.models import Count, Q

from league import tournament
from league.api import live
from league.api.readmodel import (
    RUNNING_MATCH,
    agent_calls,
    arena_ratings,
    iso,
    match_summary,
    standings,
    summaries_queryset,
)
from league.models import Match, MatchResult, Player, Referee
from leagueproto.scoring import record_field, result_mark
from leagueproto.timeouts import MOVE_CALLS

# How many of a player's latest results its page reads to tell whether it answers slowly.
SLOW_RECENT_MATCHES = 10


def player_health(player: Player) -> dict[str, Any]:
    calls = agent_calls(player.league, player.player_id)[player.player_id]
    return tournament.agent_health(calls, iso(player.last_seen_at))


def move_latencies(player: Player, matches: int = SLOW_RECENT_MATCHES) -> list[float]:
    """The player's answer times (ms) to the moves it was asked for in its last ``matches``
    results, from the referees' logs: one query through the matches' player indexes, at most
    ``matches`` logs read, however long the league."""
    logs = (
        MatchResult.objects.filter(Q(match__player_a=player) | Q(match__player_b=player))
        .order_by("-id")
        .values_list("log", flat=True)[:matches]
    )
    latencies = []
    for log in logs:
        for entry in log if isinstance(log, list) else []:
            if (
                isinstance(entry, dict)
                and entry.get("direction") == "OUT"
                and entry.get("peer") == player.player_id
                and entry.get("message_type") in MOVE_CALLS
                and entry.get("outcome") in tournament.OK_OUTCOMES
            ):
                latency = entry.get("latency_ms")
                if isinstance(latency, int | float) and not isinstance(latency, bool):
                    latencies.append(float(latency))
    return latencies


def slow_note(player: Player) -> str | None:
    """A plain note for the player's page when its recent answers keep every round waiting."""
    return tournament.slow_note(move_latencies(player), player.league.move_timeout)


def arena_rating(player: Player) -> dict[str, Any] | None:
    """The player's practice-arena rating in its league's game (league/ratings.py), if it has one."""
    rating = arena_ratings(player.league, [player]).get(player.pk)
    if rating is None:
        return None
    return {
        "rating": round(rating.ordinal, 2),
        "mu": round(rating.mu, 2),
        "sigma": round(rating.sigma, 2),
        "matches": rating.matches,
    }


def standing_of(player: Player) -> dict[str, Any] | None:
    """The player's row of its league's standings (None when it has none). The table is the
    league's, not the player's: it comes from the league's snapshot at its current version, built
    once per version and shared by every page and reader (``live.current``), so that a class with
    each student on their own player's page does not rank the whole league once per page; an
    arena's snapshot is its leaderboard, so its players' rows are ranked here."""
    league = player.league
    snapshot = None if league.is_arena else live.current(league.league_id)
    rows = snapshot.data()["standings"] if snapshot is not None else standings(league)
    for row in rows:
        if row["player_id"] == player.player_id:
            return {name: value for name, value in row.items() if name != "arena_rating"}
    return None


def player_profile(player: Player) -> dict[str, Any]:
    """A player's record: standing row, history, opponents, how often it picks even or odd."""
    league = player.league
    matches = [
        match_summary(m)
        for m in summaries_queryset(league).filter(Q(player_a=player) | Q(player_b=player)).order_by("round__number")
    ]
    opponents: dict[str, dict[str, Any]] = {}
    parity: Counter = Counter()
    for m in matches:
        mine, theirs = (
            (m["player_a"], m["player_b"])
            if m["player_a"]["player_id"] == player.player_id
            else (
                m["player_b"],
                m["player_a"],
            )
        )
        res = m["result"]
        if res is None:
            continue
        opp = opponents.setdefault(
            theirs["player_id"],
            {**theirs, "played": 0, "wins": 0, "draws": 0, "losses": 0, "points_for": 0},
        )
        opp["played"] += 1
        opp["points_for"] += res["score"].get(mine["player_id"], 0)
        my_points = res["score"].get(mine["player_id"], 0)
        opp[record_field(my_points)] += 1
        m["my_outcome"] = result_mark(my_points)
        # Tinted as a technical loss only when this player lost technically, not its opponent.
        m["my_technical"] = mine["player_id"] in res["technical_loss"]
        games = res["games_score"] or res["score"]
        m["my_score"] = f"{games.get(mine['player_id'], 0)}–{games.get(theirs['player_id'], 0)}"
        choice = res["choices"].get(player.player_id)
        if isinstance(choice, str) and choice.lower() in ("even", "odd"):
            parity[choice.lower()] += 1
    chosen = parity["even"] + parity["odd"]
    return {
        "player_id": player.player_id,
        "display_name": player.display_name,
        "status": player.status,
        "version": player.version,
        "game_types": player.game_types,
        "registered_at": iso(player.registered_at),
        "last_seen_at": iso(player.last_seen_at),
        "unreachable_since": iso(player.unreachable_since),
        "unreachable_reason": player.unreachable_reason,
        "standing": standing_of(player),
        "arena_rating": arena_rating(player),
        "parity": {
            "even": parity["even"],
            "odd": parity["odd"],
            "even_percent": round(100 * parity["even"] / chosen) if chosen else None,
        },
        "opponents": sorted(opponents.values(), key=lambda o: o["player_id"]),
        "matches": matches,
        "health": player_health(player),
    }


def referee_profile(referee: Referee) -> dict[str, Any]:
    # Counted in the database; the page lists the latest 100 (a busy referee holds thousands).
    counts = Match.objects.filter(referee=referee).aggregate(
        assigned=Count("pk"), running=Count("pk", filter=Q(status__in=RUNNING_MATCH))
    )
    running = counts["running"]
    latest = summaries_queryset(referee.league).filter(referee=referee).order_by("-id")[:100]
    reported = MatchResult.objects.filter(referee=referee).count()
    return {
        "referee_id": referee.referee_id,
        "display_name": referee.display_name,
        "status": referee.status,
        "version": referee.version,
        "game_types": referee.game_types,
        "registered_at": iso(referee.registered_at),
        "last_seen_at": iso(referee.last_seen_at),
        "max_concurrent_matches": referee.max_concurrent_matches,
        "running": running,
        "load_percent": round(100 * running / referee.max_concurrent_matches) if referee.max_concurrent_matches else 0,
        "matches_reported": reported,
        "matches_assigned": counts["assigned"],
        "failures": referee.failures,
        "matches": [match_summary(m) for m in latest],
    }
