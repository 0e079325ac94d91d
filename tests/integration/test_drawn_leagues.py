"""Swiss and knockout leagues of real processes (the LM site, two referees, a ``runplayer`` host,
the conductor) played to LEAGUE_COMPLETED with the course's messages, each round drawn once, even
with the conductor killed (SIGKILL) between rounds and started again."""

from __future__ import annotations

from collections import Counter

import pytest

from league.conductor import delivery_log
from league.models import Bye, Event, League, Match, MatchResult, Round
from tests.integration.worlds import Host, MixedWorld
from tests.support.waiting import wait_until

pytestmark = pytest.mark.processes

FAST = {
    "join_timeout": 2.0,
    "move_timeout": 2.0,
    "game_over_timeout": 1.0,
    "report_timeout": 2.0,
    "default_timeout": 2.0,
    "retries": 1,
    "retry_delay": 0.2,
    "match_deadline": 30.0,
}


def make_world(agent_env, manage_py, tmp_path, league_id: str, players: int, **settings) -> MixedWorld:
    return MixedWorld(agent_env, manage_py, tmp_path, league_id, [Host("Bot", "random", players)], **FAST, **settings)


def round_of(d: delivery_log.Sent) -> int:
    return d.round_id


def final_message(league: League) -> dict:
    return next(delivery_log.sent(league, kind="LEAGUE_COMPLETED")).message


def assert_course_messages(league: League, players: int, rounds: int) -> None:
    """Each round announced to every player, completed to every player, then LEAGUE_COMPLETED."""
    announced = Counter(round_of(d) for d in delivery_log.sent(league, kind="ROUND_ANNOUNCEMENT"))
    completed = Counter(round_of(d) for d in delivery_log.sent(league, kind="ROUND_COMPLETED"))
    assert set(announced) == set(completed) == set(range(1, rounds + 1))
    assert all(announced[n] >= players and completed[n] >= players for n in announced)
    final = final_message(league)
    assert final["total_rounds"] == rounds
    assert final["champion"]["player_id"] == final["final_standings"][0]["player_id"]


def test_a_swiss_league_of_nine_plays_four_rounds_through_a_conductor_killed_between_rounds(
    agent_env, manage_py, tmp_path
):
    players, rounds = 9, 4
    world = make_world(agent_env, manage_py, tmp_path, "swissnine", players, schedule_format="swiss", swiss_rounds=4)
    try:
        world.start()
        conductor = world.conductor()
        # Killed once round 2 is drawn: before or after round 1's completion commits, whichever.
        wait_until(lambda: Round.objects.filter(league=world.league, number=2).exists(), 60, "round 2 drawn")
        conductor.kill()
        world.conductor()
        world.wait_completed(timeout=120)
        league = world.league
        assert list(league.rounds.values_list("number", "status")) == [(n, "COMPLETED") for n in range(1, 5)]
        assert Event.objects.filter(league=league, kind="round_drawn").count() == rounds
        pairs = [
            frozenset(pair)
            for pair in Match.objects.filter(league=league).values_list("player_a__player_id", "player_b__player_id")
        ]
        assert len(pairs) == len(set(pairs)) == rounds * (players // 2), "a rematch, or a round drawn twice"
        assert MatchResult.objects.filter(league=league).count() == len(pairs)
        byes = Counter(Bye.objects.filter(league=league).values_list("player__player_id", flat=True))
        assert sum(byes.values()) == rounds and set(byes.values()) == {1}
        assert_course_messages(league, players, rounds)
        final = final_message(league)["final_standings"]
        for row in final:  # a bye is worth a win's points, without a match played
            assert row["points"] == 3 * row["wins"] + row["draws"] + 3 * byes.get(row["player_id"], 0)
    finally:
        world.stop()


def test_a_knockout_of_eight_plays_three_rounds_to_its_champion(agent_env, manage_py, tmp_path):
    world = make_world(agent_env, manage_py, tmp_path, "knockouteight", 8, schedule_format="knockout")
    try:
        world.start()
        world.conductor()
        world.wait_completed(timeout=120)
        league = world.league
        counts = [league.matches.filter(round__number=n).count() for n in (1, 2, 3)]
        assert counts == [4, 2, 1] and league.rounds.count() == 3
        assert_course_messages(league, 8, 3)
        # Only players who went through a round play the next one.
        for number in (2, 3):
            seated = set(
                p
                for pair in league.matches.filter(round__number=number).values_list("player_a_id", "player_b_id")
                for p in pair
            )
            before = league.matches.filter(round__number=number - 1).select_related("result")
            losers = {
                m.player_b_id if m.result.outcome == "WIN_A" else m.player_a_id
                for m in before
                if m.result.outcome in ("WIN_A", "WIN_B")
            }
            assert len(seated) == 2 ** (4 - number) and not seated & losers
        final = league.matches.select_related("result").get(round__number=3)
        league.refresh_from_db()
        assert league.champion_id in (final.player_a_id, final.player_b_id)
        if final.result.outcome == "WIN_B":
            assert league.champion_id == final.player_b_id
        else:  # a win for A, or a draw: the higher seed (player A) goes through
            assert league.champion_id == final.player_a_id
    finally:
        world.stop()
