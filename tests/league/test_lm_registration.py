"""Registration with the League Manager over real HTTP (docs/protocol.md, "Registering")."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from league import actions
from league.auth import lm_token
from league.models import Event, League, Player, Referee, hash_token
from tests.league.lm_support import (
    call,
    make_league,
    message,
    player_meta,
    referee_meta,
    register_player,
    register_referee,
)


def test_it_registers_a_player_and_stores_only_the_token_hash(lm_server):
    make_league()
    reply = register_player(lm_server, "alpha")
    assert reply["message_type"] == "LEAGUE_REGISTER_RESPONSE"
    assert reply["status"] == "ACCEPTED" and reply["reason"] is None
    assert reply["player_id"] == "P01" and reply["league_id"] == "test_league"
    player = Player.objects.get(player_id="P01")
    assert player.token_hash == hash_token(reply["auth_token"])
    assert reply["auth_token"] not in str(list(Event.objects.values_list("payload", flat=True)))
    assert len(reply["auth_token"]) >= 22  # at least 128 random bits, url-safe
    assert reply["league_manager_token"] == lm_token("test_league", "P01", player.token_hash)


def test_it_numbers_players_p01_onwards_and_p100_after_p99(lm_server):
    league = make_league()
    for n in range(1, 100):
        Player.objects.create(
            league=league, player_id=f"P{n:02d}", display_name=f"p{n}", endpoint=f"http://10.0.0.1:{n}/mcp"
        )
    assert register_player(lm_server, "late")["player_id"] == "P100"


def test_it_numbers_referees_ref01_onwards(lm_server):
    make_league()
    first = register_referee(lm_server, "r1")
    second = register_referee(lm_server, "r2")
    assert (first["referee_id"], second["referee_id"]) == ("REF01", "REF02")
    assert first["message_type"] == "REFEREE_REGISTER_RESPONSE" and first["status"] == "ACCEPTED"
    referee = Referee.objects.get(referee_id="REF01")
    assert referee.max_concurrent_matches == 2 and referee.token_hash == hash_token(first["auth_token"])


def _rejected(reply: dict, reason: str) -> None:
    assert reply["status"] == "REJECTED", reply
    assert reply["reason"] == reason
    assert reply["player_id"] is None and reply["auth_token"] is None


def test_it_rejects_registration_outside_the_window(lm_server):
    league = make_league()
    League.objects.filter(pk=league.pk).update(registration_closes_at=timezone.now() - timedelta(seconds=1))
    _rejected(register_player(lm_server, "late", league_id="test_league"), "Registration closed")
    not_yet = make_league("not_yet")
    League.objects.filter(pk=not_yet.pk).update(registration_opens_at=timezone.now() + timedelta(hours=1))
    _rejected(register_player(lm_server, "early", league_id="not_yet"), "Registration closed")
    assert not Player.objects.exists()


def test_it_rejects_a_full_league(lm_server):
    make_league(max_players=1)
    assert register_player(lm_server, "one")["status"] == "ACCEPTED"
    _rejected(register_player(lm_server, "two"), "League full")


def test_it_rejects_a_game_type_the_league_does_not_offer(lm_server):
    make_league(game_type="even_odd_bo5")
    _rejected(register_player(lm_server, "alpha"), "Game type not supported")


def test_the_same_registration_again_from_the_endpoints_machine_gets_the_same_identity(lm_server):
    # The reply was lost (or the agent restarted): the same message again, from the machine its
    # endpoint is on, gets the same id and a new token; the first token stays good for
    # registering again until the new one is used.
    make_league()
    meta = player_meta("http://127.0.0.1:9555/mcp")
    first = register_player(lm_server, "one", player_meta=meta)
    again = register_player(lm_server, "one", player_meta=meta)
    assert (again["status"], again["player_id"], again["reason"]) == ("ACCEPTED", first["player_id"], None)
    assert again["auth_token"] and again["auth_token"] != first["auth_token"]
    player = Player.objects.get()
    assert player.token_hash == hash_token(again["auth_token"])
    assert player.previous_token_hash == hash_token(first["auth_token"])
    assert Event.objects.filter(kind="player_registered_again", agent="P01").exists()


def test_a_registration_of_a_taken_endpoint_from_elsewhere_says_whose_it_is_and_what_to_do(lm_server):
    # A classmate who knows the endpoint, on another machine: no token, no seat.
    make_league()
    meta = player_meta("http://127.0.0.1:9556/mcp")
    first = register_player(lm_server, "one", player_meta=meta)
    reg = actions.register_player(None, dict(meta, display_name="thief"), None, client_host="10.1.2.3")
    assert (reg.status, reg.agent_id, reg.auth_token) == ("REJECTED", "P01", None)
    assert reg.reason.startswith("Endpoint already registered: it is player P01's")
    assert "auth_token" in reg.reason and "docs/protocol.md#registering-again" in reg.reason
    assert Player.objects.get().token_hash == hash_token(first["auth_token"])


def test_a_relay_player_registering_again_without_its_token_is_refused_as_a_known_endpoint_is(lm_server):
    # The reply to a "connect" registration was lost: the player asks again under the same name,
    # with no token. A player with an endpoint of its own is refused (the endpoint is taken); a
    # relay player, whose endpoint the LM makes anew each time, is refused by its name.
    make_league()
    meta = player_meta("connect", display_name="rae")
    first = register_player(lm_server, "rae", player_meta=meta)
    assert first["status"] == "ACCEPTED"
    _rejected(register_player(lm_server, "rae", player_meta=meta), actions.RELAY_NAME_TAKEN)
    assert list(Player.objects.values_list("player_id", "display_name")) == [("P01", "rae")]
    # Another name is another player; with its token the first registers again (token rotated).
    assert register_player(lm_server, "sam", player_meta=dict(meta, display_name="sam"))["status"] == "ACCEPTED"
    again = register_player(lm_server, "rae", player_meta=meta, auth_token=first["auth_token"])
    assert again["status"] == "ACCEPTED" and again["player_id"] == "P01"
    # Once removed, the name is free for a fresh registration.
    Player.objects.filter(player_id="P01").update(status="REMOVED")
    assert register_player(lm_server, "rae", player_meta=meta)["player_id"] == "P03"


def test_it_updates_the_endpoint_when_the_player_presents_its_token(lm_server):
    make_league()
    first = register_player(lm_server, "one", player_meta=player_meta("http://127.0.0.1:9556/mcp"))
    again = register_player(
        lm_server, "one", player_meta=player_meta("http://127.0.0.1:9557/mcp"), auth_token=first["auth_token"]
    )
    assert again["status"] == "ACCEPTED" and again["player_id"] == "P01"
    assert again["auth_token"] != first["auth_token"]  # rotated: the reply carries the new token
    player = Player.objects.get(player_id="P01")
    assert player.endpoint == "http://127.0.0.1:9557/mcp" and player.token_hash == hash_token(again["auth_token"])
    assert Player.objects.count() == 1


@pytest.mark.parametrize(
    ("endpoint", "reason"),
    [
        ("ftp://127.0.0.1:9101/mcp", "Endpoint must be an http:// or https:// URL"),
        ("http://169.254.169.254/latest", "Endpoint address 169.254.169.254 is link-local or a metadata service"),
        ("http://169.254.10.1:80/mcp", "Endpoint address 169.254.10.1 is link-local or a metadata service"),
        ("http://8.8.8.8:80/mcp", "Endpoint address 8.8.8.8 is outside the league's allowed networks"),
        ("http://no-such-host.invalid/mcp", "Endpoint host no-such-host.invalid does not resolve"),
    ],
)
def test_it_rejects_endpoints_outside_the_policy(lm_server, endpoint, reason):
    make_league()
    _rejected(register_player(lm_server, "x", player_meta=player_meta(endpoint)), reason)


def test_it_accepts_an_endpoint_in_a_network_the_admin_allowed(lm_server):
    make_league(allowed_networks="127.0.0.0/8,203.0.113.0/24")
    assert register_player(lm_server, "x", player_meta=player_meta("http://203.0.113.7:80/mcp"))["status"] == "ACCEPTED"


@pytest.mark.parametrize("version", ["1.9.9", "1.0", "0.1.0"])
def test_it_answers_e018_to_protocol_versions_below_2(lm_server, version):
    make_league()
    reply = register_player(lm_server, "old", player_meta=player_meta(protocol_version=version))
    assert reply["message_type"] == "LEAGUE_ERROR" and reply["error_code"] == "E018"
    assert reply["error_name"] == "PROTOCOL_VERSION_MISMATCH" and "2.0.0" in reply["error_description"]


def test_it_answers_e008_when_no_league_or_several_are_open(lm_server):
    reply = register_player(lm_server, "alpha")
    assert reply["error_code"] == "E008" and "no league is open" in reply["error_description"]
    make_league("one")
    make_league("two")
    reply = register_player(lm_server, "alpha")
    assert reply["error_code"] == "E008" and reply["context"]["leagues"] == ["one", "two"]
    assert register_player(lm_server, "alpha", league_id="two")["league_id"] == "two"
    reply = register_player(lm_server, "alpha", league_id="nope")
    assert reply["error_code"] == "E008" and "'nope'" in reply["error_description"]


def test_it_answers_e003_for_a_missing_field_and_e021_for_a_local_timestamp(lm_server):
    make_league()
    meta = player_meta()
    del meta["contact_endpoint"]
    reply = register_player(lm_server, "alpha", player_meta=meta)
    assert reply["error_code"] == "E003" and reply["context"]["missing_fields"] == ["player_meta.contact_endpoint"]
    request = message("LEAGUE_REGISTER_REQUEST", "player:alpha", player_meta=player_meta())
    request["timestamp"] = "2025-01-15T12:30:00+02:00"
    reply = call(lm_server, "register_player", request)
    assert reply["error_code"] == "E021" and reply["error_name"] == "INVALID_TIMESTAMP"
    request["timestamp"] = "2025-01-15T10:30:00+00:00"
    assert call(lm_server, "register_player", request)["status"] == "ACCEPTED"


def test_it_lets_referees_join_a_running_league(lm_server):
    league = make_league()
    League.objects.filter(pk=league.pk).update(status=League.Status.RUNNING)
    assert register_referee(lm_server, "helper")["status"] == "ACCEPTED"
    _rejected(register_player(lm_server, "late", league_id="test_league"), "Registration closed")


def test_it_rejects_referee_registration_in_a_finished_league(lm_server):
    league = make_league()
    League.objects.filter(pk=league.pk).update(status=League.Status.COMPLETED)
    reply = register_referee(lm_server, "ref", league_id="test_league")
    assert reply["status"] == "REJECTED" and reply["reason"] == "Registration closed" and reply["referee_id"] is None


def test_it_rejects_a_referee_with_an_endpoint_outside_the_policy(lm_server):
    make_league()
    reply = register_referee(lm_server, "ref", referee_meta=referee_meta("http://169.254.0.9:80/mcp"))
    assert reply["status"] == "REJECTED" and "link-local" in reply["reason"]


def test_it_logs_each_received_and_sent_message_without_tokens(lm_server):
    make_league()
    reply = register_player(lm_server, "alpha")
    rows = list(Event.objects.filter(direction__in=["IN", "OUT"]).order_by("id"))
    assert [(e.direction, e.kind) for e in rows] == [
        ("IN", "LEAGUE_REGISTER_REQUEST"),
        ("OUT", "LEAGUE_REGISTER_RESPONSE"),
    ]
    assert rows[1].agent == "player:P01" and rows[1].payload["player_id"] == "P01"
    assert "auth_token" not in rows[1].payload and "league_manager_token" not in rows[1].payload
    assert reply["auth_token"]
    assert {e.league_id for e in rows} == {League.objects.get(league_id="test_league").pk}


def test_a_refused_registration_is_logged_and_writes_nothing_else(lm_server):
    make_league()
    request = message("REFEREE_REGISTER_REQUEST", "player:sneaky", referee_meta=referee_meta(display_name="x"))
    reply = call(lm_server, "register_referee", request)
    assert reply["message_type"] == "LEAGUE_ERROR" and reply["error_code"] == "E012"
    assert not Referee.objects.exists()
    rows = list(Event.objects.filter(direction__in=["IN", "OUT"]).order_by("id"))
    assert [(e.direction, e.kind) for e in rows] == [("IN", "REFEREE_REGISTER_REQUEST"), ("OUT", "LEAGUE_ERROR")]
    assert not Event.objects.filter(kind="referee_registered").exists()


def test_a_rejected_registration_is_logged_against_its_league(lm_server):
    league = make_league(max_players=1)
    register_player(lm_server, "alpha")
    reply = register_player(lm_server, "beta")
    assert reply["status"] == "REJECTED"
    rows = list(Event.objects.filter(direction="OUT", kind="LEAGUE_REGISTER_RESPONSE").order_by("id"))
    assert [e.payload["status"] for e in rows] == ["ACCEPTED", "REJECTED"]
    assert {e.league_id for e in rows} == {league.pk}
