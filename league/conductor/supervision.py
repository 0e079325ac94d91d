"""Matches under way watched: overdue ones given back, assignments nobody is sending any more sent
again, and referees that hold matches pinged and asked about them.

``Supervisor`` is the conductor's collaborator for it; it gives back matches through ``dispatch``
(``release_match``) and has the ``Dispatcher`` send starts again and count referee failures.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta

from asgiref.sync import sync_to_async
from django.utils import timezone

from league.conductor.common import DB_OUTAGE, EMBEDDED_REFEREE, message_to, retry_policy
from league.conductor.dispatch import InPlay, in_play_matches, release_match, stale_assignments, start_call_budget
from league.conductor.dispatcher import Dispatcher
from league.conductor.shared import Shared
from league.models import League, Match, Referee
from leagueproto.client import CallFailed
from leagueproto.errors import ErrorCode

log = logging.getLogger("league.conductor")


@dataclass
class Supervisor:
    """Watching the matches in play, every ``every`` seconds per league."""

    shared: Shared
    dispatcher: Dispatcher
    every: float = 0.25  # seconds between looks at a league's matches in play
    # Seconds between pings of a referee that holds matches (None: the league's default timeout).
    health_interval: float | None = None
    # league pk → when its matches in play were last looked at (monotonic)
    _supervised: dict[int, float] = field(default_factory=dict, init=False, repr=False)
    # referee pk → when it was last pinged (monotonic)
    _last_ping: dict[int, float] = field(default_factory=dict, init=False, repr=False)
    # referee pk → the check of it under way
    _pings: dict[int, asyncio.Task] = field(default_factory=dict, init=False, repr=False)

    def due(self, league_pk: int, now: float) -> bool:
        """Whether the league's matches in play are to be looked at again (``every`` has passed)."""
        return now - self._supervised.get(league_pk, 0.0) >= self.every

    def tasks(self) -> list[asyncio.Task]:
        """The referee checks under way (for a caller that waits them out)."""
        return list(self._pings.values())

    async def supervise(self, league: League, in_play: list[InPlay] | None = None) -> None:
        """Every ``every`` s: reassign overdue matches; resend start_match for assignments
        nobody is sending (a dead conductor's); ask referees that hold matches about them
        (``_check_referee``). ``in_play``: the league's matches in play if the tick's survey read
        them (it does when supervision is due)."""
        now = time.monotonic()
        if in_play is None:
            if not self.due(league.pk, now):
                return
            in_play = await sync_to_async(in_play_matches)(league.pk)
        self._supervised[league.pk] = now
        wall = timezone.now()
        for row in in_play:
            if row.deadline_at is None or row.deadline_at >= wall:
                continue
            reason = f"no result from {row.referee_id or EMBEDDED_REFEREE} by the match deadline"
            if self.dispatcher.in_flight(row.pk) and row.referee_pk is None:
                continue  # our own embedded run: the runner's timeouts end it
            if await sync_to_async(release_match)(row.pk, row.referee_pk, row.attempt, reason):
                log.warning("match pk=%s: %s; reassigning", row.pk, reason)
                if row.referee_pk is not None:
                    await self.dispatcher.count_failure(league, row.referee_pk, reason, max(1.0, league.match_deadline))
        # A start_match call may take the whole retry budget; past that nobody is sending it.
        budget = start_call_budget(league) + 1.0
        cutoff = wall - timedelta(seconds=budget)
        if any(
            r.status == Match.Status.ASSIGNED
            and r.assigned_at
            and r.assigned_at < cutoff
            and not self.dispatcher.in_flight(r.pk)
            for r in in_play
        ):
            stale = await sync_to_async(stale_assignments)(
                league.pk, budget, self.dispatcher.matches_in_flight(), self.dispatcher.cooling()
            )
            self.dispatcher.send_starts(league, stale)
        interval = self.health_interval or max(1.0, league.default_timeout)
        held: dict[int, list[InPlay]] = {}
        for r in in_play:
            if (
                r.status == Match.Status.RUNNING
                and r.referee_pk is not None
                and r.referee_pk not in self._pings
                and now - self._last_ping.get(r.referee_pk, 0.0) >= interval
            ):
                held.setdefault(r.referee_pk, []).append(r)
        if not held:
            return
        referees = await sync_to_async(list)(Referee.objects.filter(pk__in=set(held)).select_related("league"))
        for referee in referees:
            self._last_ping[referee.pk] = now
            task = asyncio.create_task(self._check_referee(league, referee, held[referee.pk]))
            self._pings[referee.pk] = task
            task.add_done_callback(lambda _t, pk=referee.pk: self._pings.pop(pk, None))

    async def _check_referee(self, league: League, referee: Referee, rows: list[InPlay]) -> None:
        """Ping a referee that runs matches for us, then ask it about each (``get_match_state``).

        No answer to the ping: it is suspended until it answers one again (``Prober.probe``),
        and its matches stay with it until their deadline: it may have reached their outcome
        already (it saves it first, reports it once it is back, and tells the players once the
        LM recorded it), so giving them to another referee now would play them twice for
        nothing. Once it answers again, a match it does
        not know (E006: it was restarted before the outcome) is given back at once, with no
        failure counted, instead of waiting for its deadline.
        """
        client = self.shared.agents()
        policy = retry_policy(league)
        timeout = league.default_timeout
        try:
            try:
                ping = message_to(referee, "PING", league_id=league.league_id)
                await client.call(referee.endpoint, "ping", ping, timeout=timeout, policy=policy)
            except CallFailed as exc:
                reason = f"referee {referee.referee_id} unreachable: {exc}"
                log.warning("%s; suspended until it answers, its matches wait until their deadline", reason)
                await self.dispatcher.count_failure(league, referee.pk, reason, silent=True)
                return

            async def unknown(row: InPlay) -> bool:
                message = message_to(referee, "GET_MATCH_STATE", league_id=league.league_id, match_id=row.match_id)
                try:
                    answer = await client.call(referee.endpoint, "get_match_state", message, timeout=timeout)
                except CallFailed:
                    return False  # no verdict (a referee without the tool, a slow one): the deadline decides
                code = answer.reply.get("error_code") if answer.is_error else None
                return code == ErrorCode.MATCH_NOT_FOUND.value

            verdicts = await asyncio.gather(*(unknown(row) for row in rows))
            for row, lost in zip(rows, verdicts, strict=True):
                if not lost:
                    continue
                reason = f"referee {referee.referee_id} does not know match {row.match_id} (restarted?)"
                if await sync_to_async(release_match)(row.pk, referee.pk, row.attempt, reason):
                    log.warning("%s; giving it back at once", reason)
        except DB_OUTAGE as exc:
            log.debug("referee check of %s not recorded (database unavailable): %s", referee.referee_id, exc)
