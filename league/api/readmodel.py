"""What the dashboard and the REST API show: plain dicts built from the database.

One place turns rows into the shapes that the pages render, the API returns and the websocket
sends as its snapshot, so the three never disagree. Standings come from the one ranking
implementation, :func:`league.standings.compute_standings`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from django.db.models import Count, Q

from league.models import League, Match, MatchResult, Player, Referee, Round
from league.standings import ResultRow, compute_standings

RUNNING_MATCH = (Match.Status.ASSIGNED, Match.Status.RUNNING)
RECENT_MATCHES = 30


def _iso(moment) -> str | None:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ") if moment else None


def result_rows(results: Iterable[MatchResult]) -> list[ResultRow]:
    return [
        ResultRow(
            match_id=r.match.match_id,
            player_a=r.match.player_a.player_id,
            player_b=r.match.player_b.player_id,
            points_a=r.points_a,
            points_b=r.points_b,
            technical_loss_a=r.technical_loss_a,
            technical_loss_b=r.technical_loss_b,
        )
        for r in results
    ]


def _results(league: League):
    return league.results.select_related("match__player_a", "match__player_b", "match__round").order_by("id")


def standings(league: League, results: list[MatchResult] | None = None) -> list[dict[str, Any]]:
    """Ranked standings with display names (contract 5's row shape)."""
    players = {p.player_id: p for p in league.players.all()}
    rows = compute_standings(players.keys(), result_rows(results if results is not None else _results(league)))
    out = []
    for row in rows:
        player = players.get(row.player_id)
        out.append(
            {
                "rank": row.rank,
                "player_id": row.player_id,
                "display_name": player.display_name if player else row.player_id,
                "status": player.status if player else "",
                "played": row.played,
                "wins": row.wins,
                "draws": row.draws,
                "losses": row.losses,
                "technical_losses": row.technical_losses,
                "points": row.points,
            }
        )
    return out


def _player_ref(player: Player) -> dict[str, str]:
    return {"player_id": player.player_id, "display_name": player.display_name}


def match_summary(match: Match) -> dict[str, Any]:
    """A match with its result in the terms people read: who, what they chose, what was drawn."""
    try:
        result: MatchResult | None = match.result
    except MatchResult.DoesNotExist:
        result = None
    a, b = match.player_a, match.player_b
    data: dict[str, Any] = {
        "match_id": match.match_id,
        "round": match.round.number,
        "game_type": match.game_type,
        "status": match.status,
        "player_a": _player_ref(a),
        "player_b": _player_ref(b),
        "referee_id": match.referee.referee_id if match.referee_id else None,
        "assigned_at": _iso(match.assigned_at),
        "finished_at": _iso(match.finished_at),
        "result": None,
    }
    if result is not None:
        details = result.details or {}
        choices = details.get("choices") or {}
        winner = result.winner.player_id if result.winner_id else None
        if winner is None and result.outcome in (MatchResult.Outcome.WIN_A, MatchResult.Outcome.WIN_B):
            winner = a.player_id if result.outcome == MatchResult.Outcome.WIN_A else b.player_id
        technical = [p.player_id for p, lost in ((a, result.technical_loss_a), (b, result.technical_loss_b)) if lost]
        data["result"] = {
            "outcome": result.outcome,
            "status": "TECHNICAL_LOSS" if technical else ("DRAW" if result.outcome == "DRAW" else "WIN"),
            "winner": winner,
            "score": {a.player_id: result.points_a, b.player_id: result.points_b},
            "technical_loss": technical,
            "choices": {k: v for k, v in choices.items()} if isinstance(choices, dict) else {},
            "drawn_number": details.get("drawn_number"),
            "number_parity": details.get("number_parity"),
            "round_scores": details.get("scores"),
            "reason": details.get("reason") or "",
            "reported_at": _iso(result.reported_at),
            "log_entries": len(result.log or []),
        }
        data["finished_at"] = data["finished_at"] or _iso(result.reported_at)
    return data


def matches_queryset(league: League):
    return (
        Match.objects.filter(league=league)
        .select_related("round", "player_a", "player_b", "referee", "result__winner")
        .order_by("round__number", "id")
    )


def rounds(league: League) -> list[dict[str, Any]]:
    """The schedule, round by round, with how far each round got."""
    matches_by_round: dict[int, list[Match]] = defaultdict(list)
    for match in matches_queryset(league):
        matches_by_round[match.round_id].append(match)
    out = []
    for rnd in Round.objects.filter(league=league).order_by("number"):
        matches = matches_by_round.get(rnd.id, [])
        finished = sum(1 for m in matches if m.status == Match.Status.FINISHED)
        out.append(
            {
                "number": rnd.number,
                "status": rnd.status,
                "announced_at": _iso(rnd.announced_at),
                "completed_at": _iso(rnd.completed_at),
                "matches_total": len(matches),
                "matches_finished": finished,
                "matches": [
                    {
                        "match_id": m.match_id,
                        "player_a": m.player_a.player_id,
                        "player_b": m.player_b.player_id,
                        "status": m.status,
                        "referee_id": m.referee.referee_id if m.referee_id else None,
                    }
                    for m in matches
                ],
            }
        )
    return out


def progress(league: League) -> dict[str, Any]:
    counts = Match.objects.filter(league=league).aggregate(
        total=Count("id"),
        finished=Count("id", filter=Q(status=Match.Status.FINISHED)),
        running=Count("id", filter=Q(status__in=RUNNING_MATCH)),
    )
    total, finished = counts["total"], counts["finished"]
    rounds_total = Round.objects.filter(league=league).count()
    rounds_done = Round.objects.filter(league=league, status__in=(Round.Status.PLAYED, Round.Status.COMPLETED)).count()
    return {
        "matches_total": total,
        "matches_finished": finished,
        "matches_running": counts["running"],
        "rounds_total": rounds_total,
        "rounds_completed": rounds_done,
        "current_round": league.current_round,
        "percent": round(100 * finished / total) if total else (100 if league.status == "COMPLETED" else 0),
    }


def points_over_rounds(league: League, results: list[MatchResult] | None = None) -> dict[str, Any]:
    """Each player's cumulative points after every round that has results (the chart's data)."""
    results = results if results is not None else list(_results(league))
    players = list(league.players.order_by("id"))
    numbers = sorted({r.match.round.number for r in results})
    per_round: dict[int, Counter] = defaultdict(Counter)
    for r in results:
        per_round[r.match.round.number][r.match.player_a.player_id] += r.points_a
        per_round[r.match.round.number][r.match.player_b.player_id] += r.points_b
    series = []
    for player in players:
        total, points = 0, []
        for number in numbers:
            total += per_round[number][player.player_id]
            points.append(total)
        series.append({"player_id": player.player_id, "display_name": player.display_name, "points": points})
    return {"rounds": [f"R{n}" for n in numbers], "series": series}


def league_summary(league: League) -> dict[str, Any]:
    players = league.players.exclude(status="REMOVED").count()
    referees = league.referees.exclude(status="REMOVED").count()
    return {
        "league_id": league.league_id,
        "name": league.name,
        "game_type": league.game_type,
        "status": league.status,
        "schedule_format": league.schedule_format,
        "registration_open": league.registration_open(),
        "registration_opens_at": _iso(league.registration_opens_at),
        "registration_closes_at": _iso(league.registration_closes_at),
        "min_players": league.min_players,
        "max_players": league.max_players,
        "players": players,
        "referees": referees,
        "current_round": league.current_round,
        "champion": _player_ref(league.champion) if league.champion_id else None,
        "created_at": _iso(league.created_at),
        "started_at": _iso(league.started_at),
        "completed_at": _iso(league.completed_at),
    }


def recent_matches(league: League, limit: int = RECENT_MATCHES) -> list[dict[str, Any]]:
    """The feed: finished and running matches, newest first."""
    qs = (
        matches_queryset(league)
        .filter(status__in=(Match.Status.FINISHED, *RUNNING_MATCH))
        .order_by("-finished_at", "-assigned_at", "-id")
    )
    running = [m for m in qs if m.status != Match.Status.FINISHED]
    finished = sorted(
        (m for m in qs if m.status == Match.Status.FINISHED),
        key=lambda m: (m.finished_at or m.result.reported_at, m.id),
        reverse=True,
    )
    return [match_summary(m) for m in (running + finished)[:limit]]


def league_note(summary: dict[str, Any], prog: dict[str, Any]) -> str:
    """One sentence on where the league stands; the empty states people see first."""
    status, players = summary["status"], summary["players"]
    registered = f"{players} player{'s' if players != 1 else ''} registered"
    if status == League.Status.REGISTERING:
        closes = summary["registration_closes_at"]
        until = f" until {closes[11:16]} UTC" if closes else ""
        return f"Registration open{until}, {registered}."
    if status == League.Status.INITIALIZING:
        return f"Registration has not opened yet, {registered}."
    if status == League.Status.READY:
        return f"Registration closed with {registered}; the schedule is being drawn."
    if status == League.Status.PAUSED:
        return f"Paused by the organiser after {prog['matches_finished']} of {prog['matches_total']} matches."
    if status == League.Status.CANCELLED:
        return "This league was cancelled."
    if status == League.Status.COMPLETED:
        champion = summary["champion"]
        if champion:
            return f"Completed. Champion: {champion['display_name']} ({champion['player_id']})."
        return "Completed."
    return f"Round {prog['current_round']} of {prog['rounds_total']} in play."


def snapshot(league_id: str) -> dict[str, Any] | None:
    """Everything the live league page shows; what the websocket sends on connect."""
    league = League.objects.select_related("champion").filter(league_id=league_id).first()
    if league is None:
        return None
    results = list(_results(league))
    summary, prog = league_summary(league), progress(league)
    return {
        "league": summary,
        "note": league_note(summary, prog),
        "progress": prog,
        "standings": standings(league, results),
        "rounds": rounds(league),
        "recent_matches": recent_matches(league),
        "chart": points_over_rounds(league, results),
    }


def player_profile(player: Player) -> dict[str, Any]:
    """A player's record: standing row, history, opponents, how often it picks even or odd."""
    league = player.league
    table = {row["player_id"]: row for row in standings(league)}
    matches = [
        match_summary(m)
        for m in matches_queryset(league).filter(Q(player_a=player) | Q(player_b=player)).order_by("round__number")
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
        if res["winner"] == mine["player_id"]:
            opp["wins"] += 1
            m["my_outcome"] = "W"
        elif res["winner"] is None and not res["technical_loss"]:
            opp["draws"] += 1
            m["my_outcome"] = "D"
        else:
            opp["losses"] += 1
            m["my_outcome"] = "L"
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
        "registered_at": _iso(player.registered_at),
        "last_seen_at": _iso(player.last_seen_at),
        "standing": table.get(player.player_id),
        "parity": {
            "even": parity["even"],
            "odd": parity["odd"],
            "even_percent": round(100 * parity["even"] / chosen) if chosen else None,
        },
        "opponents": sorted(opponents.values(), key=lambda o: o["player_id"]),
        "matches": matches,
    }


def referee_profile(referee: Referee) -> dict[str, Any]:
    matches = list(matches_queryset(referee.league).filter(referee=referee).order_by("-id"))
    running = sum(1 for m in matches if m.status in RUNNING_MATCH)
    reported = MatchResult.objects.filter(referee=referee).count()
    return {
        "referee_id": referee.referee_id,
        "display_name": referee.display_name,
        "status": referee.status,
        "version": referee.version,
        "game_types": referee.game_types,
        "registered_at": _iso(referee.registered_at),
        "last_seen_at": _iso(referee.last_seen_at),
        "max_concurrent_matches": referee.max_concurrent_matches,
        "running": running,
        "load_percent": round(100 * running / referee.max_concurrent_matches) if referee.max_concurrent_matches else 0,
        "matches_reported": reported,
        "matches_assigned": len(matches),
        "failures": referee.failures,
        "matches": [match_summary(m) for m in matches[:100]],
    }
