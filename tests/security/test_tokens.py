"""Tokens: rotated on re-registration, revocable at once (command and admin), bound to one agent
and league, and the LM's /mcp offers no admin tool to anyone."""

from __future__ import annotations

import asyncio

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse

from league.models import Event, Player, Referee
from leagueproto.client import AgentClient
from players.agent import Player as PlayerAgent
from players.agent import PlayerConfig
from tests.league.lm_support import (
    assigned_match,
    call,
    make_league,
    message,
    player_meta,
    register_player,
    register_referee,
    rpc,
    win_report,
)


def _query(sender: str, token: str) -> dict:
    return message("LEAGUE_QUERY", sender, auth_token=token, query_type="GET_STANDINGS")


def test_re_registering_rotates_the_token_and_the_old_one_stops_working(lm_server):
    make_league()
    first = register_player(lm_server, "alpha", player_meta=player_meta("http://127.0.0.1:9601/mcp"))
    again = register_player(
        lm_server, "P01", player_meta=player_meta("http://127.0.0.1:9602/mcp"), auth_token=first["auth_token"]
    )
    assert again["status"] == "ACCEPTED" and again["player_id"] == "P01"
    assert again["auth_token"] != first["auth_token"]
    assert again["league_manager_token"] != first["league_manager_token"]
    assert call(lm_server, "league_query", _query("player:P01", first["auth_token"]))["error_code"] == "E012"
    assert call(lm_server, "league_query", _query("player:P01", again["auth_token"]))["success"] is True
    # The old token cannot register again either: it names no agent any more.
    stale = register_player(
        lm_server, "P01", player_meta=player_meta("http://127.0.0.1:9602/mcp"), auth_token=first["auth_token"]
    )
    assert stale["status"] == "REJECTED" and Player.objects.count() == 1


def test_a_referees_token_rotates_too(lm_server):
    make_league()
    first = register_referee(lm_server, "ref")
    meta = {"display_name": "ref", "game_types": ["even_odd"], "contact_endpoint": "http://127.0.0.1:9611/mcp"}
    again = register_referee(lm_server, "REF01", referee_meta=meta, auth_token=first["auth_token"])
    assert again["referee_id"] == "REF01" and again["auth_token"] != first["auth_token"]
    register_player(lm_server, "a")
    register_player(lm_server, "b")
    assigned_match(Player.objects.first().league)
    assert call(lm_server, "report_match_result", win_report(first))["error_code"] == "E012"
    assert call(lm_server, "report_match_result", win_report(again))["status"] == "RECORDED"


def test_the_player_agent_keeps_the_rotated_token(lm_server):
    make_league()
    agent = PlayerAgent(PlayerConfig(name="Rotor", league_url=lm_server, port=9621, register_backoff=0.01))

    async def register_twice() -> tuple[str | None, str | None]:
        agent.client = AgentClient()
        try:
            assert await agent.register()
            first = agent.token
            assert await agent.register()  # presents its token: the LM rotates it
            return first, agent.token
        finally:
            await agent.client.close()

    first, second = asyncio.run(register_twice())
    assert first and second and first != second
    assert call(lm_server, "league_query", _query(agent.sender, second))["success"] is True
    assert call(lm_server, "league_query", _query(agent.sender, first))["error_code"] == "E012"


def test_revoking_by_command_stops_the_token_at_once(lm_server, capsys):
    make_league()
    p1 = register_player(lm_server, "alpha")
    assert call(lm_server, "league_query", _query("player:P01", p1["auth_token"]))["success"] is True
    call_command("league", "revoke", "test_league", "P01")
    assert "revoked" in capsys.readouterr().out
    reply = call(lm_server, "league_query", _query("player:P01", p1["auth_token"]))
    assert reply["error_code"] == "E012"
    assert Player.objects.get(player_id="P01").status == "SUSPENDED"
    assert Event.objects.filter(kind="agent_revoked", agent="P01").exists()
    # Nor can the revoked token bring the agent back from its endpoint.
    endpoint = Player.objects.get(player_id="P01").endpoint
    again = register_player(lm_server, "P01", player_meta=player_meta(endpoint), auth_token=p1["auth_token"])
    assert again["status"] == "REJECTED" and again["reason"] == "Endpoint already registered"
    assert Player.objects.get(player_id="P01").status == "SUSPENDED"


def test_revoking_a_referee_from_the_admin_stops_its_reports(lm_server, client):
    make_league()
    ref = register_referee(lm_server, "ref")
    register_player(lm_server, "a")
    register_player(lm_server, "b")
    assigned_match(Player.objects.first().league)
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw-for-tests-only"))
    referee = Referee.objects.get(referee_id="REF01")
    client.post(
        reverse("admin:league_referee_changelist"), {"action": "revoke_token", "_selected_action": [referee.pk]}
    )
    assert call(lm_server, "report_match_result", win_report(ref))["error_code"] == "E012"
    referee.refresh_from_db()
    assert referee.status == "SUSPENDED"


def test_a_token_is_valid_only_for_its_own_kind_of_agent(lm_server):
    make_league()
    ref = register_referee(lm_server, "ref")
    p1 = register_player(lm_server, "a")
    register_player(lm_server, "b")
    assigned_match(Player.objects.first().league)
    # The player's token with the referee's sender, and the referee's token with a player's sender.
    forged = win_report(ref) | {"auth_token": p1["auth_token"]}
    assert call(lm_server, "report_match_result", forged)["error_code"] == "E012"
    assert call(lm_server, "league_query", _query("player:P01", ref["auth_token"]))["error_code"] == "E012"
    # A forged token of the right shape is just unknown.
    assert call(lm_server, "report_match_result", win_report(ref) | {"auth_token": "x" * 43})["error_code"] == "E012"


@pytest.mark.parametrize(
    "method",
    ["create_league", "open_registration", "start_league", "revoke_agent", "set_agent_status", "league_export"],
)
def test_no_admin_operation_is_reachable_over_mcp(lm_server, method):
    make_league()
    p1 = register_player(lm_server, "alpha")
    params = message("LEAGUE_QUERY", "player:P01", auth_token=p1["auth_token"], league_id="test_league")
    assert rpc(lm_server, method, params)["error"]["code"] == -32601
    tools = {t["name"] for t in rpc(lm_server, "tools/list", {})["result"]["tools"]}
    assert tools == {
        "register_player",
        "register_referee",
        "report_match_result",
        "league_query",
        "get_standings",
        "list_leagues",
        "ping",
    }
