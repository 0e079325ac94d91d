"""A player that answers asynchronously: it acknowledges the referee's call in its HTTP reply and
"answers" later with a call of its own to the referee. The protocol has no room for that, so the
match goes on without the answer, and everyone is told plainly why: the match log and the
GAME_ERROR the player gets, and the referee's reply to the stray call, which names the rule and
the section of docs/protocol.md to read."""

from __future__ import annotations

import httpx

from leagueproto.envelope import make_message
from leagueproto.matchtoken import player_token
from tests.referee.conftest import FAST_TIMEOUTS, rpc, start_match_message
from tests.referee.scripted import ScriptedLM, ScriptedPlayer

PLAIN = (
    "player P02 answered choose_parity with no parity_choice in its HTTP reply; "
    "answers must be in the reply, not a later call"
)


def test_an_acknowledgement_instead_of_an_answer_is_named_in_the_log_and_the_callback_refused(referee, lm, players):
    scripted_lm, _ = lm
    a, url_a = players(ScriptedPlayer("P01", choices=["even"]))
    # P02 acknowledges (no parity_choice), a little slowly: its callback arrives while the call is open.
    ack_only = {"message_type": "ACK", "status": "received"}
    b = ScriptedPlayer("P02", choices=[ScriptedPlayer.MISSING], move_delay=0.3, edits={"choose_parity": [ack_only]})
    b, url_b = players(b)
    timeouts = {**FAST_TIMEOUTS, "move": 3.0}
    reply = rpc(referee.url, "start_match", start_match_message(url_a, url_b, timeouts=timeouts, max_invalid_moves=1))
    assert reply["status"] == "ACCEPTED"

    # The "answer", sent later as a call of its own to the referee's endpoint.
    b.received.wait_for("choose_parity")
    answer = make_message(
        "CHOOSE_PARITY_RESPONSE",
        "player:P02",
        auth_token=player_token("match-token-R1M1", "P02"),  # its own match token: noted in the log
        league_id="league_test",
        match_id="R1M1",
        parity_choice="odd",
    )
    body = {"jsonrpc": "2.0", "id": 9, "method": "CHOOSE_PARITY_RESPONSE", "params": answer}
    refused = httpx.post(referee.url, json=body, timeout=5).json()["result"]
    assert (refused["message_type"], refused["error_code"]) == ("GAME_ERROR", "E002")
    assert refused["context"]["see"] == "docs/protocol.md#how-a-match-runs"
    assert "answers must be in the HTTP reply to the referee's call" in refused["error_description"]

    (report,) = scripted_lm.received.wait_for("acknowledged")
    result = report["result"]
    assert (result["status"], result["technical_loss"]) == ("TECHNICAL_LOSS", ["P02"])
    assert PLAIN in result["details"]["reason"]
    log = report["match_log"]
    invalid = [e for e in log if e["direction"] == "IN" and e["outcome"] == "invalid"]
    assert [e["problem"] for e in invalid] == [PLAIN, PLAIN]  # asked again once, then the loss
    # The stray call is in the match's log too (the report has it when it came before the end).
    query = {"match_id": "R1M1", "league_id": "league_test", "auth_token": ScriptedLM.LM_TOKEN}
    state = rpc(referee.url, "get_match_state", query)
    (stray,) = [e for e in state["match_log"] if e["message_type"] == "STRAY_ANSWER"]
    assert "player:P02 sent CHOOSE_PARITY_RESPONSE as a call to the referee" in stray["message"]["problem"]
    errors = b.received.wait_for("notify_game_error", 2)
    assert [e["error_code"] for e in errors] == ["E002", "E002"] and PLAIN in errors[0]["error_description"]


def test_a_wrong_answer_is_not_mistaken_for_an_acknowledgement(referee, lm, players):
    """A reply that tries to answer (another field name) is judged by the game's rules, not as async."""
    scripted_lm, _ = lm
    wrong = ScriptedPlayer("P01", choices=[ScriptedPlayer.MISSING], edits={"choose_parity": [{"choice": "even"}]})
    a, url_a = players(wrong)
    b, url_b = players(ScriptedPlayer("P02", choices=["odd"]))
    rpc(referee.url, "start_match", start_match_message(url_a, url_b, max_invalid_moves=0))
    (report,) = scripted_lm.received.wait_for("acknowledged")
    (invalid,) = [e for e in report["match_log"] if e["direction"] == "IN" and e["outcome"] == "invalid"]
    assert invalid["problem"] == "parity_choice is missing"
