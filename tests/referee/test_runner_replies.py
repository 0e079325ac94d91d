"""A reply of the wrong message_type, or one claiming to come from an agent that is no player, is an
invalid answer: refused with GAME_ERROR (E002 / E012), asked again up to max_invalid_moves, then a
loss. A reply from the player's endpoint that calls the player by another id is the player's."""

from __future__ import annotations

import pytest

from referee.runner import reply_problem
from tests.referee.conftest import ROOMY_TIMEOUTS
from tests.referee.scripted import ScriptedPlayer
from tests.referee.test_runner import play

WRONG_TYPE = {"message_type": "GAME_JOIN_ACK"}
IMPOSTOR = {"sender": "referee:REF01"}
SELF_NAMED = {"player_id": "P02", "sender": "player:P02"}  # a fixed id from the agent's own configuration


@pytest.mark.parametrize(
    ("edit", "code"),
    [(WRONG_TYPE, "E002"), (IMPOSTOR, "E012"), ({"sender": "league_manager"}, "E012")],
    ids=["wrong-type", "claims-to-be-the-referee", "claims-to-be-the-lm"],
)
def test_it_gives_a_technical_loss_after_four_refused_choices(referee, lm, players, edit, code):
    a, url_a = players(ScriptedPlayer("P01", choices=["even"], edits={"choose_parity": [edit]}))
    b, url_b = players(ScriptedPlayer("P02", choices=["odd"]))
    # Replies in time even on a loaded machine: a call that timed out would be sent again, a fifth
    # choose_parity this test does not count on.
    report = play(referee, lm, url_a, url_b, timeouts=ROOMY_TIMEOUTS)
    result = report["result"]
    assert (result["status"], result["winner"], result["technical_loss"]) == ("TECHNICAL_LOSS", "P02", ["P01"])
    assert result["score"] == {"P01": 0, "P02": 3}
    assert "4 invalid answers" in result["details"]["reason"] and "P01" not in result["details"]["choices"]
    assert len(a.received.of("choose_parity")) == 4
    errors = a.received.wait_for("notify_game_error", 4)
    assert [e["error_code"] for e in errors] == [code] * 4
    assert [e["retry_count"] for e in errors] == [1, 2, 3, 4] and errors[-1]["consequence"] == "technical loss"
    assert b.received.of("notify_game_error") == []  # the impersonated player is not told off
    invalid = [e for e in report["match_log"] if e["direction"] == "IN" and e["outcome"] == "invalid"]
    assert len(invalid) == 4 and {e["peer"] for e in invalid} == {"P01"}


def test_it_accepts_a_valid_choice_after_a_wrong_type_and_an_impostor_reply(referee, lm, players):
    edits = {"choose_parity": [WRONG_TYPE, IMPOSTOR, {}]}
    a, url_a = players(ScriptedPlayer("P01", choices=["even"], edits=edits))
    _, url_b = players(ScriptedPlayer("P02", choices=["odd"]))
    result = play(referee, lm, url_a, url_b)["result"]
    assert result["status"] == "WIN" and result["technical_loss"] == []
    assert result["details"]["choices"] == {"P01": "even", "P02": "odd"}
    assert result["winner"] == ("P01" if result["details"]["drawn_number"] % 2 == 0 else "P02")
    assert [e["error_code"] for e in a.received.of("notify_game_error")] == ["E002", "E012"]


def test_it_refuses_a_join_ack_of_the_wrong_type_and_invites_again(referee, lm, players):
    edits = {"handle_game_invitation": [{"message_type": "CHOOSE_PARITY_RESPONSE"}, {}]}
    a, url_a = players(ScriptedPlayer("P01", choices=["odd"], edits=edits))
    _, url_b = players(ScriptedPlayer("P02", choices=["odd"]))
    result = play(referee, lm, url_a, url_b)["result"]
    assert (result["status"], result["technical_loss"]) == ("DRAW", [])
    assert len(a.received.of("handle_game_invitation")) == 2
    (error,) = a.received.of("notify_game_error")
    assert error["error_code"] == "E002" and "GAME_JOIN_ACK" in error["action_required"]


def test_a_player_that_calls_itself_by_another_id_plays_its_match(referee, lm, players):
    # A course agent with a fixed id P02 in its configuration, registered as P01: every reply it
    # sends names P02 (its opponent's id here), from its own endpoint. It is P01 and plays as P01.
    edits = {"handle_game_invitation": [SELF_NAMED], "choose_parity": [SELF_NAMED]}
    a, url_a = players(ScriptedPlayer("P01", choices=["even"], edits=edits))
    b, url_b = players(ScriptedPlayer("P02", choices=["even"]))
    result = play(referee, lm, url_a, url_b)["result"]
    assert (result["status"], result["technical_loss"]) == ("DRAW", [])
    assert result["details"]["choices"] == {"P01": "even", "P02": "even"}
    assert a.received.of("notify_game_error") == [] and b.received.of("notify_game_error") == []


def test_it_refuses_bo5_moves_of_the_wrong_type(referee, lm, players):
    _, url_a = players(ScriptedPlayer("P01", moves=[1], edits={"make_move": [{"message_type": "ACK"}]}))
    _, url_b = players(ScriptedPlayer("P02", moves=[2]))
    result = play(referee, lm, url_a, url_b, game_type="even_odd_bo5")["result"]
    assert (result["status"], result["winner"], result["technical_loss"]) == ("TECHNICAL_LOSS", "P02", ["P01"])
    assert "MOVE_RESPONSE" in result["details"]["reason"]


@pytest.mark.parametrize(
    "reply",
    [
        {"message_type": "CHOOSE_PARITY_RESPONSE", "player_id": "P01", "sender": "player:P01"},
        {"parity_choice": "even"},  # envelope fields left out: the game's rules judge the move
        {"message_type": "CHOOSE_PARITY_RESPONSE", "sender": "player:Alice"},  # the pre-registration name form
        {"message_type": "CHOOSE_PARITY_RESPONSE", "player_id": "P07", "sender": "player:P07"},  # its own fixed id
    ],
)
def test_it_accepts_replies_from_the_players_endpoint_whatever_id_they_name(reply):
    assert reply_problem("P01", "CHOOSE_PARITY_CALL", reply) is None


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        ({"message_type": "MOVE_RESPONSE"}, "E002"),
        ({"sender": "referee:REF01"}, "E012"),
        ({"sender": "league_manager"}, "E012"),
    ],
)
def test_it_names_what_is_wrong_with_a_reply(reply, code):
    problem = reply_problem("P01", "CHOOSE_PARITY_CALL", reply)
    assert problem is not None and problem.code.value == code
