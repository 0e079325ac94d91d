"""Players that never answer (one reads and says nothing, one answers 10 MB and never closes)
in a league of real processes: the other players' matches do not wait for their notifications,
they are marked unreachable (on their page and in the API, with the reason) and their matches
are then decided at once, with no referee waiting out their timeouts again."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from league import actions
from league.conductor import delivery_log
from league.models import Event, Match, MatchResult, Player
from tests.integration.worlds import Host, MixedWorld, penalised
from tests.support.silent import SilentAgent

pytestmark = pytest.mark.processes

BOTS = Host("Bot", "random", 6)
# Each call to a silent player costs 2 × 2 s + 0.2 s: long enough to see who waits for it.
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
def silent():
    agents = {"mute": SilentAgent("mute").start(), "flood": SilentAgent("flood").start()}
    yield agents
    for agent in agents.values():
        agent.stop()


@pytest.fixture
def world(agent_env, manage_py, tmp_path, silent):
    w = MixedWorld(agent_env, manage_py, tmp_path, "silentagents", [BOTS], **SETTINGS)
    ids = {}
    for name, agent in silent.items():
        reg = actions.register_player(w.league.league_id, {"display_name": name, "contact_endpoint": agent.url}, None)
        assert reg.status == "ACCEPTED", reg
        ids[name] = reg.agent_id
    # They answered once (as at registration; a seat that never answered is withdrawn before the
    # schedule is drawn) and then went silent: what this test is about.
    Player.objects.filter(league=w.league, player_id__in=ids.values()).update(answered_at=timezone.now())
    w.players = BOTS.count + len(silent)
    w.silent_ids = ids
    try:
        w.start()
        yield w
    finally:
        w.stop()


def test_silent_players_hold_no_one_up_and_lose_at_once(world, silent):
    world.conductor()
    world.wait_completed(timeout=90)
    world.assert_each_match_recorded_once()
    world.assert_told_equals_recorded()
    league = world.league
    silent_ids = set(world.silent_ids.values())

    # Both are marked unreachable, with the reason, and lost every match (technically); nobody
    # else lost one technically.
    for player in Player.objects.filter(league=league, player_id__in=silent_ids):
        assert player.unreachable_since is not None, player.player_id
        assert "failed" in player.unreachable_reason, player.unreachable_reason
    results = list(MatchResult.objects.filter(league=league).select_related("match__player_a", "match__player_b"))
    for result in results:
        pair = {result.match.player_a.player_id, result.match.player_b.player_id}
        assert penalised(result) == pair & silent_ids, (result.match.match_id, result.details)

    # Silent in one match, known to be silent for its next (finding 6): a referee played at
    # most its first match (the report says it was silent, and the LM marks it).
    for player_id in silent_ids:
        refereed = [r for r in results if player_id in penalised(r) and r.details.get("decided_by") != "league_manager"]
        assert len(refereed) <= 1, (player_id, [r.match.match_id for r in refereed])

    # Once marked, a silent player's matches never went to a referee again: decided at once.
    decided = [r for r in results if r.details.get("decided_by") == "league_manager"]
    assert decided, "matches of an unreachable player were decided without a referee"
    for player_id in silent_ids:
        marked = Event.objects.get(league=league, kind="player_unreachable", agent=player_id).pk
        theirs = Match.objects.filter(league=league, player_a__player_id=player_id) | Match.objects.filter(
            league=league, player_b__player_id=player_id
        )
        match_ids = set(theirs.values_list("match_id", flat=True))
        late = Event.objects.filter(league=league, kind="match_assigned", match_id__in=match_ids, pk__gt=marked)
        assert not late.exists(), [e.match_id for e in late]

    # Round 1: the matches between the others started before the mute player's announcement
    # had even failed (it takes two 2 s timeouts): they did not wait for its notification.
    mute = world.silent_ids["mute"]
    announced = next(delivery_log.sent(league, agent=mute, kind="ROUND_ANNOUNCEMENT"))  # round 1's
    assert announced.outcome != "ok"
    others = Match.objects.filter(round__league=league, round__number=1).exclude(player_a__player_id__in=silent_ids)
    others = others.exclude(player_b__player_id__in=silent_ids).values_list("match_id", flat=True)
    started = Event.objects.filter(league=league, kind="match_started", match_id__in=list(others))
    assert started.count() == len(others) and all(e.pk < announced.event_id for e in started)

    # Its page and the API say so, with the reason.
    client = Client()
    page = client.get(reverse("player-detail", args=[league.league_id, mute]))
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="unreachable-note"' in text and "Unreachable" in text
    reason = Player.objects.get(league=league, player_id=mute).unreachable_reason
    assert reason.split(":")[0] in text
    api = client.get(reverse("api-player-detail", args=[league.league_id, mute])).json()
    assert api["unreachable_since"] and api["unreachable_reason"] == reason
