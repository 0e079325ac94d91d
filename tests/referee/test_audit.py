"""referee/games/audit.py: the reports our referee sends bear out their results (real matches
over HTTP against scripted players), and a log that does not is caught, saying why."""

from __future__ import annotations

import copy

import pytest

from referee.games.audit import log_problem
from tests.referee.conftest import rpc, start_match_message
from tests.referee.scripted import ScriptedPlayer

SCENARIOS = {
    "a win": ("even_odd", {"choices": ["even"]}, {"choices": ["odd"]}),
    "a draw": ("even_odd", {"choices": ["odd"]}, {"choices": ["odd"]}),
    "invalid answers, then a valid one": ("even_odd", {"choices": ["EVEN", 7, "even"]}, {"choices": ["odd"]}),
    "a declined invitation": ("even_odd", {"choices": ["even"]}, {"join": "decline"}),
    "too many invalid answers": ("even_odd", {"choices": ["maybe"]}, {"choices": ["odd"]}),
    "both declining": ("even_odd", {"join": "decline"}, {"join": "decline"}),
    "best of five": ("even_odd_bo5", {"moves": [1, 2, 3]}, {"moves": [2, 2, 1, 4]}),
    "best of five, a move out of range": ("even_odd_bo5", {"moves": [1, 9]}, {"moves": [2]}),
}


def _report(referee, lm, players, game_type: str, a: dict, b: dict) -> dict:
    _, url_a = players(ScriptedPlayer("P01", **a))
    _, url_b = players(ScriptedPlayer("P02", **b))
    reply = rpc(referee.url, "start_match", start_match_message(url_a, url_b, game_type=game_type))
    assert reply["status"] == "ACCEPTED", reply
    (report,) = lm[0].received.wait_for("acknowledged")
    return report


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_our_referees_report_is_borne_out_by_its_log(referee, lm, players, scenario):
    game_type, a, b = SCENARIOS[scenario]
    report = _report(referee, lm, players, game_type, a, b)
    assert log_problem(game_type, "P01", "P02", report["result"], report["match_log"]) is None


def test_a_log_that_does_not_produce_the_result_is_caught(referee, lm, players):
    report = _report(referee, lm, players, "even_odd", {"choices": ["even"]}, {"choices": ["odd"]})
    result, log = report["result"], report["match_log"]
    loser = "P02" if result["winner"] == "P01" else "P01"

    def problem(result=result, log=log) -> str | None:
        return log_problem("even_odd", "P01", "P02", result, log)

    # The other player as the winner: the log's choices and draw say otherwise.
    flipped = {**result, "winner": loser, "score": {result["winner"]: 0, loser: 3}}
    assert "not a WIN of " + loser in problem(result=flipped)
    # A technical loss of a game the log shows played to the end.
    technical = {**result, "status": "TECHNICAL_LOSS", "technical_loss": [loser]}
    assert "played to the end" in problem(result=technical)
    # No log at all, or one without the moves.
    assert "empty" in problem(log=[])
    moves = [e for e in log if not (e["direction"] == "IN" and e["method"] == "choose_parity")]
    assert "no accepted choose_parity answer" in problem(log=moves)
    # A drawn number out of range, or a record of the turn that its moves contradict.
    edited = copy.deepcopy(log)
    resolved = next(e for e in edited if e["message_type"] == "RESOLVED")
    resolved["message"]["drawn_number"] = 11
    assert "from 1 to 10, got 11" in problem(log=edited)
    resolved["message"]["drawn_number"] = result["details"]["drawn_number"]
    resolved["message"]["choices"] = {"P01": "odd", "P02": "odd"}
    assert "the log records choices" in problem(log=edited)
    # Details that contradict the log.
    lied = {**result, "details": {**result["details"], "choices": {"P01": "odd", "P02": "even"}}}
    assert "result.details.choices" in problem(result=lied)
    assert problem() is None
