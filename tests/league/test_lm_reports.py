"""report_match_result (contract 2): recorded once, only from the assigned referee, consistent scores."""

from __future__ import annotations

import copy

import pytest

from league.models import Event, Match, MatchResult, Round
from tests.league.lm_support import (
    assigned_match,
    call,
    make_league,
    register_player,
    register_referee,
    win_report,
)


def _setup(lm_server, players: int = 2):
    league = make_league()
    ref = register_referee(lm_server, "ref1")
    regs = [register_player(lm_server, f"p{n}") for n in range(1, players + 1)]
    return league, ref, regs


def test_it_records_a_result_and_finishes_the_match_and_round(lm_server):
    league, ref, _ = _setup(lm_server)
    match = assigned_match(league)
    reply = call(lm_server, "report_match_result", win_report(ref))
    assert reply["message_type"] == "MATCH_RESULT_ACK"
    assert (reply["match_id"], reply["status"]) == ("R1M1", "RECORDED")
    match.refresh_from_db()
    assert match.status == Match.Status.FINISHED and match.finished_at is not None
    result = MatchResult.objects.get(match=match)
    assert (result.outcome, result.points_a, result.points_b) == ("WIN_A", 3, 0)
    assert result.winner.player_id == "P01" and result.details["drawn_number"] == 8
    assert result.log[0]["method"] == "handle_game_invitation"
    assert "auth_token" not in result.log[0]["message"]  # the match token never reaches the database
    assert Round.objects.get(league=league, number=1).status == Round.Status.PLAYED


def test_it_keeps_the_round_open_until_its_last_match_finishes(lm_server):
    league, ref, _ = _setup(lm_server, players=4)
    assigned_match(league, a="P01", b="P02", match_id="R1M1")
    assigned_match(league, a="P03", b="P04", match_id="R1M2")
    call(lm_server, "report_match_result", win_report(ref))
    assert Round.objects.get(league=league, number=1).status == Round.Status.PENDING
    call(lm_server, "report_match_result", win_report(ref, "R1M2", winner="P04", loser="P03"))
    assert Round.objects.get(league=league, number=1).status == Round.Status.PLAYED


def test_an_identical_report_counts_once(lm_server):
    league, ref, _ = _setup(lm_server)
    assigned_match(league)
    report = win_report(ref)
    assert call(lm_server, "report_match_result", report)["status"] == "RECORDED"
    repeat = dict(report, conversation_id="retry-1")
    assert call(lm_server, "report_match_result", repeat)["status"] == "DUPLICATE"
    assert MatchResult.objects.count() == 1


def test_a_conflicting_report_is_rejected_and_logged(lm_server):
    league, ref, _ = _setup(lm_server)
    assigned_match(league)
    call(lm_server, "report_match_result", win_report(ref))
    reply = call(lm_server, "report_match_result", win_report(ref, winner="P02", loser="P01"))
    assert reply["message_type"] == "LEAGUE_ERROR" and reply["error_code"] == "E015"
    assert MatchResult.objects.get().winner.player_id == "P01"
    assert Event.objects.filter(kind="report_conflict", match_id="R1M1").count() == 1


def test_a_report_from_another_referee_is_rejected(lm_server):
    league, ref, _ = _setup(lm_server)
    other = register_referee(lm_server, "ref2")
    assigned_match(league, referee_id="REF01")
    reply = call(lm_server, "report_match_result", win_report(other))
    assert reply["error_code"] == "E015" and reply["context"]["assigned_referee"] == "REF01"
    assert not MatchResult.objects.exists()


def test_a_report_for_an_unknown_match_is_e006(lm_server):
    _, ref, _ = _setup(lm_server)
    reply = call(lm_server, "report_match_result", win_report(ref, match_id="R9M9"))
    assert reply["error_code"] == "E006" and reply["error_name"] == "MATCH_NOT_FOUND"


def test_a_player_token_cannot_report_a_result(lm_server):
    league, ref, players = _setup(lm_server)
    assigned_match(league)
    report = win_report(ref)
    report.update(sender="player:P01", auth_token=players[0]["auth_token"])
    assert call(lm_server, "report_match_result", report)["error_code"] == "E012"
    report.update(sender="referee:REF01")  # the player's token under the referee's name
    assert call(lm_server, "report_match_result", report)["error_code"] == "E012"
    assert not MatchResult.objects.exists()


def _report_with(ref: dict, **result) -> dict:
    report = win_report(ref)
    report["result"] = copy.deepcopy(report["result"]) | result
    return report


@pytest.mark.parametrize(
    ("result", "ok"),
    [
        ({"status": "DRAW", "winner": None, "score": {"P01": 1, "P02": 1}}, True),
        ({"status": "TECHNICAL_LOSS", "winner": "P02", "score": {"P01": 0, "P02": 3}, "technical_loss": ["P01"]}, True),
        (
            {
                "status": "TECHNICAL_LOSS",
                "winner": None,
                "score": {"P01": 0, "P02": 0},
                "technical_loss": ["P01", "P02"],
            },
            True,
        ),
        ({"status": "WIN", "winner": "P01", "score": {"P01": 3, "P02": 1}}, False),
        ({"status": "WIN", "winner": "P09", "score": {"P01": 3, "P02": 0}}, False),
        ({"status": "DRAW", "winner": None, "score": {"P01": 1, "P03": 1}}, False),
        (
            {"status": "TECHNICAL_LOSS", "winner": "P01", "score": {"P01": 3, "P02": 0}, "technical_loss": ["P01"]},
            False,
        ),
        ({"status": "LOST", "winner": None, "score": {"P01": 0, "P02": 0}}, False),
    ],
)
def test_it_checks_results_against_the_scoring_rules(lm_server, result, ok):
    league, ref, _ = _setup(lm_server)
    assigned_match(league)
    reply = call(lm_server, "report_match_result", _report_with(ref, **result))
    if ok:
        assert reply["status"] == "RECORDED"
        stored = MatchResult.objects.get()
        assert (stored.points_a, stored.points_b) == (result["score"]["P01"], result["score"]["P02"])
        assert stored.technical_loss_a == ("P01" in result.get("technical_loss", []))
        assert stored.technical_loss_b == ("P02" in result.get("technical_loss", []))
    else:
        assert reply["error_code"] == "E002", reply
        assert not MatchResult.objects.exists()
        assert Match.objects.get().status == Match.Status.ASSIGNED
