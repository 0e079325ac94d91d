"""league_query (four query types), get_standings and the LM's resources."""

from __future__ import annotations

import json

from tests.league.lm_support import (
    assigned_match,
    call,
    make_league,
    message,
    register_player,
    register_referee,
    rpc,
    win_report,
)


def _league_with_a_result(lm_server):
    league = make_league()
    ref = register_referee(lm_server, "ref1")
    players = [register_player(lm_server, name) for name in ("alpha", "beta", "gamma", "delta")]
    assigned_match(league, a="P01", b="P02", match_id="R1M1")
    assigned_match(league, a="P03", b="P04", match_id="R1M2")
    call(lm_server, "report_match_result", win_report(ref))
    return league, ref, players


def _query(url: str, who: dict, sender: str, query_type: str, **params) -> dict:
    request = message("LEAGUE_QUERY", sender, auth_token=who["auth_token"], query_type=query_type, query_params=params)
    reply = call(url, "league_query", request)
    assert reply["message_type"] == "LEAGUE_QUERY_RESPONSE" and reply["success"] is True, reply
    assert reply["query_type"] == query_type.upper() and reply["conversation_id"] == request["conversation_id"]
    return reply["data"]


def test_it_answers_all_four_query_types(lm_server):
    _, ref, players = _league_with_a_result(lm_server)
    p1, p3 = players[0], players[2]

    standings = _query(lm_server, p1, "player:P01", "GET_STANDINGS")["standings"]
    assert [(r["player_id"], r["points"]) for r in standings][:1] == [("P01", 3)]
    assert standings[0]["display_name"] == "alpha" and len(standings) == 4
    assert set(standings[0]) == {
        "rank", "player_id", "display_name", "played", "wins", "draws", "losses", "technical_losses", "points"
    }  # fmt: skip

    rounds = _query(lm_server, p1, "player:P01", "GET_SCHEDULE")["rounds"]
    assert [m["match_id"] for m in rounds[0]["matches"]] == ["R1M1", "R1M2"]
    assert rounds[0]["matches"][0]["status"] == "FINISHED" and rounds[0]["matches"][0]["result"]["winner"] == "P01"
    assert _query(lm_server, p1, "player:P01", "GET_SCHEDULE", round_id=2)["rounds"] == []

    nxt = _query(lm_server, p3, "player:P03", "get_next_match")  # query types are read case-insensitively
    assert nxt["next_match"]["match_id"] == "R1M2" and nxt["next_match"]["opponent_id"] == "P04"
    assert nxt["next_match"]["referee_endpoint"].endswith("/mcp")
    assert _query(lm_server, p1, "player:P01", "GET_NEXT_MATCH")["next_match"] is None

    stats = _query(lm_server, p1, "player:P01", "GET_PLAYER_STATS")
    assert (stats["player_id"], stats["wins"], stats["points"], stats["rank"]) == ("P01", 1, 3, 1)
    assert stats["choices"] == {"even": 1, "odd": 0} and stats["history"][0]["opponent_id"] == "P02"

    # A referee may ask about any player, and must name one.
    assert _query(lm_server, ref, "referee:REF01", "GET_PLAYER_STATS", player_id="P02")["losses"] == 1
    request = message("LEAGUE_QUERY", "referee:REF01", auth_token=ref["auth_token"], query_type="GET_NEXT_MATCH")
    assert call(lm_server, "league_query", request)["error_code"] == "E003"
    request["query_params"] = {"player_id": "P77"}
    assert call(lm_server, "league_query", request)["error_code"] == "E005"


def test_it_answers_an_unknown_query_type_with_e002(lm_server):
    make_league()
    p1 = register_player(lm_server, "alpha")
    request = message("LEAGUE_QUERY", "player:P01", auth_token=p1["auth_token"], query_type="GET_WEATHER")
    reply = call(lm_server, "handle_league_query", request)
    assert reply["error_code"] == "E002" and "query_type" in reply["error_description"]


def test_get_standings_needs_no_envelope_or_token(lm_server):
    _league_with_a_result(lm_server)
    reply = call(lm_server, "get_standings", {"league_id": "test_league"})
    assert reply["message_type"] == "LEAGUE_STANDINGS" and reply["standings"][0]["player_id"] == "P01"
    assert call(lm_server, "get_standings", {})["league_id"] == "test_league"
    assert call(lm_server, "get_standings", {"league_id": "nope"})["error_code"] == "E008"


def test_it_serves_standings_schedule_and_match_state_resources(lm_server):
    _league_with_a_result(lm_server)
    listed = rpc(lm_server, "resources/list", {})["result"]["resources"]
    assert {r["uri"] for r in listed} == {"league://standings", "league://schedule"}
    templates = rpc(lm_server, "resources/templates/list", {})["result"]["resourceTemplates"]
    assert "game://state/{match_id}" in {t["uriTemplate"] for t in templates}

    def read(uri: str) -> dict:
        contents = rpc(lm_server, "resources/read", {"uri": uri})["result"]["contents"]
        assert contents[0]["uri"] == uri and contents[0]["mimeType"] == "application/json"
        return json.loads(contents[0]["text"])

    assert read("league://standings")["standings"][0]["points"] == 3
    assert read("league://test_league/standings")["league_id"] == "test_league"
    assert read("league://schedule")["rounds"][0]["round_id"] == 1
    state = read("game://state/R1M1")
    assert state["status"] == "FINISHED" and state["result"]["details"]["drawn_number"] == 8
    assert read("game://state/test_league/R1M2")["status"] == "ASSIGNED"
    missing = rpc(lm_server, "resources/read", {"uri": "game://state/R9M9"})
    assert missing["error"]["code"] == -32002


def test_get_match_assignment_tells_a_player_of_the_match_the_hash_of_its_token(lm_server):
    import hashlib

    from league.conductor.common import match_token
    from league.models import Match
    from leagueproto.matchtoken import player_token

    league, ref, players = _league_with_a_result(lm_server)
    p3, p1 = players[2], players[0]
    data = _query(lm_server, p3, "player:P03", "GET_MATCH_ASSIGNMENT", match_id="R1M2")
    match = Match.objects.get(league=league, match_id="R1M2")
    # The hash of P03's own token for the match, the one its referee sends it (not the match token).
    token = player_token(match_token(league.league_id, "R1M2", match.attempt), "P03")
    assert data == {
        "match_id": "R1M2",
        "round_id": 1,
        "status": "ASSIGNED",
        "referee_id": "REF01",
        "referee_endpoint": match.referee.endpoint,
        "match_token_sha256": hashlib.sha256(token.encode()).hexdigest(),
    }
    # Given back to the schedule, the match has no token any referee may show.
    Match.objects.filter(pk=match.pk).update(status=Match.Status.SCHEDULED, referee=None)
    data = _query(lm_server, p3, "player:P03", "GET_MATCH_ASSIGNMENT", match_id="R1M2")
    assert data["match_token_sha256"] is None and data["referee_id"] is None

    # Another player's match, a missing match_id, a referee: refused.
    for who, sender, params, code in (
        (p1, "player:P01", {"match_id": "R1M2"}, "E012"),
        (p1, "player:P01", {}, "E003"),
        (ref, "referee:REF01", {"match_id": "R1M2"}, "E012"),
    ):
        request = message(
            "LEAGUE_QUERY", sender, auth_token=who["auth_token"], query_type="GET_MATCH_ASSIGNMENT", query_params=params
        )
        assert call(lm_server, "league_query", request)["error_code"] == code
