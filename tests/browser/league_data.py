"""Real league rows for dashboard tests: a scheduled league and results recorded as the LM does.

Results go straight into the models (the dashboard reads the database, whoever wrote it) and
every change is announced with ``league.events.broadcast`` after commit (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from league import actions
from league.arena import identity_of
from league.conductor.transitions import create_schedule
from league.events import broadcast
from league.models import League, Match, MatchResult, Player, Rating, Referee, Round, hash_token
from league.schedule import schedule_matches

Notify = Callable[[str, str, dict[str, Any]], None]

NAMES = [
    "Alpha", "Bravo", "Charlie", "Delta", "Echo", "Foxtrot", "Golf", "Hotel",
    "India", "Juliett", "Kilo", "Lima", "Mike", "November", "Oscar", "Papa",
]  # fmt: skip


def seat_players(league: League, count: int) -> None:
    """``count`` registered players P01… with the names, endpoints and tokens every page test
    knows them by."""
    for i in range(count):
        Player.objects.create(
            league=league,
            player_id=f"P{i + 1:02d}",
            display_name=NAMES[i % len(NAMES)],
            endpoint=f"http://127.0.0.1:{8101 + i}/mcp",
            token_hash=hash_token(f"player-secret-{i}"),
            game_types=[league.game_type],
            version="1.0.0",
        )


def make_league(
    league_id: str = "spring_cup",
    players: int = 4,
    *,
    status: str = League.Status.RUNNING,
    scheduled: bool = True,
    referees: int = 1,
    game_type: str = "even_odd",
) -> League:
    league = League.objects.create(
        league_id=league_id,
        name=league_id.replace("_", " ").title(),
        game_type=game_type,
        status=status,
        registration_closes_at=timezone.now() + timedelta(minutes=5),
        started_at=timezone.now() if scheduled else None,
    )
    seat_players(league, players)
    for i in range(referees):
        Referee.objects.create(
            league=league,
            referee_id=f"REF{i + 1:02d}",
            display_name=f"Referee {i + 1}",
            endpoint=f"http://127.0.0.1:{8001 + i}/mcp",
            token_hash=hash_token(f"referee-secret-{i}"),
            game_types=["even_odd"],
        )
    if scheduled:
        ids = [f"P{i + 1:02d}" for i in range(players)]
        by_id = {p.player_id: p for p in league.players.all()}
        rounds: dict[int, Round] = {}
        for sm in schedule_matches(ids):
            if sm.round_number not in rounds:
                rounds[sm.round_number] = Round.objects.create(league=league, number=sm.round_number)
            Match.objects.create(
                league=league,
                round=rounds[sm.round_number],
                match_id=sm.match_id,
                player_a=by_id[sm.player_a],
                player_b=by_id[sm.player_b],
                game_type=league.game_type,
            )
        league.current_round = 1
        league.save(update_fields=["current_round"])
        Round.objects.filter(league=league, number=1).update(status=Round.Status.ANNOUNCED)
    return league


def make_knockout(league_id: str, players: int, ratings: dict[str, float]) -> League:
    """A knockout league started as the LM starts one, its round 1 drawn and so its seeds stored:
    by ``ratings`` (player id → arena ordinal), then the players never rated by id."""
    league = actions.create_league(
        name=league_id.replace("_", " ").title(), league_id=league_id, schedule_format="knockout"
    )
    league = actions.open_registration(league, 600)
    seat_players(league, players)
    Referee.objects.create(
        league=league,
        referee_id="REF01",
        display_name="Referee 1",
        endpoint="http://127.0.0.1:8001/mcp",
        token_hash=hash_token("referee-secret-0"),
        game_types=[league.game_type],
    )
    for player in league.players.filter(player_id__in=ratings):
        ordinal = ratings[player.player_id]
        Rating.objects.create(
            identity=identity_of(player.connection, player.canonical_endpoint, player.display_name),
            game_type=league.game_type,
            display_name=player.display_name,
            mu=ordinal + 3,
            sigma=1.0,
            ordinal=ordinal,
        )
    actions.start_league(league)
    assert create_schedule(league.pk)
    return League.objects.get(pk=league.pk)


def match_news(match: Match) -> dict[str, Any]:
    """What the LM's events of a match name (league/actions/results.py, league/conductor/dispatch.py)."""
    return {
        "match_id": match.match_id,
        "round_id": match.round.number,
        "player_A_id": match.player_a.player_id,
        "player_B_id": match.player_b.player_id,
        "referee_id": match.referee.referee_id if match.referee_id else None,
    }


def start(match: Match, notify: Notify = broadcast) -> None:
    with transaction.atomic():
        match.referee = match.league.referees.first()
        match.status = Match.Status.RUNNING
        match.assigned_at = timezone.now()
        match.save(update_fields=["referee", "status", "assigned_at"])
        notify(match.league.league_id, "match_started", match_news(match))


def play(
    match: Match,
    choice_a: str,
    choice_b: str,
    drawn: int,
    *,
    technical: str | None = None,
    notify: Notify = broadcast,
) -> MatchResult:
    """Record a finished even/odd match as the referee reports it; ``technical`` names a failing side
    ("A" or "B") whose opponent wins 3-0."""
    a, b = match.player_a.player_id, match.player_b.player_id
    parity = "even" if drawn % 2 == 0 else "odd"
    if technical:
        outcome = MatchResult.Outcome.WIN_B if technical == "A" else MatchResult.Outcome.WIN_A
        reason = f"{a if technical == 'A' else b} did not answer choose_parity"
    elif choice_a == choice_b:
        outcome, reason = MatchResult.Outcome.DRAW, "both chose the same parity"
    elif choice_a == parity:
        outcome, reason = MatchResult.Outcome.WIN_A, f"{a} chose {parity}"
    else:
        outcome, reason = MatchResult.Outcome.WIN_B, f"{b} chose {parity}"
    points = {"WIN_A": (3, 0), "WIN_B": (0, 3), "DRAW": (1, 1)}[outcome]
    now = timezone.now()
    log = [
        _entry(1, 0, "OUT", a, "handle_game_invitation", "GAME_INVITATION", latency=4.1),
        _entry(2, 4, "IN", a, "handle_game_invitation", "GAME_JOIN_ACK", latency=4.1),
    ]
    if technical:
        log.append(_entry(3, 300, "OUT", b, "choose_parity", "CHOOSE_PARITY_CALL", outcome="timeout", attempt=1))
        log.append(_entry(4, 600, "OUT", b, "choose_parity", "CHOOSE_PARITY_CALL", outcome="timeout", attempt=2))
    else:
        # As the referee logs a call: the OUT entry with its outcome and latency, then the reply.
        log.append(_entry(3, 5, "OUT", b, "choose_parity", "CHOOSE_PARITY_CALL", latency=3.7))
        log.append(_entry(4, 9, "IN", b, "choose_parity", "CHOOSE_PARITY_RESPONSE", latency=3.7, choice=choice_b))
    log.append(_entry(len(log) + 1, 610, "EVENT", "referee", "", "NUMBER_DRAWN", drawn_number=drawn))
    with transaction.atomic():
        result = MatchResult.objects.create(
            match=match,
            league=match.league,
            referee=match.referee or match.league.referees.first(),
            outcome=outcome,
            winner=match.player_a if outcome == "WIN_A" else match.player_b if outcome == "WIN_B" else None,
            points_a=points[0],
            points_b=points[1],
            technical_loss_a=technical == "A",
            technical_loss_b=technical == "B",
            details={
                "drawn_number": drawn,
                "number_parity": parity,
                "choices": {a: choice_a, b: choice_b} if not technical else {a: choice_a},
                "reason": reason,
            },
            log=log,
            report_digest=f"digest-{match.match_id}",
        )
        match.status = Match.Status.FINISHED
        match.finished_at = now
        match.referee = result.referee
        match.save(update_fields=["status", "finished_at", "referee"])
        League.objects.filter(pk=match.league_id).changed()  # as recording a result does
        rnd = match.round
        if not rnd.matches.exclude(status=Match.Status.FINISHED).exists():
            rnd.status = Round.Status.COMPLETED
            rnd.completed_at = now
            rnd.save(update_fields=["status", "completed_at"])
            league = match.league
            nxt = league.rounds.filter(number=rnd.number + 1).first()
            if nxt:
                nxt.status = Round.Status.ANNOUNCED
                nxt.save(update_fields=["status"])
                league.current_round = nxt.number
                league.save(update_fields=["current_round"])
            notify(league.league_id, "round_completed", {"round_id": rnd.number})
        notify(match.league.league_id, "match_finished", match_news(match))
    return result


def play_bo5(match: Match, moves: list[tuple[int, int]], notify: Notify = broadcast) -> MatchResult:
    """Record a best-of-5 match as its referee reports it: ``moves`` are (A's number, B's number)
    per game; A plays ODD, B EVEN (referee/games/even_odd_bo5.py)."""
    a, b = match.player_a.player_id, match.player_b.player_id
    scores, rounds = {a: 0, b: 0}, []
    for n, (move_a, move_b) in enumerate(moves, start=1):
        total = move_a + move_b
        winner = a if total % 2 else b
        scores[winner] += 1
        rounds.append(
            {
                "game_round": n,
                "moves": {a: move_a, b: move_b},
                "sum": total,
                "sum_type": "ODD" if total % 2 else "EVEN",
                "round_winner": winner,
            }
        )
    won = a if scores[a] > scores[b] else b
    with transaction.atomic():
        result = MatchResult.objects.create(
            match=match,
            league=match.league,
            referee=match.league.referees.first(),
            outcome=MatchResult.Outcome.WIN_A if won == a else MatchResult.Outcome.WIN_B,
            winner=match.player_a if won == a else match.player_b,
            points_a=3 if won == a else 0,
            points_b=3 if won == b else 0,
            details={"roles": {a: "ODD", b: "EVEN"}, "scores": scores, "rounds": rounds, "reason": f"{won} won"},
            log=[
                _entry(1, 0, "OUT", a, "make_move", "MOVE_REQUEST"),
                _entry(2, 3, "IN", a, "make_move", "MOVE_RESPONSE", latency=2.5),
            ],
            report_digest=f"digest-{match.match_id}",
        )
        match.status = Match.Status.FINISHED
        match.finished_at = timezone.now()
        match.referee = result.referee
        match.save(update_fields=["status", "finished_at", "referee"])
        League.objects.filter(pk=match.league_id).changed()  # as recording a result does
        notify(match.league.league_id, "match_finished", match_news(match))
    return result


def complete(league: League, notify: Notify = broadcast) -> None:
    from league.api.readmodel import standings

    with transaction.atomic():
        top = standings(league)[0]
        league.status = League.Status.COMPLETED
        league.champion = league.players.get(player_id=top["player_id"])
        league.completed_at = timezone.now()
        league.save(update_fields=["status", "champion", "completed_at"])
        notify(league.league_id, "league_completed", {"champion": top["player_id"]})


def play_round(league: League, number: int, drawn: int = 4, notify: Notify = broadcast) -> None:
    for match in Match.objects.filter(league=league, round__number=number).select_related("player_a", "player_b"):
        play(match, "even", "odd", drawn, notify=notify)


def answer_moves_in(match: Match, latencies_ms: dict[str, list[float]]) -> None:
    """Replace the move calls in ``match``'s stored log with answered ones taking these times (ms)."""
    result = match.result
    call = next(e for e in result.log if e["direction"] == "OUT" and e["message_type"] == "CHOOSE_PARITY_CALL")
    result.log = [e for e in result.log if e["message_type"] != "CHOOSE_PARITY_CALL"] + [
        {**call, "peer": player_id, "outcome": "ok", "latency_ms": latency}
        for player_id, latencies in latencies_ms.items()
        for latency in latencies
    ]
    result.save(update_fields=["log"])


def _entry(seq, t_ms, direction, peer, method, message_type, *, outcome="ok", attempt=1, latency=None, **message):
    return {
        "seq": seq,
        "at": timezone.now().strftime("%Y-%m-%dT%H:%M:%SZ"),  # when the seeded match is played
        "t_ms": t_ms,
        "direction": direction,
        "peer": peer,
        "method": method,
        "message_type": message_type,
        "outcome": outcome,
        "attempt": attempt,
        "latency_ms": latency,
        "message": {"message_type": message_type, **message},
    }
