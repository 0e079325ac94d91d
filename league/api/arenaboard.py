"""The arena's live leaderboard: the snapshot (``league.api.live``) of a league whose
schedule_format is ``arena``, shared by the page, the API and the websocket like any league's
snapshot (league/api/live.py). Each rated match is a new result, so a new league version: the
leaderboard moves with every rated match.

Rows are ranked by the rating's ordinal (mu - 3 sigma, league/ratings.py); an agent not rated
yet ranks below every rated one. A rating is the agent's across arenas (league/arena.py,
``identity_of``), so its matches count all it played in this game.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.utils import timezone

from league.api import readmodel
from league.models import AgentStatus, Arena, ArenaSeat, League, Match, Player, Rating, RatingChange

FORM_LENGTH = 8  # the latest results shown per agent
CHART_AGENTS = 12  # the agents drawn on the chart (the best rated)
CHART_POINTS = 60  # the latest rating changes drawn per agent
OPEN = (Match.Status.SCHEDULED, Match.Status.ASSIGNED, Match.Status.RUNNING)


def _state(player: Player, seat: ArenaSeat | None, playing: set[int], now) -> tuple[str, str | None]:
    """What the agent is doing now, and until when (a rest)."""
    if player.status == AgentStatus.SUSPENDED:
        return "suspended", None
    if player.unreachable_since is not None:
        return "unreachable", None
    if player.pk in playing:
        return "playing", None
    if seat is not None and seat.rested_until and seat.rested_until > now:
        return "resting", readmodel.iso(seat.rested_until)
    return "waiting", None


def leaderboard(league: League) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The arena's rows (best first) and its rating-over-time chart."""
    now = timezone.now()
    players = list(league.players.exclude(status=AgentStatus.REMOVED).order_by("pk"))
    seats = {s.player_id: s for s in ArenaSeat.objects.filter(league=league)}
    identities = {s.identity for s in seats.values()}
    ratings = {r.identity: r for r in Rating.objects.filter(game_type=league.game_type, identity__in=identities)}
    playing = {
        pk
        for row in Match.objects.filter(league=league, status__in=OPEN).values_list("player_a_id", "player_b_id")
        for pk in row
    }
    form: dict[int, list[dict[str, Any]]] = defaultdict(list)
    recent = RatingChange.objects.filter(league=league).order_by("-pk")
    for player_pk, result, technical, match_id in recent.values_list(
        "player_id", "result", "technical", "match__match_id"
    )[: max(1, len(players)) * FORM_LENGTH * 2]:
        if len(form[player_pk]) < FORM_LENGTH:
            form[player_pk].append({"mark": result, "technical": technical, "match_id": match_id})
    rows = []
    for player in players:
        seat = seats.get(player.pk)
        rating = ratings.get(seat.identity) if seat else None
        state, until = _state(player, seat, playing, now)
        rows.append(
            {
                "player_id": player.player_id,
                "display_name": player.display_name,
                "house": bool(seat and seat.house),
                "rating": round(rating.ordinal, 2) if rating else None,
                "mu": round(rating.mu, 2) if rating else None,
                "sigma": round(rating.sigma, 2) if rating else None,
                "matches": rating.matches if rating else 0,
                "wins": rating.wins if rating else 0,
                "draws": rating.draws if rating else 0,
                "losses": rating.losses if rating else 0,
                "form": list(reversed(form.get(player.pk, []))),
                "state": state,
                "rested_until": until,
                "_order": (rating is None, -(rating.ordinal if rating else 0.0), player.pk),
            }
        )
    rows.sort(key=lambda r: r.pop("_order"))
    for rank, row in enumerate(rows, start=1):
        row["rank"] = rank
    return rows, rating_chart(league, rows)


def rating_chart(league: League, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each of the best-rated agents' latest ratings (ordinal) over time: minutes since the
    arena started, one point per rated match."""
    shown = [r["player_id"] for r in rows if r["rating"] is not None][:CHART_AGENTS]
    by_id = {p.player_id: p.pk for p in league.players.filter(player_id__in=shown)}
    points: dict[int, list[tuple[Any, float]]] = defaultdict(list)
    changes = RatingChange.objects.filter(league=league, player_id__in=by_id.values()).order_by("-pk")
    for player_pk, at, ordinal in changes.values_list("player_id", "at", "ordinal")[: len(by_id) * CHART_POINTS * 2]:
        if len(points[player_pk]) < CHART_POINTS:
            points[player_pk].append((at, ordinal))
    start = league.started_at or league.created_at
    names = {r["player_id"]: r["display_name"] for r in rows}
    series = [
        {
            "player_id": player_id,
            "display_name": names[player_id],
            "points": [
                {"x": round((at - start).total_seconds() / 60, 3), "y": round(ordinal, 2)}
                for at, ordinal in reversed(points.get(by_id[player_id], []))
            ],
        }
        for player_id in shown
        if player_id in by_id
    ]
    return {"series": series}


def arena_note(league: League, rows: list[dict[str, Any]], rated: int) -> str:
    agents = sum(1 for r in rows if not r["house"])
    rated_text = f"{rated} match{'es' if rated != 1 else ''} played"
    who = f"{agents} agent{'s' if agents != 1 else ''}"
    if league.status == League.Status.RUNNING:
        playing = sum(1 for r in rows if r["state"] == "playing")
        return f"Open: {who}, {playing} playing now, {rated_text}. Agents are paired as soon as they are free."
    if league.status == League.Status.PAUSED:
        return f"Paused by the organiser: {who}, {rated_text}. Agents may still join."
    if league.status in (League.Status.REGISTERING, League.Status.READY, League.Status.INITIALIZING):
        return f"Not open yet: {who} joined. Matches begin when the organiser opens the arena."
    return f"Closed ({league.status.lower()}) after {rated_text}."


def snapshot(league: League) -> dict[str, Any]:
    """Everything the arena page shows (``live.snapshot_data`` for an arena)."""
    arena = Arena.objects.filter(league=league).first() or Arena(league=league)  # its defaults until opened
    rows, chart = leaderboard(league)
    rated = league.results.count()  # each result is rated (a match both lost technically moves no rating)
    return {
        "league": readmodel.league_summary(league),
        "arena": {
            "max_matches_per_hour": arena.max_matches_per_hour,
            "house_prefix": arena.house_prefix,
            "matches_played": rated,
        },
        "note": arena_note(league, rows, rated),
        "referee_warning": readmodel.referee_warning(league),
        "leaderboard": rows,
        "recent_matches": readmodel.recent_matches(league, limit=15),
        "chart": chart,
    }
