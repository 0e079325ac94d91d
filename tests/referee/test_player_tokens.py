"""Each player gets its own token for the match (leagueproto/matchtoken.py), in every message the
referee sends it, and never the match token nor its opponent's; an answer that carries the
opponent's token is not the player's answer (GAME_ERROR E012)."""

from __future__ import annotations

from leagueproto.matchtoken import player_token
from tests.referee.scripted import ScriptedPlayer
from tests.referee.test_runner import play

MATCH_TOKEN = "match-token-R1M1"  # what tests/referee/conftest.py's START_MATCH carries


def test_every_message_to_a_player_carries_its_own_token(referee, lm, players):
    a, url_a = players(ScriptedPlayer("P01", choices=["even"]))
    b, url_b = players(ScriptedPlayer("P02", choices=["odd"]))
    result = play(referee, lm, url_a, url_b)["result"]
    assert result["status"] in ("WIN", "DRAW") and result["technical_loss"] == []
    for player, pid in ((a, "P01"), (b, "P02")):
        player.received.wait_for("notify_match_result")
        tools = ("handle_game_invitation", "notify_game_start", "choose_parity", "notify_match_result")
        sent = [m for tool in tools for m in player.received.of(tool)]
        assert {m["auth_token"] for m in sent} == {player_token(MATCH_TOKEN, pid)}, pid


def test_an_answer_with_the_opponents_token_is_refused(referee, lm, players):
    stolen = {"auth_token": player_token(MATCH_TOKEN, "P02")}
    a, url_a = players(ScriptedPlayer("P01", choices=["even"], edits={"choose_parity": [stolen, {}]}))
    _, url_b = players(ScriptedPlayer("P02", choices=["odd"]))
    result = play(referee, lm, url_a, url_b)["result"]
    assert result["technical_loss"] == [] and result["details"]["choices"] == {"P01": "even", "P02": "odd"}
    (error,) = a.received.of("notify_game_error")
    assert error["error_code"] == "E012" and "auth_token" in error["error_description"]
    assert error["auth_token"] == player_token(MATCH_TOKEN, "P01")
