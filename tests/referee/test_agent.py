"""The referee agent: its tools, capacity, idempotency, LM authentication, registration and
report delivery across restarts, over real HTTP."""

from __future__ import annotations

import asyncio
import gc
import json
import threading

import pytest

from leagueproto.asgi import make_asgi_app
from leagueproto.client import CallFailed
from leagueproto.envelope import deadline_in, make_message
from leagueproto.errors import ErrorCode
from leagueproto.jsonutil import dumps
from leagueproto.server import McpServer
from leagueproto.tools import CallContext
from referee import agent
from referee.agent import Referee, RefereeConfig
from referee.store import StateStore
from tests.referee.conftest import FAST_TIMEOUTS, ROOMY_TIMEOUTS, rpc, run_referee, start_match_message
from tests.referee.scripted import ScriptedLM, ScriptedPlayer, serving
from tests.support.servers import free_port
from tests.support.waiting import wait_until


def test_it_registers_with_its_meta_in_the_background(referee, lm):
    scripted_lm, _ = lm
    (request,) = scripted_lm.received.of("register_referee")
    meta = request["referee_meta"]
    assert request["message_type"] == "REFEREE_REGISTER_REQUEST"
    assert request["sender"] == "referee:Referee"
    assert meta["contact_endpoint"] == referee.url
    assert meta["game_types"] == ["even_odd", "even_odd_bo5"]
    assert meta["max_concurrent_matches"] == 4
    assert meta["protocol_version"] >= "2.0.0"
    assert referee.referee.sender == "referee:REF01"


def test_it_lists_its_tools_and_answers_ping(referee):
    tools = {t["name"] for t in rpc(referee.url, "tools/list", {})["tools"]}
    assert {"start_match", "run_match", "get_match_state", "notify_round", "notify_league_completed"} <= tools
    assert rpc(referee.url, "ping", {}) == {}


def test_it_rejects_start_match_without_the_lm_token(referee, players):
    _, url = players(ScriptedPlayer("P01"))
    wrong = start_match_message(url, url)
    wrong["auth_token"] = "not-the-lm-token"
    reply = rpc(referee.url, "start_match", wrong)
    assert (reply["message_type"], reply["error_code"]) == ("GAME_ERROR", "E012")
    del wrong["auth_token"]
    assert rpc(referee.url, "start_match", wrong)["error_code"] == "E011"
    assert referee.referee.matches == {}


def test_it_rejects_a_match_when_at_capacity_and_a_played_match_holds_no_seat(lm, players, tmp_path):
    scripted_lm, lm_url = lm
    # The first match waits for its invitation's answer until the second has been asked for (a
    # loaded machine may take longer between the two calls than the match takes to play); then
    # its report waits for the LM's answer, and its GAME_OVER for P01's.
    joined, told = threading.Event(), threading.Event()
    answered = scripted_lm.report_gate = threading.Event()
    _, slow = players(ScriptedPlayer("P01", join_gate=joined, game_over_gate=told))
    p02, fast = players(ScriptedPlayer("P02"))
    held = {**FAST_TIMEOUTS, "join": 30.0, "game_over": 30.0, "report": 30.0}
    with run_referee(league_url=lm_url, max_concurrent=1) as running:
        running.wait_registered()
        try:
            first = rpc(running.url, "start_match", start_match_message(slow, fast, match_id="R1M1", timeouts=held))
            second = rpc(running.url, "start_match", start_match_message(slow, fast, match_id="R1M2"))
        finally:
            joined.set()
        assert (first["status"], first["capacity"]) == ("ACCEPTED", 1)
        assert (second["status"], second["reason"], second["active_matches"]) == ("REJECTED", "at capacity", 1)
        try:
            # Played: its seat is free while the LM has not answered its report (the LM, which has
            # recorded it, gives the referee its next match before that answer arrives).
            scripted_lm.received.wait_for("report_match_result")
            wait_until(lambda: running.referee.active_matches == 0, what="R1M1's seat free once played")
            third = rpc(running.url, "start_match", start_match_message(slow, fast, match_id="R1M2"))
            assert (third["status"], third["active_matches"]) == ("ACCEPTED", 1)
            assert p02.received.of("notify_match_result") == []  # and told to no one before its record
        finally:
            answered.set()
            told.set()
        scripted_lm.received.wait_for("acknowledged", 2)


def test_it_answers_a_repeated_assignment_with_its_report_without_running_the_match_twice(referee, lm, players):
    scripted_lm, _ = lm
    a, url_a = players(ScriptedPlayer("P01"))
    _, url_b = players(ScriptedPlayer("P02"))
    message = start_match_message(url_a, url_b)
    assert rpc(referee.url, "start_match", message)["status"] == "ACCEPTED"
    (first,) = scripted_lm.received.wait_for("acknowledged")
    referee.wait_told("the match told")
    # (A loaded machine may have sent the invitation twice, a retry after its timeout: that is
    # still one run of the match.)
    invited = len(a.received.of("handle_game_invitation"))
    again = rpc(referee.url, "run_match", message)  # the alias, after the match finished
    assert (again["status"], again["reason"]) == ("ACCEPTED", "already finished")
    # The LM asks again because it has no result: the saved report goes to it once more.
    second = scripted_lm.received.wait_for("acknowledged", 2)[1]
    assert second["result"] == first["result"]
    assert len(a.received.of("handle_game_invitation")) == invited


def test_it_has_the_outcome_recorded_before_telling_the_players_and_never_plays_the_match_again(lm, players, tmp_path):
    """Saved, recorded, then told: stopped while the LM has not answered its report (the kill of
    finding 3, or an LM that gave the match away meanwhile), the referee has told no player, and
    the outcome is on disk; the next referee on the same state dir reports that outcome and
    answers a re-sent start_match with it instead of playing the match again."""
    scripted_lm, lm_url = lm
    a, url_a = players(ScriptedPlayer("P01", choices=["odd"]))
    b, url_b = players(ScriptedPlayer("P02", choices=["even"]))
    state_dir = tmp_path / "state"
    message = start_match_message(url_a, url_b)
    gate = scripted_lm.report_gate = threading.Event()  # the first referee's report never gets an answer
    try:
        with run_referee(league_url=lm_url, state_dir=state_dir, grace_seconds=0.2) as first:
            first.wait_registered()
            assert rpc(first.url, "start_match", message)["status"] == "ACCEPTED"
            (sent,) = scripted_lm.received.wait_for("report_match_result")
            saved = list((state_dir / "pending").iterdir())
            assert len(saved) == 1  # on disk before it was sent
            assert [e["message_type"] for e in sent["match_log"] if e["direction"] == "OUT"][-1] != "GAME_OVER"
        # The referee is gone, its report unanswered: no player was told its outcome.
        assert not a.received.of("notify_match_result") and not b.received.of("notify_match_result")
    finally:
        gate.set()
    scripted_lm.report_gate = None
    with run_referee(league_url=lm_url, state_dir=state_dir) as second:
        second.wait_registered()
        report = scripted_lm.received.wait_for("acknowledged")[-1]
        assert report["result"] == sent["result"]
        again = rpc(second.url, "start_match", message)
        assert (again["status"], again["reason"]) == ("ACCEPTED", "already finished")
        # Asked about it (the LM's check after a restart), it knows the match: finished, not lost.
        state = rpc(
            second.url,
            "get_match_state",
            {"match_id": "R1M1", "league_id": "league_test", "auth_token": ScriptedLM.LM_TOKEN},
        )
        assert (state["state"], state["result"]) == ("FINISHED", report["result"])
        # A replay of R1M1 would have started at once: a later match played here to its report
        # is the event it would have come before.
        assert (
            rpc(second.url, "start_match", start_match_message(url_a, url_b, match_id="R1M2"))["status"] == "ACCEPTED"
        )
        wait_until(lambda: "R1M2" in _match_ids(b.received.of("notify_match_result")), what="R1M2 told")
    assert _match_ids(a.received.of("handle_game_invitation")).count("R1M1") == 1
    # The second referee does not know the players' addresses: R1M1 stays recorded and untold.
    assert _match_ids(b.received.of("notify_match_result")) == ["R1M2"]


def _match_ids(messages: list[dict]) -> list[str]:
    return [m.get("match_id") for m in messages]


def test_it_does_not_play_a_start_match_the_lm_no_longer_waits_for(referee, players):
    """A start_match read after its ``start_by`` (queued while the referee was stopped) is refused."""
    a, url_a = players(ScriptedPlayer("P01"))
    _, url_b = players(ScriptedPlayer("P02"))
    message = start_match_message(url_a, url_b, start_by="2020-01-01T00:00:00Z")
    reply = rpc(referee.url, "start_match", message)
    assert reply["status"] == "REJECTED" and reply["reason"].startswith("stale")
    fresh = start_match_message(url_a, url_b, match_id="R1M2", start_by=deadline_in(30))
    assert rpc(referee.url, "start_match", fresh)["status"] == "ACCEPTED"
    a.received.wait_for("handle_game_invitation")
    assert [m["match_id"] for m in a.received.of("handle_game_invitation")] == ["R1M2"]


def test_it_rejects_an_unknown_game_type(referee, players):
    _, url = players(ScriptedPlayer("P01"))
    reply = rpc(referee.url, "start_match", start_match_message(url, url, game_type="chess"))
    assert reply["status"] == "REJECTED" and "chess" in reply["reason"]


def test_it_returns_the_state_and_log_of_a_match(referee, lm, players):
    scripted_lm, _ = lm
    _, url_a = players(ScriptedPlayer("P01"))
    _, url_b = players(ScriptedPlayer("P02"))
    rpc(referee.url, "start_match", start_match_message(url_a, url_b, timeouts=ROOMY_TIMEOUTS))
    scripted_lm.received.wait_for("acknowledged")
    wait_until(lambda: referee.referee.reports)
    query = {"match_id": "R1M1", "league_id": "league_test", "auth_token": ScriptedLM.LM_TOKEN}
    state = rpc(referee.url, "get_match_state", query)
    assert (state["message_type"], state["state"], state["report_status"]) == ("MATCH_STATE", "FINISHED", "RECORDED")
    assert state["result"]["status"] in ("WIN", "DRAW")
    assert state["players"] == [
        {"player_id": "P01", "role_in_match": "PLAYER_A"},
        {"player_id": "P02", "role_in_match": "PLAYER_B"},
    ]
    assert url_a not in str(state) and url_b not in str(state)  # no player's endpoint, even to the LM
    assert state["match_log"][0]["message_type"] == "WAITING_FOR_PLAYERS"
    missing = rpc(referee.url, "get_match_state", {**query, "match_id": "R9M9"})
    assert (missing["message_type"], missing["error_code"]) == ("GAME_ERROR", "E006")


def test_it_runs_the_seed_002_run_match_synchronously(players):
    _, url_a = players(ScriptedPlayer("Alpha", choices=["even"]))
    _, url_b = players(ScriptedPlayer("Beta", choices=["odd"]))
    with run_referee(register=False) as running:
        reply = rpc(
            running.url,
            "run_match",
            {
                "match_id": "match_123",
                "player1": {"display_name": "Alpha", "version": "1.0.0", "endpoint": url_a},
                "player2": {"display_name": "Beta", "version": "1.0.0", "endpoint": url_b},
                "timeouts": {"join": 0.5, "move": 0.5},
            },
        )
    assert reply["match_id"] == "match_123"
    assert (reply["player1_choice"], reply["player2_choice"]) == ("even", "odd")
    assert reply["winner"] == ("Alpha" if reply["dice_roll"] % 2 == 0 else "Beta")
    assert reply["dice_parity"] == ("even" if reply["dice_roll"] % 2 == 0 else "odd")
    assert reply["is_draw"] is False


def test_it_acknowledges_round_and_league_notifications(referee):
    lm_token = ScriptedLM.LM_TOKEN
    round_msg = make_message("ROUND_ANNOUNCEMENT", "league_manager", auth_token=lm_token, round_id=2, matches=[])
    ack = rpc(referee.url, "notify_round", round_msg)
    assert (ack["message_type"], ack["status"], ack["round_id"]) == ("ACK", "received", 2)
    assert ack["conversation_id"] == round_msg["conversation_id"]
    done = make_message(
        "LEAGUE_COMPLETED", "league_manager", auth_token=lm_token, champion={"player_id": "P01"}, final_standings=[]
    )
    assert rpc(referee.url, "notify_league_completed", done)["status"] == "received"
    assert referee.referee.league_completed["champion"] == {"player_id": "P01"}


def test_it_registers_again_when_the_lm_forgets_its_token(referee, lm, players):
    scripted_lm, _ = lm
    _, url_a = players(ScriptedPlayer("P01"))
    _, url_b = players(ScriptedPlayer("P02"))
    scripted_lm.forget()
    rpc(referee.url, "start_match", start_match_message(url_a, url_b))
    (report,) = scripted_lm.received.wait_for("acknowledged")
    assert len(scripted_lm.received.of("register_referee")) == 2
    assert report["auth_token"] == "referee-token-2"
    # The second registration presented the old token, so an LM can keep the same referee.
    assert scripted_lm.received.of("register_referee")[1]["auth_token"] == "referee-token-1"


def test_it_keeps_a_finished_result_across_a_restart(players, tmp_path):
    """LM down while the match ends; the referee stops; a new one on the same state dir, LM up:
    the report arrives and is acknowledged exactly once."""
    _, url_a = players(ScriptedPlayer("P01", choices=["odd"]))
    _, url_b = players(ScriptedPlayer("P02", choices=["even"]))
    lm_port = free_port()
    lm_url = f"http://127.0.0.1:{lm_port}/mcp"
    state_dir = tmp_path / "state"
    pending = state_dir / "pending"

    scripted_lm = ScriptedLM()
    with run_referee(league_url=lm_url, state_dir=state_dir, grace_seconds=0.3) as first:
        with serving(scripted_lm.app(), port=lm_port):
            first.wait_registered()
        # The LM is gone from here on: the match it assigned ends, and its report cannot go.
        reply = rpc(first.url, "start_match", start_match_message(url_a, url_b))
        assert reply["status"] == "ACCEPTED"
        wait_until(lambda: first.referee.matches["league_test:R1M1"].result is not None and any(pending.iterdir()))
        result = first.referee.matches["league_test:R1M1"].result.to_dict()
    assert len(list(pending.iterdir())) == 1

    with serving(scripted_lm.app(), port=lm_port), run_referee(league_url=lm_url, state_dir=state_dir) as second:
        (report,) = scripted_lm.received.wait_for("acknowledged")
        wait_until(lambda: not any(pending.iterdir()))
        assert second.referee.reports["league_test:R1M1"]["status"] == "RECORDED"
        # A second sending of R1M1's report would have gone at once: a later match played here
        # to its report is the event it would have come before.
        assert (
            rpc(second.url, "start_match", start_match_message(url_a, url_b, match_id="R1M2"))["status"] == "ACCEPTED"
        )
        wait_until(lambda: "R1M2" in _match_ids(scripted_lm.received.of("acknowledged")), what="R1M2 recorded")
        assert _match_ids(scripted_lm.received.of("report_match_result")).count("R1M1") == 1
    assert report["result"] == result
    assert report["match_id"] == "R1M1" and report["sender"] == "referee:REF01"
    assert report["match_log"][-1]["message_type"] in ("GAME_OVER", "ACK", "FINISHED")


def test_it_runs_several_matches_at_once(referee, lm, players):
    scripted_lm, _ = lm
    gate = threading.Event()
    _, url_a = players(ScriptedPlayer("P01", join_gate=gate))
    _, url_b = players(ScriptedPlayer("P02"))
    # The held joins wait for the gate, not for a 0.3 s join timeout a loaded machine outruns
    # between the three calls (a match ended by it would no longer be active).
    patient = {**FAST_TIMEOUTS, "join": 30.0}
    replies = [
        rpc(referee.url, "start_match", start_match_message(url_a, url_b, match_id=f"R1M{n}", timeouts=patient))
        for n in (1, 2, 3)
    ]
    assert [r["active_matches"] for r in replies] == [1, 2, 3]
    gate.set()
    reports = scripted_lm.received.wait_for("acknowledged", 3)
    assert sorted(r["match_id"] for r in reports) == ["R1M1", "R1M2", "R1M3"]


def test_it_finishes_a_running_match_when_stopped(lm, players):
    scripted_lm, lm_url = lm
    _, url_a = players(ScriptedPlayer("P01", join_delay=0.2))
    _, url_b = players(ScriptedPlayer("P02"))
    with run_referee(league_url=lm_url, grace_seconds=5.0) as running:
        running.wait_registered()
        # Timeouts well above the player's join delay: on a loaded machine 0.3 s was not enough
        # for a 0.2 s delay, and the match ended on a technical loss instead of being played.
        roomy = {"join": 2.0, "move": 2.0, "game_over": 2.0, "report": 2.0, "default": 2.0}
        assert (
            rpc(running.url, "start_match", start_match_message(url_a, url_b, timeouts=roomy))["status"] == "ACCEPTED"
        )
        running.server.stop()  # SIGTERM's path: uvicorn stops, then Referee.shutdown() waits for the match
        assert running.referee.accepting is False
    (report,) = scripted_lm.received.of("acknowledged")
    assert report["result"]["status"] in ("WIN", "DRAW")


def test_active_matches_counts_the_matches_not_yet_done(lm, players):
    """active_matches counts the matches still being played: a match leaves the count once played
    (and stays known: the same assignment again is answered with it, not played twice), and so
    does one that shutdown() cuts off."""
    scripted_lm, lm_url = lm
    gate, held = threading.Event(), threading.Event()
    a, url_a = players(ScriptedPlayer("P01", join_gate=gate))
    _, url_b = players(ScriptedPlayer("P02"))
    _, url_held = players(ScriptedPlayer("P03", join_gate=held))
    try:
        # The held joins wait for their gates, not for a 0.3 s join timeout a loaded machine
        # outruns between two calls (a match ended by it would no longer be active).
        patient = {**FAST_TIMEOUTS, "join": 30.0}
        with run_referee(league_url=lm_url, max_concurrent=4, grace_seconds=0.2) as running:
            running.wait_registered()
            for n in (1, 2):
                started = start_match_message(url_a, url_b, match_id=f"R1M{n}", timeouts=patient)
                reply = rpc(running.url, "start_match", started)
                assert (reply["status"], reply["active_matches"]) == ("ACCEPTED", n)
            assert running.referee.active_matches == 2
            gate.set()
            scripted_lm.received.wait_for("acknowledged", 2)
            # A match's report goes before its players are told; both are over here.
            a.received.wait_for("notify_match_result", 2)
            running.wait_told("both matches done")
            again = rpc(running.url, "start_match", start_match_message(url_a, url_b, match_id="R1M1"))
            assert (again["status"], again["reason"], again["active_matches"]) == ("ACCEPTED", "already finished", 0)
            # R1M3's player holds its join answer past the grace period (its join timeout is longer).
            cut = start_match_message(url_held, url_b, match_id="R1M3", player_A_id="P03", timeouts=patient)
            assert rpc(running.url, "start_match", cut)["active_matches"] == 1
            running.server.stop()  # shutdown(): waits for R1M3 for its grace period, then cuts it off
            assert running.referee.matches["league_test:R1M3"].result is None  # cut off, not played out
            assert running.referee.active_matches == 0
    finally:
        held.set()
    assert _match_ids(a.received.of("handle_game_invitation")) == ["R1M1", "R1M2"]


def _report_status(referee_url: str, match_id: str) -> str | None:
    query = {"match_id": match_id, "league_id": "league_test", "auth_token": ScriptedLM.LM_TOKEN}
    return rpc(referee_url, "get_match_state", query)["report_status"]


def _wait_recorded(referee_url: str, match_id: str) -> None:
    """Until the referee has the LM's acknowledgement of the match's report."""
    wait_until(lambda: _report_status(referee_url, match_id) == "RECORDED", what=f"{match_id}'s report recorded")


def test_it_keeps_only_undelivered_report_tasks_and_the_latest_acknowledgements(lm, players):
    scripted_lm, lm_url = lm
    _, url_a = players(ScriptedPlayer("P01"))
    _, url_b = players(ScriptedPlayer("P02"))
    held = scripted_lm.report_gate = threading.Event()  # the first report waits for its answer
    patient = {**FAST_TIMEOUTS, "report": 30.0}  # and is not sent again meanwhile
    match_ids = [f"R1M{n}" for n in range(1, 6)]
    with run_referee(league_url=lm_url, reports_kept=3) as running:
        running.wait_registered()
        for match_id in match_ids:  # one after another: acknowledged in this order
            message = start_match_message(url_a, url_b, match_id=match_id, timeouts=patient)
            assert rpc(running.url, "start_match", message)["status"] == "ACCEPTED"
            if not held.is_set():
                scripted_lm.received.wait_for("report_match_result")
                assert running.referee.undelivered_reports == 1
                held.set()
            _wait_recorded(running.url, match_id)
        assert len(scripted_lm.received.of("acknowledged")) == 5
        # The matches are all still kept: the two oldest acknowledgements are not.
        statuses = [_report_status(running.url, match_id) for match_id in match_ids]
        assert statuses == ["PENDING", "PENDING", "RECORDED", "RECORDED", "RECORDED"]
        assert running.referee.undelivered_reports == 0


def _match_tasks_alive(match_ids: list[str]) -> list[asyncio.Task]:
    """The tasks of these matches still in memory (ids no other test uses: the suite's other
    referees may run in this process)."""
    names = {f"match-league_test:{match_id}" for match_id in match_ids}
    # By type, not isinstance: a weak proxy among the objects would raise once its referent is gone.
    return [o for o in gc.get_objects() if issubclass(type(o), asyncio.Task) and o.get_name() in names]


def test_a_matchs_task_is_let_go_once_the_match_has_ended_and_its_state_is_kept(lm, players):
    """A referee keeps its last finished matches for get_match_state; not the tasks that played
    them (each with its coroutine and context: a thousand of them the collector walked)."""
    _, lm_url = lm
    _, url_a = players(ScriptedPlayer("P01"))
    _, url_b = players(ScriptedPlayer("P02"))
    match_ids = ["R1M71", "R1M72", "R1M73"]
    with run_referee(league_url=lm_url) as running:
        running.wait_registered()
        for match_id in match_ids:
            message = start_match_message(url_a, url_b, match_id=match_id, timeouts=ROOMY_TIMEOUTS)
            assert rpc(running.url, "start_match", message)["status"] == "ACCEPTED"
        for match_id in match_ids:
            _wait_recorded(running.url, match_id)
        wait_until(lambda: not _match_tasks_alive(match_ids), what="no match task left once the matches ended")
        assert [_report_status(running.url, match_id) for match_id in match_ids] == ["RECORDED"] * 3


def test_a_report_the_lm_could_not_take_is_sent_again_after_the_wait_it_asked_for(referee, lm, players, caplog):
    scripted_lm, _ = lm
    scripted_lm.unavailable = 1
    scripted_lm.retry_after_seconds = 0.7  # longer than the referee's own backoff (0.05 s, at most 0.2 s)
    _, url_a = players(ScriptedPlayer("P01", choices=["even"]))
    _, url_b = players(ScriptedPlayer("P02", choices=["odd"]))
    caplog.set_level("INFO", logger="referee.agent")
    assert rpc(referee.url, "start_match", start_match_message(url_a, url_b))["status"] == "ACCEPTED"
    scripted_lm.received.wait_for("acknowledged")
    assert len(scripted_lm.received.of("report_match_result")) == 2  # refused once, then recorded
    assert "retrying in 0.7 s" in caplog.text


def test_retry_after_reads_only_a_retryable_servers_wait():
    def failed(data: object) -> CallFailed:
        return CallFailed(ErrorCode.INVALID_MESSAGE_FORMAT, "x", rpc_error={"code": -32000, "data": data})

    assert agent.retry_after(failed({"retryable": True, "retry_after_seconds": 2})) == 2.0
    assert agent.retry_after(failed({"retryable": False, "retry_after_seconds": 2})) == 0.0
    assert agent.retry_after(failed({"retryable": True, "retry_after_seconds": "2"})) == 0.0
    assert agent.retry_after(failed({"retryable": True, "retry_after_seconds": 10_000})) == 0.0
    assert agent.retry_after(failed(None)) == 0.0
    assert agent.retry_after(CallFailed(ErrorCode.TIMEOUT_ERROR, "timed out")) == 0.0


async def test_its_sender_follows_its_identity(lm, tmp_path):
    scripted_lm, lm_url = lm
    referee = Referee(RefereeConfig(name="Ref One", register=False, league_url=lm_url, state_dir=tmp_path))
    assert referee.sender == "referee:Ref_One"
    referee.config.name = "Ref-2"  # runreferee names the referee after its port
    assert referee.sender == "referee:Ref-2"
    await referee.startup()
    try:
        assert await referee.register_once()
        assert referee.sender == "referee:REF01"
        scripted_lm.referee_id = "REF08"  # registered again, the LM gives it another id
        assert await referee.register_once()
        assert referee.sender == "referee:REF08"
    finally:
        await referee.shutdown()


@pytest.mark.parametrize("batch_bytes,posts", [(agent.REPORT_BATCH_BYTES, 1), (1, 3)])
def test_reports_waiting_while_one_is_in_flight_go_together_in_one_post(lm, players, tmp_path, batch_bytes, posts):
    """Up to ``report_batch_bytes`` of them: past it (here: 1 byte, so each alone) in the next POSTs."""
    scripted_lm, lm_url = lm
    gate = threading.Event()
    scripted_lm.report_gate = gate  # the LM holds its answer to the first report
    _, url_a = players(ScriptedPlayer("P01"))
    _, url_b = players(ScriptedPlayer("P02"))
    config = {"state_dir": tmp_path / "state", "max_concurrent": 4, "report_batch_bytes": batch_bytes}
    # The first report's call outlasts the held answer (a loaded machine may take seconds to
    # play the next three): timed out, it would free the sender and the others would not wait.
    timeouts = {**FAST_TIMEOUTS, "report": 60.0}
    with run_referee(league_url=lm_url, **config) as referee:
        referee.wait_registered()
        first = start_match_message(url_a, url_b, match_id="R1M1", timeouts=timeouts)
        assert rpc(referee.url, "start_match", first)["status"] == "ACCEPTED"
        scripted_lm.received.wait_for("report_match_result")  # alone, at once: nothing else was waiting
        for n in (2, 3, 4):
            message = start_match_message(url_a, url_b, match_id=f"R1M{n}", timeouts=timeouts)
            reply = rpc(referee.url, "start_match", message)
            assert reply["status"] == "ACCEPTED"
        # All four played: the three reports after the first wait while it is in flight.
        wait_until(lambda: referee.referee.undelivered_reports == 4, timeout=30)
        gate.set()
        reports = scripted_lm.received.wait_for("acknowledged", 4)
        assert sorted(r["match_id"] for r in reports) == ["R1M1", "R1M2", "R1M3", "R1M4"]
        first, *rest = scripted_lm.report_bodies
        assert first.startswith(b"{")  # a plain call
        assert len(rest) == 3 and len(set(rest)) == posts
        assert all(body.startswith(b"[") for body in rest) == (posts == 1)  # a batch, or plain calls
        assert all(r["status"] == "RECORDED" for r in referee.referee.reports.values())


def test_a_report_waits_for_those_of_matches_still_in_play_then_goes_with_them(lm, players, tmp_path):
    """While another match is in play here, a finished match's report waits for its report (up
    to its report_linger, here long enough not to matter) and both go in one POST."""
    scripted_lm, lm_url = lm
    with run_referee(league_url=lm_url, state_dir=tmp_path / "state", max_concurrent=4, report_linger=60.0) as referee:
        referee.wait_registered()
        gate = threading.Event()
        _, url_slow = players(ScriptedPlayer("P03", join_gate=gate))
        _, url_c = players(ScriptedPlayer("P04"))
        _, url_a = players(ScriptedPlayer("P01"))
        _, url_b = players(ScriptedPlayer("P02"))
        held = start_match_message(url_slow, url_c, match_id="R1M2", player_A_id="P03", player_B_id="P04")
        assert rpc(referee.url, "start_match", held)["status"] == "ACCEPTED"
        first = start_match_message(url_a, url_b, match_id="R1M1")
        assert rpc(referee.url, "start_match", first)["status"] == "ACCEPTED"
        matches = referee.referee.matches
        wait_until(lambda: matches["league_test:R1M1"].result is not None, timeout=30)
        # Had R1M1's report not waited, it would have gone alone long before R1M2 can finish (its
        # player joins only after the gate opens): one body for both proves it waited.
        gate.set()
        reports = scripted_lm.received.wait_for("acknowledged", 2)
        assert sorted(r["match_id"] for r in reports) == ["R1M1", "R1M2"]
        assert len(set(scripted_lm.report_bodies)) == 1  # one body, shared by the batch's two reports
        assert scripted_lm.report_bodies[0].startswith(b"[")


async def test_a_batch_the_lm_finds_too_large_goes_again_in_smaller_ones(tmp_path, caplog):
    """An LM whose body limit is below our batches answers 413: the referee halves its cap until
    the LM takes them, every report arrives once, and later batches keep the lowered cap."""
    scripted_lm = ScriptedLM()
    scripted_lm.tokens["referee-token"] = "REF01"
    mcp = McpServer(scripted_lm.toolset)
    keys = [f"league_test:R1M{n:02d}" for n in range(1, 13)]

    def pending(key: str) -> dict:
        """A report as the referee saves it before any player is told (``pending/``)."""
        match_id = key.partition(":")[2]
        fields = {
            "league_id": "league_test",
            "match_id": match_id,
            "result": {"status": "WIN", "winner": "P01"},
            "match_log": [{"round": k, "note": "x" * 90} for k in range(80)],  # ~8 KB, as a real one
        }
        return {"conversation_id": f"conv-{match_id.lower()}-report", "timeout": 10.0, "fields": fields}

    def reports_in(body: bytes) -> int:
        """How many reports one POST carried (a batch, or a plain call)."""
        calls = json.loads(body)
        return len(calls) if isinstance(calls, list) else 1

    async def acknowledged(referee: Referee, count: int) -> dict[str, tuple[str, str]]:
        """The LM's last word on each report, once it has had the word on ``count`` of them."""
        reports = referee.reports
        await asyncio.to_thread(wait_until, lambda: len(reports) == count, 30, f"{count} reports acknowledged")
        return {key: (reply["status"], reply["match_id"]) for key, reply in reports.items()}

    one = pending(keys[0])
    sent = make_message(
        "MATCH_RESULT_REPORT",
        "referee:REF01",
        conversation_id=one["conversation_id"],
        auth_token="referee-token",
        **one["fields"],
    )
    size = len(dumps(sent))  # one report as the referee sends it
    mcp.max_body_bytes = 2 * size + 200  # two reports and their JSON-RPC framing, not three
    caplog.set_level("INFO", logger="referee.agent")
    with serving(make_asgi_app(mcp)) as lm_server:
        # A referee stopped with eight reports undelivered: at its start they are all sent again,
        # queued together before the sender runs: one batch of 8, refused; 4, refused; then 2s.
        store = StateStore(tmp_path)
        seat = {"referee_id": "REF01", "auth_token": "referee-token", "league_manager_token": ScriptedLM.LM_TOKEN}
        store.save_identity({"league_url": lm_server.url, "league_id": "league_test", **seat})
        for key in keys[:8]:
            store.save_report(key, pending(key))
        referee = Referee(RefereeConfig(register=False, league_url=lm_server.url, state_dir=tmp_path))
        await referee.startup()
        try:
            expected = {key: ("RECORDED", key.partition(":")[2]) for key in keys}
            assert await acknowledged(referee, 8) == {key: expected[key] for key in keys[:8]}
            received = scripted_lm.received.of("report_match_result")
            assert sorted(r["match_id"] for r in received) == [k.partition(":")[2] for k in keys[:8]]  # each once
            posts = list(dict.fromkeys(scripted_lm.report_bodies))  # the bodies the LM took, in order
            assert [reports_in(body) for body in posts] == [2, 2, 2, 2]  # the cap lowered to two reports
            assert caplog.text.count("(HTTP 413)") == 2
            # Later reports start under the lowered cap: no 413 first. They go when the LM asks
            # for their matches again (start_match of a match played here), four at once.
            for key in keys[8:]:
                store.save_report(key, pending(key))
            nowhere = "http://127.0.0.1:9/mcp"  # no player is called: the matches were played
            start_match = referee.toolset.find_tool("start_match")
            assert start_match is not None
            calls = [
                referee.toolset.call(
                    start_match,
                    start_match_message(nowhere, nowhere, match_id=key.partition(":")[2]),
                    CallContext(method="start_match", dialect="direct"),
                )
                for key in keys[8:]
            ]
            for reply, is_error in await asyncio.gather(*calls):
                assert not is_error and (reply["status"], reply["reason"]) == ("ACCEPTED", "already finished")
            assert await acknowledged(referee, 12) == expected
            posts = list(dict.fromkeys(scripted_lm.report_bodies))
            assert [reports_in(body) for body in posts] == [2, 2, 2, 2, 2, 2]
            assert caplog.text.count("(HTTP 413)") == 2
        finally:
            await referee.shutdown()


def test_an_outcome_reached_after_the_match_deadline_is_told_to_no_one(referee, lm, players):
    """Stopped mid-match past its deadline (SIGSTOP): the LM has given the match away, so the
    players are not told this referee's outcome and the LM gets no report of it; the same match
    given again is played afresh."""
    scripted_lm, _ = lm
    a, url_a = players(ScriptedPlayer("P01"))
    b, url_b = players(ScriptedPlayer("P02"))
    late = start_match_message(url_a, url_b, deadline_at="2020-01-01T00:00:00Z")
    assert rpc(referee.url, "start_match", late)["status"] == "ACCEPTED"
    wait_until(lambda: referee.referee.matches["league_test:R1M1"].status == "ABANDONED")
    # Anything the abandoned outcome were told would go at once: the match given again, played
    # to its report, is the event it would have come before.
    again = start_match_message(url_a, url_b, deadline_at=deadline_in(60))
    assert rpc(referee.url, "start_match", again)["status"] == "ACCEPTED"
    a.received.wait_for("notify_match_result")
    b.received.wait_for("notify_match_result")
    referee.wait_told("the match told")
    assert len(a.received.of("notify_match_result")) == 1 and len(b.received.of("notify_match_result")) == 1
    assert len(scripted_lm.received.of("report_match_result")) == 1


def test_an_outcome_the_lm_does_not_record_is_told_to_no_one(referee, lm, players):
    """Finding 5: a referee stopped (SIGSTOP) between its outcome and GAME_OVER until the LM gave
    the match to another referee, which recorded its own. Its report is refused, and its players
    are never told this second outcome: the players are told only what the LM recorded."""
    scripted_lm, _ = lm
    scripted_lm.recorded_elsewhere.add("R1M1")
    a, url_a = players(ScriptedPlayer("P01"))
    b, url_b = players(ScriptedPlayer("P02"))
    assert rpc(referee.url, "start_match", start_match_message(url_a, url_b))["status"] == "ACCEPTED"
    wait_until(lambda: referee.referee.matches["league_test:R1M1"].status == "ABANDONED", what="R1M1 abandoned")
    assert referee.referee.reports["league_test:R1M1"]["error_code"] == ErrorCode.INVALID_GAME_STATE
    # Anything R1M1 told would have gone at once: a later match told is the event it would have come before.
    assert rpc(referee.url, "start_match", start_match_message(url_a, url_b, match_id="R1M2"))["status"] == "ACCEPTED"
    for player in (a, b):
        player.received.wait_for("notify_match_result")
    referee.wait_told("R1M2 told")
    assert (
        _match_ids(a.received.of("notify_match_result")) == _match_ids(b.received.of("notify_match_result")) == ["R1M2"]
    )


def test_a_silent_players_report_says_so_and_it_is_told_the_result_once(referee, lm, players):
    """Finding 6: a player that gives no answer at all loses technically; the report names it
    (``details.silent``) and GAME_OVER goes to it once, not with the retries."""
    scripted_lm, _ = lm
    _, url_a = players(ScriptedPlayer("P01"))
    gone = f"http://127.0.0.1:{free_port()}/mcp"  # nothing listens: no connection
    assert rpc(referee.url, "start_match", start_match_message(url_a, gone))["status"] == "ACCEPTED"
    (report,) = scripted_lm.received.wait_for("acknowledged")
    assert report["result"]["technical_loss"] == ["P02"]
    assert report["result"]["details"]["silent"] == ["P02"]
    # Told after the report: the referee's own log of the match has the deliveries.
    referee.wait_told("the match told")
    entries = referee.referee.matches["league_test:R1M1"].log.entries
    told = [e for e in entries if e["direction"] == "OUT" and e["message_type"] == "GAME_OVER"]
    to_silent = [e for e in told if e["peer"] == "P02"]
    assert len(to_silent) == 1 and to_silent[0]["attempt"] == 1, to_silent
