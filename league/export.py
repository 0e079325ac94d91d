"""A league as one JSON document, and its standings recomputed from the results alone.

``export_league`` is the backup an admin keeps (``manage.py league export``): the league and its
settings, players and referees (never a token hash), the schedule, every result with its match
log, the standings as served, and the event log. ``recompute_standings`` rebuilds the standings
from the results' outcomes by the scoring rules (:mod:`leagueproto.scoring`), trusting no stored points, so
``manage.py league recompute`` can show any difference with what the league serves or an export
recorded.
"""

from __future__ import annotations

from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.forms.models import model_to_dict

from league import formats, standings
from league.models import DRAWN_FORMATS, Bye, Event, League, Match, MatchResult, Player, Referee, Round
from leagueproto.scoring import BYE_POINTS, OUTCOME_POINTS, SWISS_TIE_BREAKS, ResultRow, id_sort_key

FORMAT = "league-export/1"
# Never exported: a token hash is as good as a token against a copy of the code; the network an
# agent registered from is its owner's, not the league's.
AGENT_FIELDS_HIDDEN = frozenset({"id", "league", "token_hash", "previous_token_hash", "registered_from"})
STANDING_FIELDS = ("rank", "played", "wins", "draws", "losses", "technical_losses", "points")


def _iso(moment: Any) -> str | None:
    return moment.isoformat() if moment else None


def _agent(agent: Player | Referee) -> dict[str, Any]:
    row = {k: v for k, v in model_to_dict(agent).items() if k not in AGENT_FIELDS_HIDDEN}
    row["registered_at"] = _iso(agent.registered_at)
    row["last_seen_at"] = _iso(agent.last_seen_at)
    return row


def export_league(league: League) -> dict[str, Any]:
    """Everything needed to audit or rebuild the league's outcome, as JSON-ready data."""
    settings = {k: v for k, v in model_to_dict(league).items() if k not in ("id", "champion")}
    settings.update(
        created_at=_iso(league.created_at),
        started_at=_iso(league.started_at),
        completed_at=_iso(league.completed_at),
        champion=league.champion.player_id if league.champion else None,
    )
    matches = Match.objects.filter(league=league).select_related("player_a", "player_b", "referee", "round")
    by_round: dict[int, list[dict[str, Any]]] = {}
    for m in matches.order_by("round__number", "id"):
        by_round.setdefault(m.round.number, []).append(
            {
                "match_id": m.match_id,
                "player_A_id": m.player_a.player_id,
                "player_B_id": m.player_b.player_id,
                "game_type": m.game_type,
                "status": m.status,
                "referee_id": m.referee.referee_id if m.referee else None,
                "attempt": m.attempt,
                "assigned_at": _iso(m.assigned_at),
                "finished_at": _iso(m.finished_at),
            }
        )
    byes: dict[int, list[str]] = {}
    for number, player_id in (
        Bye.objects.filter(league=league)
        .order_by("round__number", "id")
        .values_list("round__number", "player__player_id")
    ):
        byes.setdefault(number, []).append(player_id)
    schedule = [
        {
            "round_id": r.number,
            "status": r.status,
            "announced_at": _iso(r.announced_at),
            "completed_at": _iso(r.completed_at),
            "matches": by_round.get(r.number, []),
            # Swiss and knockout: who sat the round out (each bye scores a win's points once played).
            "byes": byes.get(r.number, []),
        }
        for r in Round.objects.filter(league=league).order_by("number")
    ]
    results = [
        {
            "match_id": r.match.match_id,
            "round_id": r.match.round.number,
            "player_A_id": r.match.player_a.player_id,
            "player_B_id": r.match.player_b.player_id,
            "referee_id": r.referee.referee_id if r.referee else None,
            "outcome": r.outcome,
            "winner": r.winner.player_id if r.winner else None,
            "points_A": r.points_a,
            "points_B": r.points_b,
            "technical_loss_A": r.technical_loss_a,
            "technical_loss_B": r.technical_loss_b,
            "details": r.details,
            "log": r.log,
            "report_digest": r.report_digest,
            "reported_at": _iso(r.reported_at),
        }
        for r in MatchResult.objects.filter(league=league)
        .select_related("match__round", "match__player_a", "match__player_b", "referee", "winner")
        .order_by("id")
    ]
    events = [
        {
            "id": e.id,
            "at": _iso(e.at),
            "direction": e.direction,
            "kind": e.kind,
            "agent": e.agent,
            "match_id": e.match_id,
            "payload": e.payload,
        }
        for e in Event.objects.filter(league=league).order_by("id").iterator(chunk_size=2000)
    ]
    return {
        "format": FORMAT,
        "league": settings,
        "players": [_agent(p) for p in Player.objects.filter(league=league).order_by("id")],
        "referees": [_agent(r) for r in Referee.objects.filter(league=league).order_by("id")],
        "schedule": schedule,
        "results": results,
        "standings": standings.standings(league),
        "events": events,
    }


def dumps(data: dict[str, Any]) -> str:
    import json

    return json.dumps(data, cls=DjangoJSONEncoder, indent=1, ensure_ascii=False)


# -- recompute -------------------------------------------------------------------------------------
def recompute_standings(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Standings from an export's results alone: points follow each outcome by the scoring rules."""
    rows = []
    for r in data["results"]:
        points_a, points_b = OUTCOME_POINTS[r["outcome"]]
        rows.append(
            ResultRow(
                match_id=r["match_id"],
                player_a=r["player_A_id"],
                player_b=r["player_B_id"],
                points_a=points_a,
                points_b=points_b,
                technical_loss_a=bool(r["technical_loss_A"]),
                technical_loss_b=bool(r["technical_loss_B"]),
            )
        )
    players = [(p["player_id"], p["display_name"], p["status"]) for p in data["players"]]
    # A result of a player the file does not list (a file edited by hand) still counts, nameless.
    unlisted = {pid for row in rows for pid in (row.player_a, row.player_b)} - {p[0] for p in players}
    players += [(pid, "", "") for pid in unlisted]
    fmt = recompute_format(data)
    return [standings.standing_dict(row, name) for row, name in standings.rank(players, rows, fmt)]


def recompute_format(data: dict[str, Any]) -> formats.TableFormat:
    """What a Swiss or knockout export's table adds to its results, from its schedule (and a
    knockout's seeds, on its players) alone: the byes of the rounds played and, in a knockout,
    how far each player went."""
    schedule_format = data["league"].get("schedule_format")
    if schedule_format not in DRAWN_FORMATS:
        return formats.ROUND_ROBIN
    played = {r["round_id"] for r in data["schedule"] if r["status"] in formats.PLAYED_ROUNDS}
    byes = tuple(
        (player_id, BYE_POINTS, r["round_id"])
        for r in data["schedule"]
        if r["round_id"] in played
        for player_id in r.get("byes", [])
    )
    if schedule_format == League.ScheduleFormat.SWISS:
        return formats.TableFormat(SWISS_TIE_BREAKS, byes)
    outcomes = {r["match_id"]: r["outcome"] for r in data["results"]}
    by_round = {
        r["round_id"]: [
            (
                (m["player_A_id"], m["player_B_id"]),
                formats.winner_of(m["player_A_id"], m["player_B_id"], outcomes.get(m["match_id"])),
            )
            for m in r["matches"]
        ]
        + [((player_id, None), None) for player_id in r.get("byes", [])]
        for r in data["schedule"]
    }
    seeds = {p["player_id"]: p["seed"] for p in data["players"] if p.get("seed") is not None}
    return formats.knockout_format(formats.bracket_of(by_round, played, seeds), byes)


def result_problems(data: dict[str, Any]) -> list[str]:
    """Results whose stored points or winner disagree with their outcome."""
    problems = []
    for r in data["results"]:
        expected = OUTCOME_POINTS[r["outcome"]]
        if (r["points_A"], r["points_B"]) != expected:
            problems.append(
                f"{r['match_id']}: stored points {r['points_A']}/{r['points_B']} but {r['outcome']} scores "
                f"{expected[0]}/{expected[1]}"
            )
        winner = {"WIN_A": r["player_A_id"], "WIN_B": r["player_B_id"]}.get(r["outcome"])
        if r["winner"] != winner:
            problems.append(f"{r['match_id']}: stored winner {r['winner']} but {r['outcome']} means {winner}")
    return problems


def standings_differences(recomputed: list[dict[str, Any]], other: list[dict[str, Any]], label: str) -> list[str]:
    """Row-by-row differences between recomputed standings and ``other`` (served or exported)."""
    mine = {row["player_id"]: row for row in recomputed}
    theirs = {row["player_id"]: row for row in other}
    differences = []
    for player_id in sorted(mine.keys() | theirs.keys(), key=id_sort_key):
        a, b = mine.get(player_id), theirs.get(player_id)
        if a is None or b is None:
            where = label if a is None else "the recomputed standings"
            differences.append(f"{player_id}: only in {where}")
            continue
        for key in STANDING_FIELDS:
            if a[key] != b[key]:
                differences.append(f"{player_id}: {key} {b[key]} in {label}, {a[key]} recomputed")
    return differences
