"""Matches run over real HTTP between the referee and scripted players, reported to a scripted LM."""

from __future__ import annotations

import pytest

from leagueproto.matchtoken import player_token
from tests.referee.conftest import rpc, start_match_message
from tests.referee.scripted import ScriptedPlayer, raw_app, serving
from tests.support.servers import free_port


def play(referee, lm, url_a: str, url_b: str, **overrides) -> dict:
    """Assign a match, wait for its report, return the report."""
    scripted_lm, _ = lm
    reply = rpc(referee.url, "start_match", start_match_message(url_a, url_b, **overrides))
    assert reply["status"] == "ACCEPTED", reply
    (report,) = scripted_lm.received.wait_for("acknowledged")
    return report


def test_it_runs_a_normal_match_and_reports_it(referee, lm, players):
    a, url_a = players(ScriptedPlayer("P01", choices=["even"]))
    b, url_b = players(ScriptedPlayer("P02", choices=["odd"]))
    report = play(referee, lm, url_a, url_b)

    result = report["result"]
    number = result["details"]["drawn_number"]
    winner = "P01" if number % 2 == 0 else "P02"
    assert result["status"] == "WIN"
    assert result["winner"] == winner
    assert result["score"] == {winner: 3, ("P02" if winner == "P01" else "P01"): 0}
    assert result["technical_loss"] == []
    assert result["details"]["choices"] == {"P01": "even", "P02": "odd"}
    assert report["sender"] == "referee:REF01" and report["auth_token"].startswith("referee-token")

    for player in (a, b):
        invitation = player.received.of("handle_game_invitation")[0]
        # Each player gets its own token, derived from the match token; never the match token.
        assert invitation["auth_token"] == player_token("match-token-R1M1", "P01" if player is a else "P02")
        assert invitation["sender"] == "referee:REF01"
        assert invitation["timestamp"].endswith("Z") and "." not in invitation["timestamp"]
        call = player.received.of("choose_parity")[0]
        assert call["context"]["opponent_id"] == ("P02" if player is a else "P01")
        assert call["deadline"].endswith("Z")
        (over,) = player.received.wait_for("notify_match_result")
        assert over["game_result"]["winner_player_id"] == winner
        assert over["game_result"]["drawn_number"] == number

    log = report["match_log"]
    assert [e["seq"] for e in log] == list(range(1, len(log) + 1))
    states = [e["message_type"] for e in log if e["direction"] == "EVENT"]
    assert states[:1] == ["WAITING_FOR_PLAYERS"] and "COLLECTING_CHOICES" in states and states[-1] == "FINISHED"
    outgoing = [(e["peer"], e["message_type"]) for e in log if e["direction"] == "OUT"]
    # The report is recorded before anyone is told: its log ends with the outcome, and the
    # referee's own log of the match goes on with the GAME_OVER deliveries.
    assert ("P01", "CHOOSE_PARITY_CALL") in outgoing and ("P02", "GAME_OVER") not in outgoing
    referee.wait_told("the match told")
    told = referee.referee.matches["league_test:R1M1"].log.entries
    assert told[: len(log)] == log and ("P02", "GAME_OVER") in [(e["peer"], e["message_type"]) for e in told]
    sent = [e["message"] for e in told if e["direction"] == "OUT"]
    assert sent and not any({"auth_token", "league_manager_token", "match_token"} & set(m) for m in sent)


def test_it_calls_a_draw_when_both_choose_the_same(referee, lm, players):
    _, url_a = players(ScriptedPlayer("P01", choices=["odd"]))
    _, url_b = players(ScriptedPlayer("P02", choices=["odd"]))
    result = play(referee, lm, url_a, url_b)["result"]
    assert (result["status"], result["winner"], result["score"]) == ("DRAW", None, {"P01": 1, "P02": 1})


def test_it_gives_a_technical_loss_to_a_player_that_never_answers_the_invitation(referee, lm, players):
    silent, url_a = players(ScriptedPlayer("P01", join_delay=1.0))
    b, url_b = players(ScriptedPlayer("P02"))
    report = play(referee, lm, url_a, url_b)
    result = report["result"]
    assert (result["status"], result["winner"], result["technical_loss"]) == ("TECHNICAL_LOSS", "P02", ["P01"])
    assert result["score"] == {"P01": 0, "P02": 3}
    assert "GAME_JOIN_ACK" in result["details"]["reason"]
    assert b.received.of("choose_parity") == []
    invitations = [e for e in report["match_log"] if e["peer"] == "P01" and e["message_type"] == "GAME_INVITATION"]
    assert invitations[0]["outcome"] == "timeout" and invitations[0]["attempt"] == 2  # retried once


def test_it_gives_a_technical_loss_to_a_player_that_declines(referee, lm, players):
    _, url_a = players(ScriptedPlayer("P01"))
    _, url_b = players(ScriptedPlayer("P02", join="decline"))
    result = play(referee, lm, url_a, url_b)["result"]
    assert (result["status"], result["winner"], result["technical_loss"]) == ("TECHNICAL_LOSS", "P01", ["P02"])
    assert "declined" in result["details"]["reason"]


def test_it_gives_a_technical_loss_for_a_choice_after_the_deadline(referee, lm, players):
    late, url_a = players(ScriptedPlayer("P01", move_delay=1.0))
    _, url_b = players(ScriptedPlayer("P02"))
    result = play(referee, lm, url_a, url_b)["result"]
    assert (result["status"], result["winner"], result["technical_loss"]) == ("TECHNICAL_LOSS", "P02", ["P01"])
    assert "E001" in result["details"]["reason"]
    assert len(late.received.of("choose_parity")) == 2  # the first attempt and one retry
    assert result["details"]["choices"] == {}


def test_it_asks_again_after_invalid_choices_and_accepts_a_valid_one(referee, lm, players):
    a, url_a = players(ScriptedPlayer("P01", choices=["EVEN", "EVEN", "even"]))
    _, url_b = players(ScriptedPlayer("P02", choices=["even"]))
    report = play(referee, lm, url_a, url_b)
    result = report["result"]
    assert (result["status"], result["technical_loss"]) == ("DRAW", [])
    assert len(a.received.of("choose_parity")) == 3
    errors = a.received.of("notify_game_error")
    assert [e["error_code"] for e in errors] == ["E004", "E004"]
    assert [e["retry_count"] for e in errors] == [1, 2] and errors[0]["max_retries"] == 3
    assert errors[0]["affected_player"] == "P01" and "'EVEN'" in errors[0]["error_description"]
    invalid = [e for e in report["match_log"] if e["direction"] == "IN" and e["outcome"] == "invalid"]
    assert len(invalid) == 2


def test_it_gives_a_technical_loss_after_four_invalid_choices(referee, lm, players):
    a, url_a = players(ScriptedPlayer("P01", choices=["Even", "0", ScriptedPlayer.MISSING, None]))
    _, url_b = players(ScriptedPlayer("P02"))
    result = play(referee, lm, url_a, url_b)["result"]
    assert (result["status"], result["winner"], result["technical_loss"]) == ("TECHNICAL_LOSS", "P02", ["P01"])
    assert len(a.received.of("choose_parity")) == 4
    assert len(a.received.of("notify_game_error")) == 4
    assert "4 invalid answers" in result["details"]["reason"]


@pytest.mark.parametrize(
    ("app", "code"),
    [
        (raw_app(500, b"Internal Server Error", "text/plain"), "E010"),
        (raw_app(200, b'{"jsonrpc": "2.0", "id": 1, "result": {"parity'), "E002"),
    ],
    ids=["http-500", "malformed-json"],
)
def test_it_gives_a_technical_loss_to_a_broken_player(referee, lm, players, app, code):
    _, url_a = players(ScriptedPlayer("P01"))
    with serving(app) as broken:
        result = play(referee, lm, url_a, broken.url)["result"]
    assert (result["status"], result["winner"], result["technical_loss"]) == ("TECHNICAL_LOSS", "P01", ["P02"])
    assert code in result["details"]["reason"]


def test_it_gives_a_technical_loss_when_the_connection_is_refused(referee, lm, players):
    _, url_b = players(ScriptedPlayer("P02"))
    report = play(referee, lm, f"http://127.0.0.1:{free_port()}/mcp", url_b)
    result = report["result"]
    assert (result["status"], result["winner"], result["technical_loss"]) == ("TECHNICAL_LOSS", "P02", ["P01"])
    invitation = next(e for e in report["match_log"] if e["peer"] == "P01" and e["direction"] == "OUT")
    assert (invitation["outcome"], invitation["attempt"]) == ("connection_error", 2)


def test_it_gives_both_a_technical_loss_when_both_players_are_dead(referee, lm):
    report = play(referee, lm, f"http://127.0.0.1:{free_port()}/mcp", f"http://127.0.0.1:{free_port()}/mcp")
    result = report["result"]
    assert result["status"] == "TECHNICAL_LOSS"
    assert result["winner"] is None
    assert sorted(result["technical_loss"]) == ["P01", "P02"]
    assert result["score"] == {"P01": 0, "P02": 0}


def test_it_falls_back_to_mcp_tools_call_for_a_player_that_speaks_only_dialect_b(referee, lm, players):
    b_only, url_a = players(ScriptedPlayer("P01", choices=["odd"]), mcp_only=True)
    _, url_b = players(ScriptedPlayer("P02", choices=["even"]))
    report = play(referee, lm, url_a, url_b)
    assert report["result"]["status"] == "WIN"
    assert b_only.received.of("choose_parity")[0]["context"]["opponent_id"] == "P02"
    dialects = {e["dialect"] for e in report["match_log"] if e["peer"] == "P01" and e.get("dialect")}
    assert dialects == {"mcp"}


def test_it_runs_a_best_of_five_match_end_to_end(referee, lm, players):
    odd, url_a = players(ScriptedPlayer("P01", moves=[1, 2, 2, 3]))
    even, url_b = players(ScriptedPlayer("P02", moves=[2, 2, 1, 1]))
    # sums 3 (ODD), 4 (EVEN), 3 (ODD), 4 (EVEN), then 3+1=4 (EVEN): EVEN wins 3-2
    report = play(referee, lm, url_a, url_b, game_type="even_odd_bo5")
    result = report["result"]
    assert (result["status"], result["winner"], result["score"]) == ("WIN", "P02", {"P01": 0, "P02": 3})
    assert result["details"]["scores"] == {"P01": 2, "P02": 3}
    assert [r["sum"] for r in result["details"]["rounds"]] == [3, 4, 3, 4, 4]

    start = odd.received.of("notify_game_start")[0]
    assert start["game_config"]["rounds_to_win"] == 3
    assert start["players"] == [{"player_id": "P01", "role": "ODD"}, {"player_id": "P02", "role": "EVEN"}]
    requests = even.received.of("make_move")
    assert [r["game_round"] for r in requests] == [1, 2, 3, 4, 5]
    assert requests[0]["game_state"]["your_role"] == "EVEN"
    results = even.received.wait_for("notify_round_result", 5)
    assert results[0]["round_winner"] == "P01" and results[0]["sum_type"] == "ODD"
    over = even.received.wait_for("notify_match_result")[0]
    assert over["game_result"]["winner_player_id"] == "P02" and over["game_result"]["scores"] == {"P01": 2, "P02": 3}


def test_it_gives_a_bo5_technical_loss_for_numbers_out_of_range(referee, lm, players):
    _, url_a = players(ScriptedPlayer("P01", moves=[6]))
    _, url_b = players(ScriptedPlayer("P02", moves=[2]))
    result = play(referee, lm, url_a, url_b, game_type="even_odd_bo5")["result"]
    assert (result["status"], result["winner"], result["technical_loss"]) == ("TECHNICAL_LOSS", "P02", ["P01"])
