"""Kill -9 a player host mid-league (the recovery test's world, players split over two hosts),
restart it: the league completes, every match recorded exactly once, and the killed players'
matches while they were down are technical losses for them, and only those."""

from __future__ import annotations

import pytest
from django.utils import timezone

from league.models import MatchResult
from tests.integration.test_recovery import FAST
from tests.integration.worlds import Host, MixedWorld, penalised
from tests.support.waiting import wait_until

pytestmark = pytest.mark.processes

STAYING = Host("Stay", "random", 9)
VICTIMS = Host("Victim", "random", 3)


@pytest.fixture
def world(agent_env, manage_py, tmp_path):
    # A pause between rounds keeps some rounds for after the restart (the killed players' matches
    # are decided at once while they are marked unreachable, so the rounds go fast meanwhile).
    w = MixedWorld(agent_env, manage_py, tmp_path, "playerkill", [STAYING, VICTIMS], **FAST, round_pause=1.0)
    try:
        w.start()
        yield w
    finally:
        w.stop()


def unreachable(result: MatchResult, player_id: str) -> bool:
    """The referee could not get through to ``player_id`` in this match (refused or cut off),
    or the LM decided the match because the player was marked unreachable (its calls failed)."""
    if result.details.get("decided_by") == "league_manager":
        return f"{player_id} unreachable since" in result.details.get("reason", "")
    out = [e for e in result.log if e["direction"] == "OUT" and e["peer"] == player_id]
    return any(e["outcome"] in ("connection_error", "timeout") for e in out)


def test_it_completes_when_a_player_host_is_killed_and_restarted(world):
    world.conductor()
    wait_until(lambda: world.results() >= 12, timeout=30, what="12 results")
    victims = world.ids_of(VICTIMS)
    world.host_procs[VICTIMS.name].kill()  # SIGKILL: its three players vanish mid-match
    killed_at = timezone.now()

    def played_while_down() -> bool:
        later = MatchResult.objects.filter(league=world.league, reported_at__gt=killed_at)
        return any(
            unreachable(r, victim)
            for r in later.select_related("match__player_a", "match__player_b")
            for victim in {r.match.player_a.player_id, r.match.player_b.player_id} & victims
        )

    # Down until the league has played on without them (a match they could not be reached for).
    wait_until(played_while_down, timeout=30, what="a match decided while the host was dead")
    world.start_host(VICTIMS)  # same ports, same --state-dir identity
    world.wait_completed()
    world.assert_each_match_recorded_once()
    world.assert_told_equals_recorded()

    staying = world.ids_of(STAYING)
    results = list(MatchResult.objects.filter(league=world.league).select_related("match__player_a", "match__player_b"))
    down, after = [], []
    for result in results:
        pair = {result.match.player_a.player_id, result.match.player_b.player_id}
        lost = penalised(result)
        assert not lost & staying, (result.match.match_id, result.details.get("reason"))  # never the live ones
        for victim in pair & victims:
            cut_off = unreachable(result, victim)
            assert (victim in lost) == cut_off, (result.match.match_id, victim, result.details.get("reason"))
            (down if cut_off else after if result.reported_at > killed_at else []).append(result)
    assert down, "some matches were played while the host was dead"
    assert after, "the restarted players played again"
    assert all(r.reported_at > killed_at for r in down)
