"""The conductor's loop: ``manage.py runleague`` runs one ``Conductor`` until it is stopped.

Per league, each ``tick`` does the next due step (the transitions are in ``transitions``):

- REGISTERING, window closed: READY when ``min_players`` registered; READY: schedule, RUNNING.
- RUNNING, current round PENDING: ROUND_ANNOUNCEMENT to every player (``Sender``), round
  ANNOUNCED, and its first matches claimed and sent to referees (``Dispatcher``).
- ANNOUNCED: more matches claimed as referees free up; matches overdue, of a referee that
  stopped answering, or unknown to their referee go back to the pool (``Supervisor``).
- PLAYED (``actions.record_results`` recorded the round's last result; a tick reads the
  round's status): a Swiss or knockout league's next round drawn (``draw_next_round``),
  standings and ROUND_COMPLETED to every player, round COMPLETED, and the next round announced
  in the same breath (``finish_round``).
- last round COMPLETED: LEAGUE_COMPLETED to every player and referee; league COMPLETED.

Agents marked unreachable are probed and let back in when they answer (``Prober``), and an
arena is driven by its own steps (``ArenaDriver``). The ``Conductor`` keeps the loop and wires
these collaborators; what several of them use (the agents' client, the background tasks) is
one ``Shared`` object handed to each.

A database outage is waited out (``run``): everything the conductor knows is in the database,
so it starts the next tick from what it reads there.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass
from functools import partial

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections, connection, connections, transaction

from league.conductor.arena import ArenaDriver
from league.conductor.common import DB_OUTAGE, EMBEDDED_CAPACITY
from league.conductor.dispatch import InPlay, in_play_matches, referee_capacity
from league.conductor.dispatcher import Dispatcher
from league.conductor.notices import league_end_messages, round_boundary
from league.conductor.probing import Prober
from league.conductor.sending import Sender
from league.conductor.shared import Shared
from league.conductor.supervision import Supervisor
from league.conductor.transitions import (
    NextRound,
    RoundProgress,
    advance_round,
    announce_round,
    check_registration,
    complete_league,
    create_schedule,
    draw_next_round,
    extend_deadlines,
    mark_round_completed,
    next_round,
    notices_sent,
    round_progress,
    working_leagues,
)
from league.endpoints import ConnectPolicy
from league.models import League, Round
from leagueproto.client import AgentClient

log = logging.getLogger("league.conductor")


# Seconds added to the deadlines of the matches in play after an outage, besides its length:
# the outage is seen when a write fails, which may be a while after it began (reads can go on),
# and the referees' reports held back by it need a moment to come in.
RESUME_GRACE = 10.0


def database_writable() -> None:
    """Raise the database's error unless a write transaction can begin now. A bare ``SELECT 1``
    inside a transaction is the plainest probe: SQLite's IMMEDIATE transactions take the write
    lock at BEGIN (a locked file raises here); elsewhere it is one round trip."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT 1")


@dataclass
class Survey:
    """What one tick reads, in one trip to the database thread."""

    leagues: list[League]
    progress: dict[int, RoundProgress]  # round pk → ``round_progress`` (rounds being played)
    in_play: dict[int, list[InPlay]]  # league pk → ``in_play_matches`` (leagues due for supervision)
    capacity: dict[int, int]  # league pk → ``referee_capacity`` (the same leagues)


class Conductor:
    """Runs every league in progress (or just ``league_id``). One per process and event loop.

    A tick reads the leagues in progress and, for a round being played, its status and how many
    of its matches wait or are in play (every ``supervise_every`` seconds also its matches in play
    and its referees' capacity), all in one trip to the database thread (``survey``). A round
    found PLAYED goes straight on to its standings, completion and the next announcement.

    Its collaborators: ``sender`` (notices), ``dispatcher`` (matches to referees),
    ``supervisor`` (matches under way), ``prober`` (agents that stopped answering) and
    ``arena`` (an arena's steps), all sharing ``shared``.
    """

    def __init__(
        self,
        league_id: str | None = None,  # None: every league
        *,
        poll: float | None = None,  # seconds between ticks (None: the CONDUCTOR_POLL setting)
        client: AgentClient | None = None,  # None: ``run`` opens its own and closes it as it returns
        supervise_every: float = 0.25,  # seconds between reads of a league's matches in play and capacity
        health_interval: float | None = None,  # seconds between referee pings (None: league default)
        notify_concurrency: int = 128,  # notifications in flight at once
        notify_patience: float = 0.5,  # seconds a round's notifications may hold up its matches
        probe_every: float = 1.0,  # seconds between reads of the agents to probe, per league
        cooldown_base: float = 1.0,  # seconds a referee is left alone after a first failure (at least poll)
        reconnect_every: float = 30.0,  # seconds between checks that the DB connection is still good
        arena_pair_every: float = 0.05,  # seconds between pairing steps of one arena
        sender: Sender | None = None,  # the notices' Sender, with its Shared (None: one of notify_*)
    ) -> None:
        self.league_id = league_id
        self.poll = settings.CONDUCTOR_POLL if poll is None else poll
        self.supervise_every = supervise_every
        self.reconnect_every = reconnect_every
        self.shared = sender.shared if sender is not None else Shared()
        if client is not None:
            self.shared.client = client
        self.sender = sender if sender is not None else Sender(self.shared, notify_concurrency, notify_patience)
        self.dispatcher = Dispatcher(self.shared, max(self.poll, cooldown_base))
        self.supervisor = Supervisor(self.shared, self.dispatcher, supervise_every, health_interval)
        self.prober = Prober(self.shared, self.sender, self.dispatcher, probe_every)
        self.arena = ArenaDriver(self.prober, self.supervisor, self.dispatcher, arena_pair_every)
        self._rounds: dict[int, Round] = {}  # league pk → the round being played
        self._capacity: dict[int, tuple[float, int]] = {}  # league pk → (when read, capacity)
        self._checked_connection = 0.0  # monotonic time the database connection was last checked
        self._status: dict[int, str] = {}  # league pk → its status as last logged
        self._no_referee: set[int] = set()  # leagues in play logged as having no live referee
        self._paused: set[int] = set()  # leagues last seen PAUSED, out of _status
        self._outage_since: float | None = None  # monotonic time the database became unavailable

    async def run(self, *, once: bool = False, until_done: bool = False) -> None:
        """Tick every ``poll`` seconds; ``once``: one tick; ``until_done``: until no league is in progress."""
        own_client = self.shared.client is None
        if own_client:
            # Its own client re-checks each address as it connects (DNS rebinding).
            self.shared.client = AgentClient(address_check=ConnectPolicy())
        log.info(
            "conductor started (pid %d, database %s, %s)",
            os.getpid(),
            connection.vendor,
            f"league {self.league_id}" if self.league_id else "every league",
        )
        delay = 0.0
        try:
            while True:
                try:
                    if self._outage_since is not None:
                        # Reads may work while writes do not (a locked SQLite file): the outage
                        # is over when a write transaction can begin, not at the first read.
                        await sync_to_async(database_writable)()
                        # Deadlines do not run out while the database is away (the referees
                        # could not report): the matches in play get the time back first.
                        away = time.monotonic() - self._outage_since
                        await sync_to_async(extend_deadlines)(self.league_id, away + RESUME_GRACE)
                        self.database_up()
                    busy = await self.tick()
                except DB_OUTAGE as exc:
                    # The database is down or locked: wait and try again, with backoff, for as long
                    # as it takes.
                    delay = min(5.0, max(self.poll, delay * 2 or 0.1))
                    await self.database_down(exc)
                    await asyncio.sleep(delay)
                    continue
                delay = 0.0
                if once or (until_done and not busy):
                    break
                await asyncio.sleep(self.poll)
            await self.drain()
        finally:
            if own_client:
                await self.shared.agents().close()
                self.shared.client = None
            await sync_to_async(connections.close_all)()

    async def drain(self) -> None:
        """Wait for the work under way beside the ticks: starts, referee checks, notices, probes."""
        tasks = [*self.dispatcher.tasks(), *self.supervisor.tasks(), *self.shared.tasks()]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def database_down(self, exc: Exception) -> None:
        """Log an outage once (not every retry), forget what was read before it, and drop the
        broken connection so that the next try opens a new one."""
        if self._outage_since is None:
            self._outage_since = time.monotonic()
            log.warning("database unavailable (%s: %s); retrying until it is back", type(exc).__name__, exc)
        self._rounds.clear()
        self._capacity.clear()
        try:
            await sync_to_async(connections.close_all)()
        except Exception:  # closing a dead connection may fail too; the next query reconnects
            log.debug("closing the database connection failed", exc_info=True)

    def database_up(self) -> None:
        if self._outage_since is not None:
            log.warning("database available again after %.1f s; carrying on", time.monotonic() - self._outage_since)
            self._outage_since = None

    async def tick(self) -> bool:
        """One pass over the leagues in progress; True while any is still in progress."""
        now = time.monotonic()
        if now - self._checked_connection >= self.reconnect_every:
            # A long-running worker outlives DB restarts; checked now and then, not per tick
            # (with CONN_MAX_AGE 0 every check opens a new connection).
            self._checked_connection = now
            await sync_to_async(close_old_connections)()
        rounds = {league_pk: rnd.pk for league_pk, rnd in self._rounds.items()}
        due = {pk for pk in rounds if self.supervisor.due(pk, now)}
        survey = await sync_to_async(self.survey)(rounds, due)
        await self.log_changes(survey.leagues)
        for league in survey.leagues:
            try:
                await self.step(league, survey)
            except DB_OUTAGE:
                raise  # an outage, not this league's fault: ``run`` waits it out
            except Exception:
                log.exception("conductor step failed for league %s", league.league_id)
                self._rounds.pop(league.pk, None)
                self._checked_connection = 0.0
        return bool(survey.leagues)

    async def log_changes(self, leagues: list[League]) -> None:
        """One line per league state change this conductor sees (its first sight of a league
        included), and one when a league in play has no live referee (and when it has one again)."""
        seen = {league.pk: league for league in leagues}
        for league in leagues:
            self.note_status(league.pk, league.league_id, league.status)
        left = [pk for pk in self._status if pk not in seen]
        if left:
            # Out of the leagues in progress: completed, cancelled, deleted or paused. Read once,
            # then forgotten; a paused one is remembered as paused only (not read again each tick),
            # so that its resumption is logged as "PAUSED -> RUNNING".
            statuses = League.objects.filter(pk__in=left).values_list("pk", "league_id", "status")
            for pk, league_id, status in await sync_to_async(list)(statuses):
                self.note_status(pk, league_id, status)
                if status == League.Status.PAUSED:
                    self._paused.add(pk)
            for pk in left:
                self._status.pop(pk, None)
                self._no_referee.discard(pk)

    def note_status(self, league_pk: int, league_id: str, status: str) -> None:
        """Log a league's status when it is not the one last logged: the transitions this
        conductor makes as it makes them, those made elsewhere (an admin) when a tick reads them."""
        before = self._status.get(league_pk)
        if before is None and league_pk in self._paused:
            self._paused.discard(league_pk)
            before = League.Status.PAUSED
        if before != status:
            self._status[league_pk] = status
            log.info("league %s: %s", league_id, f"{before} -> {status}" if before else status)

    def referee_presence(self, league: League, capacity: int) -> None:
        """Log once when a league in play has no live referee (its matches wait), once when it has."""
        if league.embedded_referee or league.status != League.Status.RUNNING:
            return
        if capacity <= 0 and league.pk not in self._no_referee:
            self._no_referee.add(league.pk)
            log.warning("league %s is running but has no live referee: its matches wait for one", league.league_id)
        elif capacity > 0 and league.pk in self._no_referee:
            self._no_referee.discard(league.pk)
            log.info("league %s has a live referee again", league.league_id)

    def survey(self, rounds: dict[int, int], due: set[int]) -> Survey:
        """The tick's reads: the leagues in progress; for ``rounds`` (league pk → round pk being
        played) their progress; for the leagues in ``due`` their matches in play and capacity."""
        working = {league.pk: league for league in working_leagues(self.league_id)}
        return Survey(
            list(working.values()),
            {rnd: round_progress(rnd) for league_pk, rnd in rounds.items() if league_pk in working},
            {pk: in_play_matches(pk) for pk in due if pk in working},
            {pk: referee_capacity(pk) for pk in due if pk in working},
        )

    async def step(self, league: League, survey: Survey | None = None) -> None:
        """The league's next due step (see the module's docstring)."""
        if league.is_arena:
            await self.arena.step(league, self.capacity)
            return
        if league.status == League.Status.REGISTERING:
            # Each agent is pinged as it registers: the panel shows who answers, and a seat
            # that never answers plays no match (``Prober.probe_before_draw``).
            await self.prober.probe_seats(league, time.monotonic())
            if await sync_to_async(check_registration)(league.pk) is None:
                return
            league = await sync_to_async(League.objects.get)(pk=league.pk)
            self.note_status(league.pk, league.league_id, league.status)
        if league.status == League.Status.READY:
            await self.prober.probe_before_draw(league)
            await sync_to_async(create_schedule)(league.pk)
            league = await sync_to_async(League.objects.get)(pk=league.pk)
            self.note_status(league.pk, league.league_id, league.status)
        if league.status != League.Status.RUNNING:
            self._rounds.pop(league.pk, None)
            return
        # Between rounds too (a pause, an announcement): an agent back is back for the next round.
        await self.prober.probe(league, time.monotonic())
        if survey is not None and league.pk in survey.capacity:
            self._set_capacity(league, survey.capacity[league.pk])
        # The next round as read (or announced) in the trip that completed the previous one.
        prepared: NextRound | None = None
        while True:  # a finished round goes on to the next without waiting for a tick
            rnd = self._rounds.get(league.pk)
            progress: RoundProgress | None = None
            in_play: list[InPlay] | None = None
            if rnd is None:
                upcoming = prepared or await sync_to_async(next_round)(league)
                prepared = None
                if upcoming.owed is not None:
                    await self.resend_boundary(league, upcoming.owed)
                rnd = upcoming.rnd
                if rnd is None:
                    await self.finish_league(league)
                    return
                if rnd.status == Round.Status.PENDING:
                    if upcoming.deliveries is None:
                        return  # the round_pause is not over
                    upcoming = await self.sender.deliver(
                        league,
                        upcoming.deliveries,
                        league.default_timeout,
                        then=partial(announce_round, league, rnd.pk, upcoming.matches, self.dispatcher.cooling()),
                    )
                    rnd = upcoming.rnd
                if rnd.status == Round.Status.ANNOUNCED:
                    self._rounds[league.pk] = rnd
                    if upcoming.claimed or upcoming.started:
                        # Claimed as the round was announced: the rest (supervision, more claims
                        # as referees free up) is the next tick's.
                        self.dispatcher.send_starts(league, upcoming.claimed)
                        return
            elif survey is not None:
                progress = survey.progress.get(rnd.pk)
                in_play = survey.in_play.get(league.pk)
            survey = None  # read before this step changed anything: only for its first round
            if progress is None:
                progress = await sync_to_async(round_progress)(rnd.pk)
            if progress.status == Round.Status.ANNOUNCED:
                await self.supervisor.supervise(league, in_play)
                if progress.scheduled and progress.in_play < await self.capacity(league):
                    await self.dispatcher.dispatch(league, rnd)
                return
            self._rounds.pop(league.pk, None)
            if progress.status == Round.Status.PENDING:
                return  # gone, or put back by hand: the next tick reads the league afresh
            prepared = await self.finish_round(league, rnd)

    def _set_capacity(self, league: League, value: int) -> int:
        self.referee_presence(league, value)
        if league.embedded_referee and value == 0:
            value = EMBEDDED_CAPACITY
        self._capacity[league.pk] = (time.monotonic(), value)
        return value

    async def capacity(self, league: League) -> int:
        """The league's referee capacity (re-read every ``supervise_every``); embedded mode has its own."""
        when, value = self._capacity.get(league.pk, (0.0, 0))
        if time.monotonic() - when >= self.supervise_every:
            value = self._set_capacity(league, await sync_to_async(referee_capacity)(league.pk))
        return value

    # -- a round's end and the league's ------------------------------------------------------
    async def finish_round(self, league: League, rnd: Round) -> NextRound:
        """Standings and ROUND_COMPLETED to every player, round COMPLETED; returns ``next_round``.

        With no ``round_pause`` each player's chain goes on with the next round's
        ROUND_ANNOUNCEMENT, and while the chains are sent the database thread marks this round
        COMPLETED with its notices owed, the next ANNOUNCED and claims its first matches
        (``advance_round``, one transaction), off the path from one round to the next. The
        claimed matches start once every chain is over (or ``notify_patience`` has passed);
        then one trip records the deliveries (``notices_sent``) while they play. A conductor
        killed before ``advance_round`` commits sends the whole boundary again (at least once,
        as any notification); one killed after finds the notices owed and sends them again
        first (``resend_boundary``). Otherwise (the last round, or a pause) the round is
        COMPLETED once its notices are sent and recorded."""
        if league.draws_rounds:
            # The next round exists before the boundary is built: ROUND_COMPLETED names it and
            # its announcement goes out with the boundary, as in a round-robin.
            await sync_to_async(draw_next_round)(league.pk)
        boundary = await sync_to_async(round_boundary)(league, rnd)
        upcoming = boundary.upcoming
        if upcoming is None:

            def complete() -> NextRound:
                mark_round_completed(rnd.pk, boundary.table)
                return next_round(league)

            return await self.sender.deliver_in_order(league, boundary.batches, league.default_timeout, then=complete)
        cooling = self.dispatcher.cooling()
        transition = asyncio.ensure_future(
            sync_to_async(advance_round)(league, rnd.pk, boundary.table, upcoming.pk, boundary.matches, cooling)
        )
        try:
            outcomes = await self.sender.send_in_order(league, boundary.batches, league.default_timeout)
        finally:
            nxt = await transition
        self.dispatcher.send_starts(league, nxt.claimed)
        await sync_to_async(notices_sent)(league, rnd.pk, outcomes)
        return NextRound(nxt.rnd, started=bool(nxt.claimed))

    async def resend_boundary(self, league: League, rnd: Round) -> None:
        """Send the owed boundary of ``rnd`` again (a conductor stopped before recording it):
        its standings, ROUND_COMPLETED and the next round's ROUND_ANNOUNCEMENT to every player,
        at least once, then record them and clear the debt."""
        log.info("league %s: sending the notices of round %s again", league.league_id, rnd.number)
        boundary = await sync_to_async(round_boundary)(league, rnd, again=True)
        outcomes = await self.sender.send_in_order(league, boundary.batches, league.default_timeout)
        await sync_to_async(notices_sent)(league, rnd.pk, outcomes)

    async def finish_league(self, league: League) -> None:
        # The start_match calls of its last matches recorded first (a match can be played and
        # reported before its start is): a completed league's Event log holds all it was sent.
        await self.dispatcher.starts_sent(league)
        deliveries, champion, table = await sync_to_async(league_end_messages)(league)
        await self.sender.deliver(league, deliveries, league.default_timeout)
        if await sync_to_async(complete_league)(league.pk, champion, table):
            self.note_status(league.pk, league.league_id, League.Status.COMPLETED)
