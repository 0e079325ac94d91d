"""Every message we send carries every field the course prints for it.

Small leagues are played over real HTTP by the real conductor: one with recording players and a
real referee (what a player receives, and its registration reply), one with recording referees
(what a referee receives, and the LM's other replies). Each message is checked against the
fields listed below, written from docs/protocol.md: a strict student agent that validates those
fields has nothing to refuse.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from league import actions
from league.conductor.dispatch import expected_referees
from league.models import League, Match, Referee
from tests.league.conductor_support import ScriptedPlayers, ScriptedReferee
from tests.league.lm_support import call, make_league, message, player_meta, register_player
from tests.league.test_conductor import FAST, conduct
from tests.referee.conftest import run_referee

ENVELOPE = ("protocol", "message_type", "sender", "timestamp", "conversation_id")

# message type → its required fields; "a[].b" is field b of every item of list a, "a.b" field b
# of object a. Written from docs/protocol.md: #messages-the-league-manager-sends (the LM's notices),
# #registering and #asking-the-league (its replies), #tools-a-referee-serves (START_MATCH),
# #reporting-a-result-referees (MATCH_RESULT_ACK), #how-a-match-runs and #games (the referee's).
REQUIRED: dict[str, tuple[str, ...]] = {
    "LEAGUE_REGISTER_RESPONSE": ("status", "player_id", "auth_token", "league_id", "reason"),
    "ROUND_ANNOUNCEMENT": (
        "league_id",
        "round_id",
        "matches",
        "matches[].match_id",
        "matches[].game_type",
        "matches[].player_A_id",
        "matches[].player_B_id",
        "matches[].referee_endpoint",
    ),
    "LEAGUE_STANDINGS_UPDATE": (
        "league_id",
        "round_id",
        "standings",
        "standings[].rank",
        "standings[].player_id",
        "standings[].display_name",
        "standings[].played",
        "standings[].wins",
        "standings[].draws",
        "standings[].losses",
        "standings[].points",
    ),
    "ROUND_COMPLETED": ("league_id", "round_id", "matches_played", "next_round_id"),
    "LEAGUE_COMPLETED": (
        "league_id",
        "total_rounds",
        "total_matches",
        "champion",
        "champion.player_id",
        "champion.display_name",
        "champion.points",
        "final_standings",
        "final_standings[].rank",
        "final_standings[].player_id",
        "final_standings[].points",
    ),
    "REFEREE_REGISTER_RESPONSE": ("status", "referee_id", "auth_token", "league_id", "reason"),
    "LEAGUE_QUERY_RESPONSE": ("league_id", "query_type", "success", "data"),
    "START_MATCH": (
        "league_id",
        "round_id",
        "match_id",
        "game_type",
        "player_A_id",
        "player_B_id",
        "player_A_endpoint",
        "player_B_endpoint",
    ),
    "MATCH_RESULT_ACK": ("match_id", "status"),
    "GAME_INVITATION": ("league_id", "round_id", "match_id", "game_type", "role_in_match", "opponent_id"),
    "CHOOSE_PARITY_CALL": (
        "league_id",
        "round_id",
        "match_id",
        "player_id",
        "game_type",
        "context.opponent_id",
        "context.round_id",
        "context.your_standings",
        "deadline",
    ),
    "GAME_OVER": (
        "league_id",
        "round_id",
        "match_id",
        "game_type",
        "game_result.status",
        "game_result.winner_player_id",
        "game_result.drawn_number",
        "game_result.number_parity",
        "game_result.choices",
        "game_result.reason",
    ),
}
# What a player gets (the other types go to referees, or answer a query).
TO_PLAYERS = {
    "LEAGUE_REGISTER_RESPONSE", "ROUND_ANNOUNCEMENT", "LEAGUE_STANDINGS_UPDATE", "ROUND_COMPLETED",
    "LEAGUE_COMPLETED", "GAME_INVITATION", "CHOOSE_PARITY_CALL", "GAME_OVER",
}  # fmt: skip


def missing_fields(message: dict[str, Any], required: tuple[str, ...]) -> list[str]:
    """The required fields (and envelope fields) ``message`` lacks. A key holding null is present:
    ``next_round_id`` is null after the last round, ``reason`` when nothing was refused."""
    missing = [name for name in ENVELOPE if name not in message]
    for path in required:
        head, _, rest = path.partition(".")
        if head.endswith("[]"):
            items = message.get(head[:-2])
            if not isinstance(items, list):
                missing.append(path)
                continue
            for n, item in enumerate(items):
                if not isinstance(item, dict) or rest not in item:
                    missing.append(f"{head[:-2]}[{n}].{rest}")
        elif rest:
            inner = message.get(head)
            if not isinstance(inner, dict) or rest not in inner:
                missing.append(path)
        elif head not in message:
            missing.append(path)
    return missing


def test_the_checker_finds_a_missing_field():
    announcement = {
        **dict.fromkeys(ENVELOPE, "x"),
        "league_id": "l",
        "round_id": 1,
        "matches": [{"match_id": "R1M1", "game_type": "even_odd", "player_A_id": "P01", "player_B_id": "P02"}],
    }
    assert missing_fields(announcement, REQUIRED["ROUND_ANNOUNCEMENT"]) == ["matches[0].referee_endpoint"]
    del announcement["timestamp"]
    assert "timestamp" in missing_fields(announcement, REQUIRED["ROUND_ANNOUNCEMENT"])


def test_every_message_a_player_receives_carries_the_courses_fields(lm_server, tmp_path):
    league = make_league("outgoing_fields", **FAST)
    group = ScriptedPlayers(3).start()
    try:
        with run_referee(league_url=lm_server, league_id=league.league_id, state_dir=tmp_path) as referee:
            referee.wait_registered()
            replies = []
            for port, url in zip(group.server.ports, group.server.urls(), strict=True):
                meta = player_meta(url, display_name=f"bot{port}")
                replies.append(register_player(lm_server, f"bot{port}", player_meta=meta, league_id=league.league_id))
            actions.close_registration(league)
            conduct(league.league_id)
            referee_url = referee.url
    finally:
        group.stop()

    league.refresh_from_db()
    assert league.status == League.Status.COMPLETED
    received = [m for port in group.server.ports for m in (*group.received[port], *group.games[port])]
    seen = {m["message_type"] for m in received} | {r["message_type"] for r in replies}
    assert seen >= TO_PLAYERS, f"not sent in this league: {TO_PLAYERS - seen}"
    problems = {}
    for m in [*replies, *received]:
        missing = missing_fields(m, REQUIRED.get(m["message_type"], ()))
        if missing:
            problems.setdefault(m["message_type"], set()).update(missing)
    assert problems == {}
    # The announced referee is the one that ran the match (the league has one).
    for notice in received:
        if notice["message_type"] == "ROUND_ANNOUNCEMENT":
            assert {m["referee_endpoint"] for m in notice["matches"]} == {referee_url}
    completed = [m for m in received if m["message_type"] == "ROUND_COMPLETED"]
    assert {m["next_round_id"] for m in completed if m["round_id"] == 3} == {None}
    assert all(m["matches_played"] == 1 for m in completed)


def test_what_referees_get_and_every_reply_carry_the_courses_fields(lm_server):
    """Two scripted referees (they record START_MATCH and LEAGUE_COMPLETED), four players and a
    fifth that only asks for the standings (nobody serves its endpoint): the
    LM's messages to referees and its replies; each match is announced with the endpoint of the
    referee that then gets its START_MATCH (here the whole round fits their capacity)."""
    league = make_league("outgoing_fields_referees", **FAST)
    group = ScriptedPlayers(4).start()
    starts: list[tuple[str, dict[str, Any]]] = []  # (the referee's URL, the START_MATCH it got)
    refs = [ScriptedReferee(lm_server).start() for _ in range(2)]
    for ref in refs:
        ref.on_start = partial(lambda url, start: starts.append((url, start)), ref.url)
    try:
        registrations = [ref.register(league.league_id, capacity=2) for ref in refs]
        ids = group.register(lm_server, league.league_id)
        token = register_player(
            lm_server, "asker", player_meta=player_meta(display_name="asker"), league_id=league.league_id
        )
        query = call(
            lm_server,
            "league_query",
            message("LEAGUE_QUERY", "player:asker", auth_token=token["auth_token"], league_id=league.league_id,
                    query_type="GET_STANDINGS", query_params={}),
        )  # fmt: skip
        assert query["success"] is True
        actions.close_registration(league)
        conduct(league.league_id)
    finally:
        group.stop()
        for ref in refs:
            ref.stop()

    league.refresh_from_db()
    assert league.status == League.Status.COMPLETED
    sent: list[dict[str, Any]] = [*registrations, query, *(start for _, start in starts)]
    for ref in refs:
        sent += ref.received + ref.reports
    assert {m["message_type"] for m in sent} >= {
        "REFEREE_REGISTER_RESPONSE", "LEAGUE_QUERY_RESPONSE", "START_MATCH", "LEAGUE_COMPLETED", "MATCH_RESULT_ACK"
    }  # fmt: skip
    problems = {}
    for m in sent:
        missing = missing_fields(m, REQUIRED.get(m["message_type"], ()))
        if missing:
            problems.setdefault(m["message_type"], set()).update(missing)
    assert problems == {}
    announced = {
        match["match_id"]: match["referee_endpoint"]
        for port in ids
        for m in group.received[port]
        if m["message_type"] == "ROUND_ANNOUNCEMENT"
        for match in m["matches"]
    }
    started = {start["match_id"]: url for url, start in starts}
    assert {match_id: announced[match_id] for match_id in started} == started
    assert set(started.values()) == {ref.url for ref in refs}
    # The asker, whom nobody serves, is marked unreachable: its matches are decided by the LM at
    # once, without a START_MATCH; they are the only ones announced and never started.
    never_started = Match.objects.filter(league=league, match_id__in=set(announced) - set(started))
    assert all(token["player_id"] in (m.player_a.player_id, m.player_b.player_id) for m in never_started)


@pytest.mark.django_db
def test_the_expected_referee_is_the_one_with_most_room_and_none_without_referees():
    league = make_league("expected_referees")
    assert expected_referees(league.pk, 2) == [None, None]  # the LM's built-in referee: no endpoint
    small = Referee.objects.create(
        league=league, referee_id="REF01", endpoint="http://10.0.0.1:8001/mcp", token_hash="a", max_concurrent_matches=1
    )
    big = Referee.objects.create(
        league=league, referee_id="REF02", endpoint="http://10.0.0.2:8001/mcp", token_hash="b", max_concurrent_matches=2
    )
    # Most free capacity first, the older referee on a tie; once all are full, a new wave.
    assert expected_referees(league.pk, 4) == [big.endpoint, small.endpoint, big.endpoint, big.endpoint]
