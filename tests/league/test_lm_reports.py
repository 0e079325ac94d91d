"""report_match_result (docs/protocol.md, "Reporting a result"): recorded once, only from the assigned
referee, consistent scores."""

from __future__ import annotations

import asyncio
import copy
import itertools
from concurrent.futures import ThreadPoolExecutor

import pytest
from channels.layers import BaseChannelLayer
from django.test import override_settings

from league import actions
from league.events import events_of
from league.mcp import toolset
from league.mcp.reports import PendingReport, record_reports
from league.models import Event, Match, MatchResult, Player, Referee, Round
from leagueproto.client import AgentClient, CallFailed, CallResult
from leagueproto.jsonutil import dumps
from tests.league.lm_support import (
    assigned_match,
    call,
    log_for,
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
    invitation = next(entry for entry in result.log if entry["direction"] == "OUT")
    assert invitation["method"] == "handle_game_invitation"
    assert "auth_token" not in invitation["message"]  # the match token never reaches the database
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
    """A report of R1M1 (P01 against P02) with ``result`` and a log that bears it out."""
    report = win_report(ref)
    report["result"] = copy.deepcopy(report["result"]) | {"details": {}} | result
    report["match_log"] = log_for("P01", "P02", report["result"])
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


def _pending(report: dict) -> PendingReport:
    tool = toolset.find_tool("report_match_result")
    return PendingReport(tool, report, tool.model.model_validate(report), None)


class Dashboards(BaseChannelLayer):
    """A channel layer (as Redis's, groups in other processes) that lists every broadcast."""

    extensions = ["groups"]
    heard: list[tuple[str, dict]] = []  # (event, data), in order

    async def group_send(self, group: str, message: dict) -> None:
        self.heard.extend((item["event"], item["data"]) for item in events_of(message))


def test_a_batch_of_reports_gets_one_answer_each_and_writes_exactly_its_rows(lm_server, settings):
    """Reports recorded together (one transaction) are judged one by one, in order."""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": f"{__name__}.Dashboards"}}
    sent = Dashboards.heard
    league, ref, _ = _setup(lm_server, players=4)
    other = register_referee(lm_server, "ref2")
    assigned_match(league, a="P01", b="P02", match_id="R1M1")
    assigned_match(league, a="P03", b="P04", match_id="R1M2")
    referee = Referee.objects.get(league=league, referee_id="REF01")
    players = {p.player_id: p for p in Player.objects.filter(league=league)}
    actions.create_match(league, 2, players["P01"], players["P03"], match_id="R2M1", referee=referee)
    before = Event.objects.order_by("-id").values_list("id", flat=True).first()
    forged = win_report(ref, "R1M2", winner="P03", loser="P04")
    forged["auth_token"] = "not-a-token"
    batch = [
        win_report(ref),  # recorded
        win_report(ref),  # the same report again in the same batch: DUPLICATE
        win_report(ref, "R1M2", winner="P03", loser="P04"),  # recorded: the round's last match
        win_report(ref, "R9M9"),  # unknown match
        win_report(other, "R2M1", winner="P01", loser="P03"),  # not this referee's match
        win_report(ref, winner="P02", loser="P01"),  # conflicts with the first: logged
        forged,  # E012, nothing recorded
        win_report(ref, "R1M2", winner="P04", loser="P03"),  # conflicts with the third: logged
    ]
    sent.clear()  # the registrations' own
    answers = record_reports([_pending(report) for report in batch])
    # The dashboard hears of the two recorded matches, after the commit, the second closing the round.
    assert [(event, data["match_id"], data["round_played"]) for event, data in sent] == [
        ("match_finished", "R1M1", False),
        ("match_finished", "R1M2", True),
    ]
    assert "auth_token" not in str(sent)
    codes = [reply.get("status") if not is_error else reply["error_code"] for reply, is_error in answers]
    assert codes == ["RECORDED", "DUPLICATE", "RECORDED", "E006", "E015", "E015", "E012", "E015"]
    assert answers[4][0]["context"]["assigned_referee"] == "REF01"
    assert answers[5][0]["context"]["recorded_by"] == "REF01"
    assert [reply["conversation_id"] for reply, _ in answers] == [r["conversation_id"] for r in batch]

    results = {r.match.match_id: r for r in MatchResult.objects.select_related("match", "winner")}
    assert set(results) == {"R1M1", "R1M2"}
    assert (results["R1M1"].winner.player_id, results["R1M2"].winner.player_id) == ("P01", "P03")
    assert "auth_token" not in results["R1M1"].log[0]["message"]
    status = dict(Match.objects.filter(league=league).values_list("match_id", "status"))
    assert status == {"R1M1": "FINISHED", "R1M2": "FINISHED", "R2M1": "ASSIGNED"}
    assert Round.objects.get(league=league, number=1).status == Round.Status.PLAYED
    assert Round.objects.get(league=league, number=2).status == Round.Status.PENDING

    new = list(Event.objects.filter(id__gt=before).order_by("id"))
    kinds = [(e.direction, e.kind) for e in new]
    assert kinds.count(("IN", "MATCH_RESULT_REPORT")) == len(batch)
    assert sum(1 for d, _ in kinds if d == "OUT") == len(batch)
    assert kinds.count(("STATE", "match_finished")) == 2
    assert kinds.count(("STATE", "round_played")) == 1
    assert [e.match_id for e in new if e.kind == "report_conflict"] == ["R1M1", "R1M2"]
    assert all(e.league_id == league.pk for e in new)
    assert kinds.index(("STATE", "round_played")) < max(i for i, k in enumerate(kinds) if k[1] == "match_finished")


def test_a_referees_batch_of_reports_over_64_kib_is_taken_in_one_post(lm_server):
    """20 reports with logs of a real report's weight (~8 KB) in one JSON-RPC batch: one POST
    over 64 KiB, all recorded. An LM with a smaller MCP_MAX_BODY_BYTES refuses the whole batch
    with 413, which the referee's client reports as such (the referee then splits its batches)."""
    league, ref, _ = _setup(lm_server, players=7)
    pairs = list(itertools.combinations([f"P0{n}" for n in range(1, 8)], 2))[:20]
    reports = []
    for n, (a, b) in enumerate(pairs, start=1):
        assigned_match(league, a=a, b=b, match_id=f"R1M{n}")
        report = win_report(ref, f"R1M{n}", winner=a, loser=b)
        report["match_log"][0]["message"]["note"] = "x" * max(0, 8000 - len(dumps(report)))
        reports.append(report)
    assert len(dumps(reports)) > 64 * 1024

    async def send() -> list[CallResult | CallFailed]:
        client = AgentClient()
        try:
            return await client.call_batch(lm_server, [("report_match_result", r) for r in reports], timeout=30)
        finally:
            await client.close()

    with override_settings(MCP_MAX_BODY_BYTES=64 * 1024), pytest.raises(CallFailed) as refused:
        asyncio.run(send())
    assert refused.value.http_status == 413
    assert not MatchResult.objects.exists()
    outcomes = asyncio.run(send())
    assert [o.reply["status"] for o in outcomes if isinstance(o, CallResult)] == ["RECORDED"] * len(reports)
    assert MatchResult.objects.filter(league=league).count() == len(reports)


def test_concurrent_reports_each_get_their_own_answer(lm_server):
    league, ref, _ = _setup(lm_server, players=4)
    other = register_referee(lm_server, "ref2")
    pairs = [("P01", "P02"), ("P03", "P04"), ("P01", "P03"), ("P02", "P04"), ("P01", "P04"), ("P02", "P03")]
    for n, (a, b) in enumerate(pairs, start=1):
        assigned_match(league, a=a, b=b, match_id=f"R1M{n}")
    reports = [win_report(ref, f"R1M{n}", winner=a, loser=b) for n, (a, b) in enumerate(pairs, start=1)]
    reports += [
        win_report(ref, "R1M1", winner="P01", loser="P02"),  # duplicate
        win_report(ref, "R7M7"),  # unknown match
        win_report(other, "R1M2", winner="P03", loser="P04"),  # wrong referee
    ]
    with ThreadPoolExecutor(max_workers=len(reports)) as pool:
        replies = list(pool.map(lambda r: call(lm_server, "report_match_result", r), reports))
    answers = [r.get("error_code") or r["status"] for r in replies]
    # Which of the two R1M1 reports is recorded depends on arrival; the other is the duplicate.
    assert sorted([answers[0], answers[6]]) == ["DUPLICATE", "RECORDED"]
    assert answers[1:6] == ["RECORDED"] * 5 and answers[7:] == ["E006", "E015"]
    assert MatchResult.objects.filter(league=league).count() == len(pairs)
    assert Event.objects.filter(league=league, kind="match_finished").count() == len(pairs)
    assert Event.objects.filter(league=league, kind="round_played").count() == 1
    assert Event.objects.filter(league=league, direction="IN", kind="MATCH_RESULT_REPORT").count() == len(reports)
    assert Round.objects.get(league=league, number=1).status == Round.Status.PLAYED


def test_a_match_log_without_secrets_is_stored_as_it_was_sent(lm_server):
    league, ref, _ = _setup(lm_server)
    assigned_match(league)
    report = win_report(ref)
    for entry in report["match_log"]:
        entry["message"].pop("auth_token", None)
    entry["message"]["note"] = "naïve ✓"
    assert call(lm_server, "report_match_result", report)["status"] == "RECORDED"
    assert MatchResult.objects.get().log == report["match_log"]


def test_a_match_log_entry_that_is_not_an_object_is_refused(lm_server):
    league, ref, _ = _setup(lm_server)
    assigned_match(league)
    report = win_report(ref)
    report["match_log"].append("not an object")
    reply = call(lm_server, "report_match_result", report)
    assert reply["error_code"] == "E002" and "match_log" in str(reply), reply
    assert not MatchResult.objects.exists()


def test_a_match_log_of_objects_is_taken_as_parsed_not_copied():
    report = win_report({"referee_id": "REF01", "auth_token": "t", "league_id": "league_x"})
    tool = toolset.find_tool("report_match_result")
    assert tool.model.model_validate(report).match_log is report["match_log"]


def test_a_caller_gone_before_its_batch_failed_leaves_no_unread_error():
    """A referee that hangs up while its report's batch runs (its call timed out in a database
    outage) has its answer dropped, not left as an error no one reads (asyncio would log it)."""
    import asyncio
    import gc
    import threading

    from django.db import OperationalError

    from league.mcp import reports

    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def locked(batch: list) -> list:
        started.set()  # the report is in a batch now
        try:
            release.wait(5)
            raise OperationalError("database is locked")
        finally:
            finished.set()

    async def scenario() -> list:
        loop = asyncio.get_running_loop()
        unread: list = []
        loop.set_exception_handler(lambda _loop, context: unread.append(context))
        caller = asyncio.ensure_future(reports.ReportQueue(record=locked).submit(object()))  # type: ignore[arg-type]
        assert await asyncio.to_thread(started.wait, 5)
        caller.cancel()
        release.set()
        await asyncio.gather(caller, return_exceptions=True)
        assert await asyncio.to_thread(finished.wait, 5)
        for _ in range(20):  # the loop settles the finished batch
            await asyncio.sleep(0)
        gc.collect()  # an unread future's error is reported when it is collected
        return unread

    assert asyncio.run(scenario()) == []


def test_reports_started_together_are_recorded_in_one_batch():
    """The reports of one JSON-RPC batch start together (leagueproto's server gathers them): the
    queue records them in one transaction, the first one included."""
    import asyncio

    from league.mcp import reports

    batches: list[int] = []

    def record(batch: list) -> list:
        batches.append(len(batch))
        return [({"n": n}, False) for n in range(len(batch))]

    async def three() -> list:
        queue = reports.ReportQueue(record=record)
        return await asyncio.gather(*(queue.submit(object()) for _ in range(3)))  # type: ignore[arg-type]

    assert asyncio.run(three()) == [({"n": 0}, False), ({"n": 1}, False), ({"n": 2}, False)]
    assert batches == [3]
