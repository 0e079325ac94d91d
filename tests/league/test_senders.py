"""league/senders.py: which answers refuse our sender (then the other printed spelling is tried)."""

from __future__ import annotations

from league.senders import ALTERNATE, DEFAULT, refuses_sender, sender_for
from leagueproto.client import CallFailed
from leagueproto.errors import ErrorCode


def test_an_error_naming_the_sender_refuses_it():
    assert refuses_sender(
        {"message_type": "LEAGUE_ERROR", "error_code": "E002", "error_description": "Sender not registered"}
    )
    assert refuses_sender({"error": "unknown sender league_manager"})
    failure = CallFailed(ErrorCode.INVALID_MESSAGE_FORMAT, "rpc", rpc_error={"code": -32602, "message": "bad sender"})
    assert refuses_sender(None, failure)


def test_other_answers_do_not():
    assert not refuses_sender({"message_type": "ACK", "status": "received"})
    assert not refuses_sender({"message_type": "LEAGUE_ERROR", "error_code": "E012", "error_description": "bad token"})
    assert not refuses_sender(None, CallFailed(ErrorCode.TIMEOUT_ERROR, "timed out"))


def test_the_default_is_the_courses_spelling():
    assert sender_for("") == DEFAULT == "league_manager" and sender_for(ALTERNATE) == "league_manager:LM01"
