"""Reports: ``report_match_result`` calls that arrive together are authenticated, recorded
(``actions.record_results``) and logged as one batch, in one transaction (group commit)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from league import actions
from league.auth import Identity, authenticate_many
from league.events import append_events
from league.mcp.database import GroupCommit, each_on_its_own_if_need_be
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


class ReportQueue(GroupCommit[PendingReport, tuple[dict[str, Any], bool]]):
    """Group commit for reports (``GroupCommit``). Each report keeps its own answer:
    ``record_reports`` judges them one by one in arrival order."""

    def __init__(self, record: Callable[[list[PendingReport]], list[Any]] | None = None) -> None:
        """``record`` records a batch and answers each of its reports (``record_reports``)."""
        super().__init__(record or record_reports)


def record_reports(reports: list[PendingReport]) -> list[tuple[dict[str, Any], bool] | Exception]:
    """Authenticate, record and log a batch of reports in one transaction: each report's
    ``(reply, is_error)``. Should the batch fail as a whole (a database error), each report is
    tried again on its own, so one report's failure is its own."""
    return each_on_its_own_if_need_be(_record_reports, reports)


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
