"""The course's registration, exactly as chapter 8 prints it, over real HTTP: accepted, and what
it left out is recorded as such (protocol_version unknown, the league's game); later calls are
recorded under the agent the token proves, whatever the sender's spelling."""

from __future__ import annotations

import httpx

from league.models import Event, Player
from tests.compat.conftest import LEAGUE_ID, league_manager, load_cases


def course_registration() -> dict:
    (case,) = [case for case in load_cases("lm") if case["name"] == "course registration as printed"]
    return case["request"]


def test_the_course_registration_is_accepted_and_recorded_as_sent(lm_server):
    agent = league_manager(lm_server, {})
    request = agent.fill(course_registration())
    assert set(request["params"]) == {
        "protocol",
        "message_type",
        "sender",
        "timestamp",
        "conversation_id",
        "player_meta",
    }
    assert set(request["params"]["player_meta"]) == {"display_name", "version", "game_types", "contact_endpoint"}
    reply = httpx.post(lm_server, json=request, timeout=10).json()["result"]
    assert (reply["status"], reply["player_id"], reply["league_id"]) == ("ACCEPTED", "P01", LEAGUE_ID)
    assert reply["auth_token"] and reply["league_manager_token"]
    player = Player.objects.get()
    assert (player.display_name, player.protocol_version) == ("Agent Alpha", "unknown")
    assert player.game_types == ["even_odd"]
    assert Event.objects.filter(kind="player_registered", agent="P01").exists()


def test_a_registration_without_game_types_plays_the_league_s_game(lm_server):
    agent = league_manager(lm_server, {})
    request = agent.fill(course_registration())
    del request["params"]["player_meta"]["game_types"]
    request["params"]["player_meta"]["protocol_version"] = "2.1.0"
    assert httpx.post(lm_server, json=request, timeout=10).json()["result"]["status"] == "ACCEPTED"
    player = Player.objects.get()
    assert (player.game_types, player.protocol_version) == (["even_odd"], "2.1.0")


def test_a_call_is_logged_under_the_agent_its_token_proves(lm_server):
    agent = league_manager(lm_server, {"players": ["alpha", "beta"]})
    query = {
        "protocol": "league.v2",
        "message_type": "LEAGUE_QUERY",
        "sender": "player:alpha",  # its name, kept after registration
        "conversation_id": "conv-logged",
        "auth_token": agent.tokens["P01"],
        "query_type": "GET_STANDINGS",
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "league_query", "params": query}
    assert httpx.post(lm_server, json=body, timeout=10).json()["result"]["success"] is True
    logged = Event.objects.filter(kind="LEAGUE_QUERY", direction="IN").get()
    assert logged.agent == "player:P01" and logged.payload["sender"] == "player:alpha"


def test_the_course_registration_sent_twice_gets_the_same_identity_never_nulls(lm_server):
    # A course agent that got no reply (or did not accept it) sends the very same message again.
    agent = league_manager(lm_server, {})
    request = agent.fill(course_registration())
    first = httpx.post(lm_server, json=request, timeout=10).json()["result"]
    again = httpx.post(lm_server, json=request, timeout=10).json()["result"]
    assert (first["status"], first["player_id"]) == ("ACCEPTED", "P01")
    assert (again["status"], again["player_id"], again["reason"]) == ("ACCEPTED", "P01", None)
    assert again["auth_token"] and again["league_manager_token"] and again["league_id"] == LEAGUE_ID
    assert Player.objects.count() == 1
