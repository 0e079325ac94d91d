"""A match is private while it is played: the referee's read tools answer only the League Manager
that registered it, and even the LM never sees the answers of a turn still open, nor a player's
endpoint. A referee not yet registered runs nothing for anyone."""

from __future__ import annotations

import threading

import httpx
import pytest

from leagueproto.envelope import make_message
from leagueproto.matchtoken import player_token
from referee.games import get_game
from referee.runner import COLLECTING_CHOICES, MatchLog, MatchResult, MatchRunner, MatchSpec, Seat
from tests.referee.conftest import FAST_TIMEOUTS, rpc, run_referee, start_match_message
from tests.referee.scripted import ScriptedLM, ScriptedPlayer
from tests.support.waiting import wait_until

LM_QUERY = {"match_id": "R1M1", "league_id": "league_test", "auth_token": ScriptedLM.LM_TOKEN}


def entries(state: dict) -> list[tuple[str, str | None, str | None]]:
    return [(e["direction"], e["peer"], e["message_type"]) for e in state["match_log"]]


def test_the_log_shows_a_turn_only_once_it_is_resolved():
    spec = MatchSpec("L", 1, "R1M1", "even_odd_bo5", Seat("P01", "http://a/mcp"), Seat("P02", "http://b/mcp"))
    runner = MatchRunner(spec, get_game("even_odd_bo5"), client=None, sender="referee:REF01")  # type: ignore[arg-type]
    log: MatchLog = runner.log
    log.event("WAITING_FOR_PLAYERS")
    log.add("OUT", "P01", message_type="GAME_INVITATION")
    log.add("IN", "P01", message_type="GAME_JOIN_ACK")
    assert runner.resolved_log() == log.entries  # no turn open yet
    log.event(COLLECTING_CHOICES)
    log.add("OUT", "P01", message_type="MOVE_REQUEST")
    log.add("IN", "P01", message_type="MOVE_RESPONSE", message={"move": {"number": 2}})
    log.event("STRAY_ANSWER")
    assert runner.resolved_log() == log.entries[:4]  # up to the turn's start: its answers are hidden
    log.event("RESOLVED")
    log.add("OUT", "P01", message_type="ROUND_RESULT")
    assert runner.resolved_log() == log.entries  # resolved: shown
    log.event(COLLECTING_CHOICES)
    log.add("IN", "P02", message_type="MOVE_RESPONSE")
    assert runner.resolved_log() == log.entries[:-1]
    runner.result = MatchResult("WIN", "P01", {"P01": 3, "P02": 0}, [], {})
    assert runner.resolved_log() == log.entries  # a finished match shows everything


def test_the_lm_sees_a_turn_once_it_is_resolved_and_never_an_endpoint(referee, lm, players):
    scripted_lm, _ = lm
    gate = threading.Event()
    a, url_a = players(ScriptedPlayer("P01", moves=[2]))
    b, url_b = players(ScriptedPlayer("P02", moves=[1], move_gate=gate))
    timeouts = {**FAST_TIMEOUTS, "move": 30.0}
    reply = rpc(
        referee.url, "start_match", start_match_message(url_a, url_b, game_type="even_odd_bo5", timeouts=timeouts)
    )
    assert reply["status"] == "ACCEPTED"
    runner = referee.referee.matches["league_test:R1M1"]
    # P01 has answered round 1 (the referee holds its move); P02 is still thinking.
    wait_until(lambda: any(e["direction"] == "IN" and e["message_type"] == "MOVE_RESPONSE" for e in runner.log.entries))
    state = rpc(referee.url, "get_match_state", LM_QUERY)
    assert state["state"] == COLLECTING_CHOICES
    assert ("IN", "P01", "MOVE_RESPONSE") not in entries(state)
    assert ("OUT", "P01", "MOVE_REQUEST") not in entries(state)  # nothing of the open turn
    assert entries(state)[-1] == ("EVENT", None, COLLECTING_CHOICES)
    assert state["game"]["rounds"] == [] and state["result"] is None
    assert url_a not in str(state) and url_b not in str(state)

    gate.set()
    scripted_lm.received.wait_for("acknowledged")
    state = rpc(referee.url, "get_match_state", LM_QUERY)
    moves = [e for e in state["match_log"] if e["direction"] == "IN" and e["message_type"] == "MOVE_RESPONSE"]
    assert len(moves) == 6  # three rounds, both players: every one resolved, every one shown
    assert url_a not in str(state) and url_b not in str(state)


def test_only_the_registering_lm_may_read_a_match(referee, players):
    _, url_a = players(ScriptedPlayer("P01"))
    _, url_b = players(ScriptedPlayer("P02"))
    rpc(referee.url, "start_match", start_match_message(url_a, url_b))
    query = {"match_id": "R1M1", "league_id": "league_test"}
    assert rpc(referee.url, "get_match_state", query)["error_code"] == "E011"
    # A player's tokens prove nothing here: its match token (as a field or a bearer), or another.
    mine = player_token("match-token-R1M1", "P01")
    assert rpc(referee.url, "get_match_state", {**query, "auth_token": mine})["error_code"] == "E012"
    assert rpc(referee.url, "get_match_state", {**query, "auth_token": "match-token-R1M1"})["error_code"] == "E012"
    body = {"jsonrpc": "2.0", "id": 1, "method": "get_match_state", "params": query}
    bearer = {"Authorization": f"Bearer {mine}"}
    assert httpx.post(referee.url, json=body, headers=bearer, timeout=5).json()["result"]["error_code"] == "E012"
    # Nor is it told whether a match exists.
    assert rpc(referee.url, "get_match_state", {"match_id": "R9M9"})["error_code"] == "E011"
    assert rpc(referee.url, "get_match_state", {**LM_QUERY, "match_id": "R9M9"})["error_code"] == "E006"


def test_a_strangers_stray_answer_is_refused_without_writing_in_the_match_log(referee, lm, players):
    gate = threading.Event()
    _, url_a = players(ScriptedPlayer("P01", move_gate=gate))
    _, url_b = players(ScriptedPlayer("P02"))
    rpc(referee.url, "start_match", start_match_message(url_a, url_b, timeouts={**FAST_TIMEOUTS, "move": 30.0}))
    runner = referee.referee.matches["league_test:R1M1"]

    def stray(token: str | None) -> dict:
        answer = make_message(
            "CHOOSE_PARITY_RESPONSE", "player:P02", auth_token=token, league_id="league_test", match_id="R1M1"
        )
        return rpc(referee.url, "choose_parity_response", {**answer, "parity_choice": "odd"})

    for token in (None, "a-guess", "match-token-R1M1"):  # the match token itself is no player's
        assert stray(token)["error_code"] == "E002"
    assert not [e for e in runner.log.entries if e["message_type"] == "STRAY_ANSWER"]
    for _ in range(15):  # a player's own token for the match: noted, a bounded number of times
        assert stray(player_token("match-token-R1M1", "P02"))["error_code"] == "E002"
    assert len([e for e in runner.log.entries if e["message_type"] == "STRAY_ANSWER"]) == 10
    gate.set()


@pytest.mark.parametrize("method", ["start_match", "run_match", "get_match_state", "notify_round"])
def test_a_referee_not_yet_registered_runs_nothing_for_anyone(method, players):
    a, url_a = players(ScriptedPlayer("P01"))
    b, url_b = players(ScriptedPlayer("P02"))
    nowhere = "http://127.0.0.1:9/mcp"  # its LM does not answer: it stays unregistered
    with run_referee(league_url=nowhere) as running:
        if method == "run_match":
            params = {"match_id": "M1", "player1": {"endpoint": url_a}, "player2": {"endpoint": url_b}}
        elif method == "notify_round":
            params = make_message("ROUND_ANNOUNCEMENT", "league_manager", league_id="league_test", round_id=1)
        elif method == "get_match_state":
            params = {"match_id": "R1M1", "league_id": "league_test"}
        else:
            params = start_match_message(url_a, url_b)
        for auth in (None, ScriptedLM.LM_TOKEN):  # whatever it is shown
            reply = rpc(running.url, method, {**params, "auth_token": auth} if auth else params)
            assert (reply["message_type"], reply["error_code"]) == ("GAME_ERROR", "E013")
            assert "not registered" in reply["error_description"]
        assert running.referee.matches == {}
    assert not a.received.of("handle_game_invitation") and not b.received.of("handle_game_invitation")
