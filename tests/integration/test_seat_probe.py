"""Seats that never answered, with real processes: the LM site, a referee, real players
(``runplayer``) and a seat registered at an address where nothing listens (the join panel's
command pasted as it is). The conductor pings each agent; the seat that never answered is
withdrawn before the schedule is drawn, so the league completes with no free win for anyone."""

from __future__ import annotations

import pytest

from league import actions
from league.models import AgentStatus, Event, Match, MatchResult, Player
from tests.integration.worlds import Host, MixedWorld, penalised
from tests.support.servers import free_port
from tests.support.waiting import wait_until

pytestmark = pytest.mark.processes

BOTS = Host("Bot", "random", 3)
SETTINGS = {
    "join_timeout": 2.0,
    "move_timeout": 2.0,
    "game_over_timeout": 1.0,
    "report_timeout": 2.0,
    "default_timeout": 2.0,
    "retries": 1,
    "retry_delay": 0.2,
    "match_deadline": 60.0,
}


@pytest.fixture
def world(agent_env, manage_py, tmp_path):
    w = MixedWorld(agent_env, manage_py, tmp_path, "seatprobe", [BOTS], referees=1, **SETTINGS)
    dead = f"http://127.0.0.1:{free_port()}/mcp"  # nothing listens there
    reg = actions.register_player(w.league.league_id, {"display_name": "Pasted", "contact_endpoint": dead}, None)
    assert reg.status == "ACCEPTED", reg
    w.dead_id = reg.agent_id
    w.players = BOTS.count + 1
    try:
        w.start()
        yield w
    finally:
        w.stop()


def test_a_seat_that_never_answered_plays_no_match_and_the_real_players_play(world):
    world.conductor()
    world.wait_completed(timeout=90)
    league = world.league

    # Withdrawn before the schedule, with the reason on its row and in the Event log.
    dead = Player.objects.get(league=league, player_id=world.dead_id)
    assert dead.status == AgentStatus.REMOVED and dead.answered_at is None
    assert dead.unreachable_reason.startswith("never answered before the schedule was drawn"), dead.unreachable_reason
    withdrawn = Event.objects.get(league=league, kind="player_withdrawn", agent=world.dead_id)
    assert "never answered" in withdrawn.payload["reason"]
    schedule = Event.objects.get(league=league, kind="schedule_created")
    assert withdrawn.pk < schedule.pk

    # It is in no match; the real players played each other, with no technical loss at all.
    bots = world.ids_of(BOTS)
    matches = Match.objects.filter(league=league)
    assert not (matches.filter(player_a=dead) | matches.filter(player_b=dead)).exists()
    assert matches.count() == 3 and set(matches.values_list("status", flat=True)) == {Match.Status.FINISHED}
    results = MatchResult.objects.filter(league=league).select_related("match__player_a", "match__player_b")
    assert all(not penalised(r) for r in results), [r.details for r in results]

    # Each real player answered the conductor's ping (its first answer is in the Event log).
    for player in Player.objects.filter(league=league, player_id__in=bots):
        assert player.answered_at is not None, player.player_id
    answered = set(Event.objects.filter(league=league, kind="agent_answered").values_list("agent", flat=True))
    assert bots <= answered


def test_a_registering_league_shows_who_answers_before_it_starts(agent_env, manage_py, tmp_path):
    """While the league registers, the conductor pings each agent: the panel's data says
    "Answering" for a real player and "Not answering" for the dead seat, as they happen."""
    from league.api.readmodel import join_info

    w = MixedWorld(agent_env, manage_py, tmp_path, "seatpanel", [Host("Live", "random", 1)], referees=0, **SETTINGS)
    try:
        dead = f"http://127.0.0.1:{free_port()}/mcp"
        reg = actions.register_player(w.league.league_id, {"display_name": "Pasted", "contact_endpoint": dead}, None)
        assert reg.status == "ACCEPTED", reg
        w.start_site()
        w.conductor()
        w.host_ports["Live"] = free_port()
        w.start_host(w.hosts[0])

        def panel() -> dict[str, str] | None:
            w.league.refresh_from_db()
            info = join_info(w.league) or {"agents": []}
            rows = {a["display_name"]: a["summary"] for a in info["agents"]}
            done = rows.get("Live", "").startswith("Answering") and rows.get("Pasted", "").startswith("Not answering")
            return rows if done else None

        rows = wait_until(panel, 90, "the panel showing who answers")
        assert "connection refused" in rows["Pasted"] or "nothing listens" in rows["Pasted"], rows
    finally:
        w.stop()
