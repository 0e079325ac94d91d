"""The practice arena with real processes on loopback: the LM site, two referees, four players
(one a house bot) and the conductor. The agents join with the ordinary registration, play for
a few seconds, every match is rated once, ratings move, and an agent that stops answering is
rested and comes back, never dropped."""

from __future__ import annotations

import pytest
from django.db.models import Count

from league import actions
from league.models import ArenaSeat, Match, MatchResult, Player, Rating, RatingChange
from league.ratings import initial
from tests.integration.test_recovery import FAST
from tests.integration.worlds import Host, MixedWorld
from tests.support.waiting import wait_until

pytestmark = pytest.mark.processes

HOSTS = [Host("Ann", "always_even"), Host("Bob", "random"), Host("Cy", "adaptive"), Host("house", "random")]


@pytest.fixture
def world(agent_env, manage_py, tmp_path):
    w = MixedWorld(agent_env, manage_py, tmp_path, "arena", HOSTS, schedule_format="arena", **FAST)
    try:
        w.start()  # registered, then started like a league: the conductor opens the arena
        yield w
    finally:
        w.stop()


def rated_matches(world: MixedWorld) -> int:
    return RatingChange.objects.filter(league=world.league).values("match").distinct().count()


def test_agents_play_the_arena_continuously_and_every_match_is_rated_once(world):
    world.conductor()
    wait_until(lambda: rated_matches(world) >= 16, timeout=90, what="16 rated arena matches")
    world.league.refresh_from_db()
    assert world.league.status == "RUNNING"  # an arena never completes
    # Paused, and its matches in play finished: what is read below no longer moves.
    actions.pause_league(world.league)
    in_play = Match.objects.filter(league=world.league, status__in=(Match.Status.ASSIGNED, Match.Status.RUNNING))
    wait_until(lambda: not in_play.exists(), timeout=60, what="the arena's matches in play to finish")
    # Each rated match: two changes, one per player, never more (the unique key backs it).
    per_match = RatingChange.objects.filter(league=world.league).values("match").annotate(n=Count("pk"))
    assert {row["n"] for row in per_match} == {2}
    # Every result of a match two players played is rated (technical losses too, both-lost none).
    results = MatchResult.objects.filter(league=world.league).exclude(outcome="BOTH_LOSE")
    rated = set(RatingChange.objects.filter(league=world.league).values_list("match_id", flat=True))
    assert set(results.values_list("match_id", flat=True)) == rated
    # Every agent played, and the ratings moved away from where they all started.
    players = Player.objects.filter(league=world.league)
    assert set(RatingChange.objects.filter(league=world.league).values_list("player_id", flat=True)) == set(
        players.values_list("pk", flat=True)
    )
    identities = set(ArenaSeat.objects.filter(league=world.league).values_list("identity", flat=True))
    rows = Rating.objects.filter(identity__in=identities, game_type=world.league.game_type)
    assert rows.count() == 4
    assert all(r.sigma < initial().sigma for r in rows)
    assert len({round(r.mu, 6) for r in rows}) > 1
    # The latest rating of each agent is its last change's.
    for row in rows:
        last = row.changes.order_by("-pk").first()
        assert (last.mu, last.sigma) == (row.mu, row.sigma)
    assert ArenaSeat.objects.get(league=world.league, player__display_name="house").house


def test_an_agent_that_stops_answering_is_rested_and_plays_again_when_back(world):
    world.conductor()
    cy = Player.objects.get(league=world.league, display_name="Cy")
    wait_until(lambda: RatingChange.objects.filter(player=cy).exists(), timeout=60, what="Cy's first rated match")
    world.host_procs["Cy"].kill()  # SIGKILL: Cy stops answering mid-arena
    lost = wait_until(
        lambda: RatingChange.objects.filter(player=cy, technical=True).order_by("pk").first(),
        timeout=60,
        what="a technical loss for Cy",
    )
    seat = ArenaSeat.objects.get(player=cy)
    assert seat.failures >= 1
    world.start_host(Host("Cy", "adaptive"))  # same port, same --state-dir identity
    back = wait_until(
        lambda: RatingChange.objects.filter(player=cy, technical=False, pk__gt=lost.pk).first(),
        timeout=90,
        what="Cy playing properly again",
    )
    assert back.result in ("W", "D", "L")
    cy.refresh_from_db()
    assert cy.status in ("REGISTERED", "ACTIVE")  # rested, never dropped
    assert ArenaSeat.objects.get(player=cy).failures == 0  # a match played properly ends the rest
    # The others played on meanwhile.
    others = RatingChange.objects.filter(league=world.league, pk__gt=lost.pk).exclude(player=cy)
    assert others.exists()
