"""Seats that never answered (league/conductor/reachability.py) and how the join panel shows
each agent (league/api/readmodel.py, ``reachability``): the database steps, directly. The
conductor's pings over real HTTP are tested in tests/integration/test_seat_probe.py and, in a
browser, tests/browser/test_join_reachability.py."""

from __future__ import annotations

import pytest
from django.utils import timezone

from league import actions
from league.api.readmodel import reachability
from league.conductor.reachability import WITHDRAWN, record_answer, relay_answered, withdraw_silent_players
from league.models import AgentStatus, Event, League, Player
from tests.league.lm_support import make_league

pytestmark = pytest.mark.django_db


def seat(league: League, player_id: str, **fields) -> Player:
    return Player.objects.create(
        league=league,
        player_id=player_id,
        display_name=player_id,
        endpoint=f"http://127.0.0.1:{8100 + int(player_id[1:])}/mcp",
        token_hash=player_id,
        **fields,
    )


def test_it_withdraws_the_players_that_never_answered_and_only_them():
    league = make_league("withdraw")
    now = timezone.now()
    seat(league, "P01", answered_at=now)
    seat(league, "P02", unreachable_since=now, unreachable_reason="E009 connection refused")
    seat(league, "P03", connection=Player.Connection.RELAY, relay_channel="specific.x!1", relay_changed_at=now)
    seat(league, "P04", connection=Player.Connection.RELAY)  # never connected
    seat(league, "P05", connection=Player.Connection.RELAY, relay_changed_at=now)  # connected once, dropped
    seat(league, "P06", status=AgentStatus.SUSPENDED)  # the admin's: left as it is
    seat(league, "P07")
    assert withdraw_silent_players(league.pk) == []  # not READY yet: nothing happens
    actions.start_league(league)

    assert withdraw_silent_players(league.pk) == ["P02", "P04", "P07"]

    rows = {p.player_id: p for p in Player.objects.filter(league=league)}
    assert {pid for pid, p in rows.items() if p.status == AgentStatus.REMOVED} == {"P02", "P04", "P07"}
    assert rows["P02"].unreachable_reason == f"{WITHDRAWN} (E009 connection refused)"
    assert rows["P07"].unreachable_reason == f"{WITHDRAWN} (no probe reached it)" and rows["P07"].unreachable_since
    assert rows["P06"].status == AgentStatus.SUSPENDED
    events = Event.objects.filter(league=league, kind="player_withdrawn").order_by("id")
    assert [e.agent for e in events] == ["P02", "P04", "P07"]
    assert withdraw_silent_players(league.pk) == []  # once


def test_a_relay_player_with_its_socket_connected_has_answered():
    league = make_league("relay_answer")
    seat(league, "P01", connection=Player.Connection.RELAY, relay_channel="specific.x!1")
    seat(league, "P02", connection=Player.Connection.RELAY)
    assert relay_answered(league.pk) == 1
    assert Player.objects.get(league=league, player_id="P01").answered_at is not None
    assert Player.objects.get(league=league, player_id="P02").answered_at is None


def test_the_first_answer_is_logged_once_and_later_ones_refresh_the_time_at_most_each_minute():
    league = make_league("first_answer")
    player = seat(league, "P01")
    assert record_answer(player) is True
    first = Player.objects.get(pk=player.pk).answered_at
    assert record_answer(player) is False
    assert Player.objects.get(pk=player.pk).answered_at == first  # fresh: not written again
    assert Event.objects.filter(league=league, kind="agent_answered", agent="P01").count() == 1


def test_the_panel_says_whether_each_agent_answers():
    league = make_league("panel_states")
    now = timezone.now()
    cases = {
        "P01": (seat(league, "P01", answered_at=now), "ok", "Answering: it answered the league's ping at"),
        "P02": (
            seat(league, "P02", unreachable_since=now, unreachable_reason="E009 connection refused"),
            "silent",
            "Not answering: E009 connection refused. It plays no match unless it answers before the league starts.",
        ),
        "P03": (
            seat(league, "P03", answered_at=now, unreachable_since=now, unreachable_reason="E001 no reply"),
            "silent",
            "Not answering: E001 no reply. It loses its matches until it answers.",
        ),
        "P04": (seat(league, "P04"), "not_called", "Not called by the league yet"),
        "P05": (
            seat(league, "P05", connection=Player.Connection.RELAY, relay_channel="specific.x!1"),
            "ok",
            "Answering: connected through the relay.",
        ),
        "P06": (
            seat(league, "P06", connection=Player.Connection.RELAY),
            "silent",
            "Not answering: not connected to the relay.",
        ),
    }
    for player_id, (player, state, text) in cases.items():
        got_state, summary = reachability(player, [])
        assert got_state == state and summary.startswith(text), (player_id, got_state, summary)


def test_an_agent_registering_again_at_another_address_has_not_answered_there_yet():
    league = make_league("moved_seat")
    first = actions.register_player(
        league.league_id, {"display_name": "Mover", "contact_endpoint": "http://127.0.0.1:8201/mcp"}, None
    )
    player = Player.objects.get(league=league, player_id=first.agent_id)
    record_answer(player)
    same = actions.register_player(
        league.league_id, {"display_name": "Mover", "contact_endpoint": "http://127.0.0.1:8201/mcp"}, first.auth_token
    )
    assert same.agent_id == player.player_id
    assert Player.objects.get(pk=player.pk).answered_at is not None  # the same address: still answered
    moved = actions.register_player(
        league.league_id, {"display_name": "Mover", "contact_endpoint": "http://127.0.0.1:8202/mcp"}, same.auth_token
    )
    assert moved.agent_id == player.player_id
    assert Player.objects.get(pk=player.pk).answered_at is None
