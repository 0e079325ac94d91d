"""Reports: ``report_match_result`` calls that arrive together are authenticated, recorded
(``actions.record_results``) and logged as one batch, in one transaction (group commit)."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from league import actions
from league.auth import Identity, authenticate_many
from league.events import append_events
from league.mcp.database import database_job
from league.mcp.exchange import exchange_rows
from league.mcp.messages import MatchResultReport
from league.mcp.toolset import toolset
from leagueproto.errors import LeagueError
from leagueproto.tools import Tool

REPORT_ROLE = "referee"  # who may report: the referee the match is assigned to (actions.record_results)


@dataclass(frozen=True)
class PendingReport:
    """A MATCH_RESULT_REPORT that passed the envelope and model checks, waiting for its batch."""

    tool: Tool
    arguments: dict[str, Any]
    message: MatchResultReport
    bearer: str | None


class ReportQueue:
    """Group commit for reports: the reports that arrive while a batch is being recorded go
    together in the next one, one transaction for them all.

    Each report keeps its own answer: ``record_reports`` judges them one by one in arrival order.
    The first report to find the queue idle takes everything queued and runs it; the others wait
    on the lock and find their answer ready (or lead the next batch). One queue per event loop.
    """

    _queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, ReportQueue] = weakref.WeakKeyDictionary()

    def __init__(self, record: Callable[[list[PendingReport]], list[Any]] | None = None) -> None:
        """``record`` records a batch and answers each of its reports (``record_reports``)."""
        self._record = record
        self._pending: list[tuple[PendingReport, asyncio.Future]] = []
        self._lock = asyncio.Lock()

    @classmethod
    def current(cls) -> ReportQueue:
        loop = asyncio.get_running_loop()
        queue = cls._queues.get(loop)
        if queue is None:
            queue = cls._queues[loop] = cls()
        return queue

    async def submit(self, report: PendingReport) -> tuple[dict[str, Any], bool]:
        entry = (report, asyncio.get_running_loop().create_future())
        self._pending.append(entry)
        try:
            # One turn of the loop first: the other reports of the same JSON-RPC batch, started
            # together, are queued by then and go in this report's transaction.
            await asyncio.sleep(0)
            async with self._lock:
                if not entry[1].done():
                    batch, self._pending = self._pending, []
                    job = asyncio.ensure_future(database_job(self._record or record_reports, [r for r, _ in batch]))
                    job.add_done_callback(lambda done: _settle(batch, done))
                    # Waited for, not awaited: were this caller to go away, the batch would still run
                    # and answer the others; its outcome (or error) is read from the future below.
                    await asyncio.wait({job})
        except asyncio.CancelledError:
            if entry in self._pending:
                self._pending.remove(entry)  # not taken by a batch: it will never run
            # Taken by a batch that runs on: no one will read this report's answer (or error).
            entry[1].cancel()
            raise
        return entry[1].result()


def _settle(batch: list[tuple[PendingReport, asyncio.Future]], job: asyncio.Future) -> None:
    """Hand each report of a finished batch its answer (or the batch's exception)."""
    error = None if job.cancelled() else job.exception()
    for n, (_, future) in enumerate(batch):
        if future.done():
            continue
        if job.cancelled():
            future.cancel()
        elif error is not None:
            future.set_exception(error)
        elif isinstance(job.result()[n], BaseException):
            future.set_exception(job.result()[n])
        else:
            future.set_result(job.result()[n])


def record_reports(reports: list[PendingReport]) -> list[tuple[dict[str, Any], bool] | Exception]:
    """Authenticate, record and log a batch of reports in one transaction: each report's
    ``(reply, is_error)``. Should the batch fail as a whole (a database error), each report is
    tried again on its own, so one report's failure is its own."""
    try:
        return _record_reports(reports)
    except Exception:
        if len(reports) == 1:
            raise
    outcomes: list[tuple[dict[str, Any], bool] | Exception] = []
    for report in reports:
        try:
            outcomes.extend(_record_reports([report]))
        except Exception as exc:  # this report's own failure: its caller gets a -32603
            outcomes.append(exc)
    return outcomes


def _record_reports(reports: list[PendingReport]) -> list[tuple[dict[str, Any], bool]]:
    with transaction.atomic():
        identities = authenticate_many(REPORT_ROLE, [(report.arguments, report.bearer) for report in reports])
        accepted = [(n, identity) for n, identity in enumerate(identities) if isinstance(identity, Identity)]
        recorded, state_rows = actions.record_results(
            [
                actions.Report(
                    identity.agent,
                    reports[n].message.match_id,
                    reports[n].message.result.model_dump(),
                    reports[n].message.match_log,
                )
                for n, identity in accepted
            ]
        )
        outcomes: list[Identity | LeagueError | actions.Recorded] = list(identities)
        for (n, _), outcome in zip(accepted, recorded, strict=True):
            outcomes[n] = outcome
        # The state rows (match_finished, round_played, report_conflict) come first, as when
        # each report logged its exchange after its own transaction.
        rows = state_rows
        replies = []
        for report, identity, outcome in zip(reports, identities, outcomes, strict=True):
            msg = report.message
            if isinstance(outcome, LeagueError):
                reply, is_error = toolset.error_reply(outcome, report.arguments, report.tool), True
            else:
                league_id = identity.league.league_id
                reply = toolset.reply(
                    msg, "MATCH_RESULT_ACK", league_id=league_id, match_id=msg.match_id, status=outcome.status
                )
                is_error = False
            known = identity if isinstance(identity, Identity) else None
            rows.extend(exchange_rows(report.tool, report.arguments, reply, known))
            replies.append((reply, is_error))
        append_events(rows)
    return replies
