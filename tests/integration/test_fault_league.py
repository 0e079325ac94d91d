"""A 16-player league with 6 fault-injection players and 2 referees, all real processes
on loopback. Misbehaving agents cost their owner exactly what the rules say, never the league."""

from __future__ import annotations

import time

import pytest

from league.models import MatchResult
from tests.integration.worlds import Host, MixedWorld, penalised

pytestmark = pytest.mark.processes

GOOD = Host("Good", "random", 10)
SLOW = Host("slow", "slow")  # answers after 60% of its time budget: inside the deadline
# Outside the rules on every decision, and what the referee's reason names for each.
WHY = {"silent": "E001", "http500": "E010", "malformed": "E002", "invalid_parity": "4 invalid answers"}
ALWAYS_OUT = [Host(f, f) for f in WHY]
FLAPPING = Host("flapping", "flapping")  # down (HTTP 503) for every other match it is invited to
SETTINGS = {
    "join_timeout": 0.6,
    "move_timeout": 0.6,
    "game_over_timeout": 0.5,
    "report_timeout": 2.0,
    "default_timeout": 0.5,
    "retries": 1,
    "retry_delay": 0.1,
    "max_invalid_moves": 3,
    "match_deadline": 20.0,
}


@pytest.fixture
def world(agent_env, manage_py, tmp_path):
    w = MixedWorld(agent_env, manage_py, tmp_path, "faults", [GOOD, SLOW, *ALWAYS_OUT, FLAPPING], **SETTINGS)
    try:
        w.start()
        yield w
    finally:
        w.stop()


def decided_by_the_rules(result: MatchResult, a: str, b: str) -> bool:
    details = result.details
    choices, number = details.get("choices") or {}, details.get("drawn_number")
    if set(choices) != {a, b} or not set(choices.values()) <= {"even", "odd"} or number not in range(1, 11):
        return False
    parity = "even" if number % 2 == 0 else "odd"
    if choices[a] == choices[b]:
        return result.outcome == "DRAW" and result.winner is None and (result.points_a, result.points_b) == (1, 1)
    winner = a if choices[a] == parity else b
    points = (3, 0) if winner == a else (0, 3)
    outcome = "WIN_A" if winner == a else "WIN_B"
    return (
        result.outcome == outcome and result.winner.player_id == winner and (result.points_a, result.points_b) == points
    )


def why(result: MatchResult, player_id: str) -> str:
    """The part of a technical loss's reason about ``player_id`` ("P03 gave no answer … (E001 …)")."""
    parts = result.details["reason"].removeprefix("technical loss: ").split("; ")
    return next((p for p in parts if p.startswith(f"{player_id} ")), "")


def test_a_league_with_fault_players_completes_and_only_the_faulty_pay(world):
    started = time.monotonic()
    world.conductor()
    world.wait_completed(timeout=90)
    print(f"16-player fault league played in {time.monotonic() - started:.1f} s")
    world.assert_each_match_recorded_once()
    world.assert_told_equals_recorded()
    assert world.results() == 120

    good = world.ids_of(GOOD) | world.ids_of(SLOW)
    always = set().union(*(world.ids_of(h) for h in ALWAYS_OUT))
    (slow,) = world.ids_of(SLOW)
    (flapping,) = world.ids_of(FLAPPING)
    flapping_down = 0
    results = MatchResult.objects.filter(league=world.league).select_related(
        "match__player_a", "match__player_b", "winner"
    )
    for result in results:
        a, b = result.match.player_a.player_id, result.match.player_b.player_id
        expected = {a, b} & always
        if flapping in (a, b):
            invitations = [e for e in result.log if e["peer"] == flapping and e["method"] == "handle_game_invitation"]
            down = bool(invitations) and all(e["outcome"] != "ok" for e in invitations if e["direction"] == "OUT")
            flapping_down += down
            if down:  # it fails the invitation: the game never starts, so the opponent's fault is never reached
                expected = {flapping}
        assert penalised(result) == expected, (result.match.match_id, a, b, result.details.get("reason"))
        if not expected:  # nobody broke the rules: the game decided it
            assert decided_by_the_rules(result, a, b), (result.match.match_id, result.details)
        if len(expected) == 2:  # both failed: 0/0, no winner
            assert (result.outcome, result.winner, result.points_a, result.points_b) == ("BOTH_LOSE", None, 0, 0)
        elif expected:
            (winner,) = {a, b} - expected
            assert result.outcome == ("WIN_A" if winner == a else "WIN_B") and result.winner.player_id == winner
            assert (result.points_a, result.points_b) == ((3, 0) if winner == a else (0, 3))
        if slow in (a, b):  # the slow-but-legal player never loses on time
            assert all(e["outcome"] == "ok" for e in result.log if e["peer"] == slow), result.match.match_id

    assert flapping_down == 8  # its 1st, 3rd … 15th invitations
    assert not good & set().union(*(penalised(r) for r in results))  # no well-behaved player ever penalised
    # The always-faulty lost every match that reached a decision, each with the reason the rules give.
    for host in ALWAYS_OUT:
        (player,) = world.ids_of(host)
        mine = [r for r in results if player in (r.match.player_a.player_id, r.match.player_b.player_id)]
        lost = [r for r in mine if player in penalised(r)]
        assert len(mine) == 15 and all(WHY[host.name] in why(r, player) for r in lost)
        assert len(lost) >= 14 and all(penalised(r) == {flapping} for r in mine if r not in lost)
