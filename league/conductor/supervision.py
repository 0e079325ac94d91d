"""Matches under way: start_match sent per referee, overdue or forgotten matches given back,
referees pinged and asked about their matches, agents marked unreachable probed.

``Supervision`` is the second layer of the ``Conductor`` (league/conductor/worker.py declares
the fields it uses); the database steps it takes are in ``dispatch``, ``embedded`` and
``reachability``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta
from functools import partial
from typing import Any

from asgiref.sync import sync_to_async
from django.utils import timezone

from league import senders
from league.conductor.common import (
    DB_OUTAGE,
    EMBEDDED_CAPACITY,
    EMBEDDED_REFEREE,
    PROBE_FIRST,
    PROBE_MAX,
    Dispatch,
    message_to,
    retry_policy,
)
from league.conductor.dispatch import (
    InPlay,
    claim_matches,
    has_live_referee,
    in_play_matches,
    is_accepted,
    referee_cooldown,
    referee_failed,
    release_match,
    settle_starts,
    stale_assignments,
    start_call_budget,
)
from league.conductor.embedded import claim_embedded, play_embedded
from league.conductor.reachability import (
    mark_unreachable,
    never_answered,
    record_answer,
    relay_answered,
    restore_agent,
    seats_to_probe,
    unreachable_agents,
    unreachable_failure,
    withdraw_silent_players,
)
from league.conductor.sending import Sending
from league.models import League, Match, Player, Referee, Round
from leagueproto.client import CallFailed
from leagueproto.errors import ErrorCode

log = logging.getLogger("league.conductor")
# Seconds between probes of an agent that answers, while its league registers: the panel shows
# within this long that an agent which answered has stopped.
RECHECK_EVERY = 10.0
# Seconds a probe waits for an answer at most (a ping is answered at once by any live agent).
PROBE_TIMEOUT = 5.0
SETTLE_TRIES = 3  # tries of the transaction that records a batch of start_match calls


class Supervision(Sending):
    """Starting and watching matches, probing agents (the ``Conductor``'s fields below)."""

    poll: float
    cooldown_base: float
    health_interval: float | None
    supervise_every: float
    probe_every: float
    _inflight: dict[int, asyncio.Task]
    _starting: dict[int, set[asyncio.Task]]
    _cooldown: dict[int, float]
    _last_ping: dict[int, float]
    _pings: dict[int, asyncio.Task]
    _supervised: dict[int, float]
    _probes: dict[tuple[str, int], tuple[float, float]]
    _probed: dict[int, float]
    _pinging: set[tuple[str, int]]
    _seats: dict[int, dict[tuple[str, int], float]]

    # -- starting matches ----------------------------------------------------------------
    def cooling(self) -> list[int]:
        """Referees not to give matches to now (they just failed)."""
        now = time.monotonic()
        return [pk for pk, until in self._cooldown.items() if until > now]

    async def dispatch(self, league: League, rnd: Round) -> None:
        if league.embedded_referee and not await sync_to_async(has_live_referee)(league.pk):
            await self.dispatch_embedded(league, rnd)
            return
        self.send_starts(league, await sync_to_async(claim_matches)(league.pk, rnd.pk, self.cooling(), league))

    def send_starts(self, league: League, items: list[Dispatch]) -> None:
        """start_match for each item not already being sent: one task per referee, so a referee
        that does not answer never holds up another's matches."""
        by_referee: dict[int, list[Dispatch]] = {}
        for item in items:
            if item.match_pk not in self._inflight:
                by_referee.setdefault(item.referee_pk, []).append(item)
        starting = self._starting.setdefault(league.pk, set())
        for group in by_referee.values():
            task = asyncio.create_task(self.start_matches(league, group))
            pks = [item.match_pk for item in group]
            for pk in pks:
                self._inflight[pk] = task
            task.add_done_callback(lambda _t, pks=pks: [self._inflight.pop(pk, None) for pk in pks])
            starting.add(task)
            task.add_done_callback(starting.discard)

    async def start_matches(self, league: League, items: list[Dispatch]) -> None:
        """Send one referee's start_match calls, record them (``settle_starts``), and give back
        what it did not accept (``referee_trouble``)."""
        client = self.client
        assert client is not None
        policy = retry_policy(league)

        async def one(item: Dispatch) -> tuple[Dispatch, str, dict[str, Any] | None]:
            d = item.delivery
            try:
                result = await client.call(
                    d.endpoint, d.method, d.message, timeout=league.default_timeout, policy=policy
                )
            except CallFailed as exc:
                return item, exc.code.value, {"detail": str(exc)}
            return item, "error" if result.is_error else "ok", result.reply

        outcomes = await asyncio.gather(*(one(item) for item in items))
        settled = [(i, o, r if o in ("ok", "error") else None) for i, o, r in outcomes]
        for attempt in range(SETTLE_TRIES):
            try:
                await sync_to_async(settle_starts)(league, settled)
                break
            except DB_OUTAGE as exc:
                # A deadlock or serialization failure (PostgreSQL rolls one transaction back) is
                # over at once: the same transaction again records the batch. An outage lasts:
                # the matches stay ASSIGNED and start_match is sent again (idempotent) once the
                # database is back (``stale_assignments``), and recorded then.
                if attempt + 1 == SETTLE_TRIES:
                    log.warning("start_match outcomes of %d matches not recorded: %s", len(items), exc)
                    return
                await asyncio.sleep(0.05 * (attempt + 1))
        troubles = []
        silent = False
        for item, outcome, reply in outcomes:
            if is_accepted(outcome, reply):
                continue
            if outcome not in ("ok", "error"):
                # No reply in time: the referee is there (it took the connection) but stopped or
                # cut off. A refused connection is a referee restarting: it cools down instead.
                silent = silent or outcome == ErrorCode.TIMEOUT_ERROR.value
                reason = f"start_match failed: {(reply or {}).get('detail', outcome)}"
            else:
                reply = reply or {}
                why = reply.get("reason") or reply.get("error_description") or reply.get("status") or "rejected"
                reason = f"start_match not accepted: {why}"
            troubles.append((item, reason))
        if troubles:
            try:
                await self.referee_trouble(league, troubles, silent=silent)
            except DB_OUTAGE as exc:
                log.debug("start_match troubles not recorded (database unavailable): %s", exc)

    async def referee_trouble(
        self, league: League, troubles: list[tuple[Dispatch, str]], *, silent: bool = False
    ) -> None:
        """A referee's batch of start_match calls went wrong: the matches go back to the pool and
        the referee counts one failure (one, however many matches the batch held: one referee
        down for a moment is not four failures) and cools down before it gets another match.
        ``silent``: a call got no answer at all; the referee is suspended until it answers a
        ping (``referee_failed``)."""
        for item, reason in troubles:
            log.warning("match %s: referee %s: %s", item.match_id, item.referee_id, reason)
            await sync_to_async(release_match)(item.match_pk, item.referee_pk, item.attempt, reason)
        item, reason = troubles[-1]
        await self.count_failure(league, item.referee_pk, reason, silent=silent)

    async def count_failure(
        self, league: League, referee_pk: int, reason: str, cooldown: float = 0.0, *, silent: bool = False
    ) -> None:
        """One failure of a referee; it gets no match for ``referee_cooldown`` (at least ``cooldown``)."""
        _suspended, failures = await sync_to_async(partial(referee_failed, silent=silent))(referee_pk, reason)
        wait = max(cooldown, referee_cooldown(league, failures, max(self.poll, self.cooldown_base)))
        self._cooldown[referee_pk] = time.monotonic() + wait

    async def dispatch_embedded(self, league: League, rnd: Round) -> None:
        """Claim what the built-in referee has room for and play each match in its own task."""
        client = self.client
        assert client is not None
        free = EMBEDDED_CAPACITY - sum(1 for t in self._inflight.values() if not t.done())
        for match in await sync_to_async(claim_embedded)(league.pk, rnd.pk, free):
            task = asyncio.create_task(play_embedded(client, league, match))
            self._inflight[match.pk] = task
            task.add_done_callback(lambda _t, pk=match.pk: self._inflight.pop(pk, None))

    # -- watching matches ----------------------------------------------------------------
    async def supervise(self, league: League, in_play: list[InPlay] | None = None) -> None:
        """Every ``supervise_every`` s: reassign overdue matches; resend start_match for assignments
        nobody is sending (a dead conductor's); ask referees that hold matches about them
        (``check_referee``). ``in_play``: the league's matches in play if the tick's survey read
        them (it does when supervision is due)."""
        now = time.monotonic()
        if in_play is None:
            if now - self._supervised.get(league.pk, 0.0) < self.supervise_every:
                return
            in_play = await sync_to_async(in_play_matches)(league.pk)
        self._supervised[league.pk] = now
        wall = timezone.now()
        for row in in_play:
            if row.deadline_at is None or row.deadline_at >= wall:
                continue
            reason = f"no result from {row.referee_id or EMBEDDED_REFEREE} by the match deadline"
            if row.pk in self._inflight and row.referee_pk is None:
                continue  # our own embedded run: the runner's timeouts end it
            if await sync_to_async(release_match)(row.pk, row.referee_pk, row.attempt, reason):
                log.warning("match pk=%s: %s; reassigning", row.pk, reason)
                if row.referee_pk is not None:
                    await self.count_failure(league, row.referee_pk, reason, max(1.0, league.match_deadline))
        # A start_match call may take the whole retry budget; past that nobody is sending it.
        budget = start_call_budget(league) + 1.0
        cutoff = wall - timedelta(seconds=budget)
        if any(
            r.status == Match.Status.ASSIGNED
            and r.assigned_at
            and r.assigned_at < cutoff
            and r.pk not in self._inflight
            for r in in_play
        ):
            self.send_starts(league, await sync_to_async(stale_assignments)(league.pk, budget, list(self._inflight)))
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
            task = asyncio.create_task(self.check_referee(league, referee, held[referee.pk]))
            self._pings[referee.pk] = task
            task.add_done_callback(lambda _t, pk=referee.pk: self._pings.pop(pk, None))

    async def check_referee(self, league: League, referee: Referee, rows: list[InPlay]) -> None:
        """Ping a referee that runs matches for us, then ask it about each (``get_match_state``).

        No answer to the ping: it is suspended until it answers one again (``probe``), and its
        matches stay with it until their deadline: it may have told
        their players an outcome already (it saves it first, and reports it once it is back), so
        giving them to another referee now could tell them a second one. Once it answers again,
        a match it does not know (E006: it was restarted before the outcome) is given back at
        once, with no failure counted, instead of waiting for its deadline.
        """
        client = self.client
        assert client is not None
        policy = retry_policy(league)
        timeout = league.default_timeout
        try:
            try:
                ping = message_to(referee, "PING", league_id=league.league_id)
                await client.call(referee.endpoint, "ping", ping, timeout=timeout, policy=policy)
            except CallFailed as exc:
                reason = f"referee {referee.referee_id} unreachable: {exc}"
                log.warning("%s; suspended until it answers, its matches wait until their deadline", reason)
                await self.count_failure(league, referee.pk, reason, silent=True)
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

    # -- agents marked unreachable ---------------------------------------------------------
    async def probe(self, league: League, now: float) -> None:
        """Every ``probe_every`` s, read the league's agents marked unreachable (players) or
        suspended by the conductor (referees) and ping those due, each with its own backoff
        (``PROBE_FIRST`` doubling to ``PROBE_MAX``). One that answers is let back in."""
        if now - self._probed.get(league.pk, 0.0) < self.probe_every:
            return
        self._probed[league.pk] = now
        agents = await sync_to_async(unreachable_agents)(league.pk)
        gone = self._gone.get(league.pk)
        if gone:  # players let back in elsewhere (a registration again, another conductor)
            gone.intersection_update(a.player_id for a in agents if isinstance(a, Player))
        for agent in agents:
            key = (type(agent).__name__, agent.pk)
            due, delay = self._probes.setdefault(key, (now + PROBE_FIRST, PROBE_FIRST))
            if due > now or key in self._pinging:
                continue
            self._probes[key] = (now + delay, min(PROBE_MAX, delay * 2))
            self._pinging.add(key)
            task = self.background(self.probe_one(league, agent, key))
            task.add_done_callback(lambda _t, key=key: self._pinging.discard(key))
        known = {(type(a).__name__, a.pk) for a in agents}
        for key in [k for k in self._probes if k not in known]:
            del self._probes[key]  # restored (here or by another conductor), or removed

    async def probe_one(self, league: League, agent: Player | Referee, key: tuple[str, int]) -> None:
        client = self.client
        assert client is not None
        message = message_to(agent, "PING", league_id=league.league_id)
        try:
            await client.call(agent.endpoint, "ping", message, timeout=league.default_timeout)
        except CallFailed as exc:
            if unreachable_failure(exc):
                return
            # Any JSON-RPC answer (even "no such method") shows the agent is there again.
        if await sync_to_async(restore_agent)(agent):
            agent_id = agent.referee_id if isinstance(agent, Referee) else agent.player_id
            log.info("league %s: %s answers again; back in play", league.league_id, agent_id)
            self._probes.pop(key, None)
            self._gone.get(league.pk, set()).discard(agent_id)
            self._failing.pop((league.pk, agent_id), None)
            if isinstance(agent, Referee):
                self._cooldown.pop(agent.pk, None)

    # -- seats of a registering league ---------------------------------------------------------
    async def probe_seats(self, league: League, now: float) -> None:
        """While a league registers, every ``probe_every`` s: ping each agent not yet probed by
        this conductor at once and each that answers every ``RECHECK_EVERY`` s; one that does not
        answer is marked unreachable (a referee suspended) and left to ``probe``, which lets it
        back in when it answers. What each agent did is what the registration panel shows."""
        if now - self._probed.get(league.pk, 0.0) < self.probe_every:
            return
        await self.probe(league, now)  # those marked unreachable (stamps ``_probed``)
        agents = await sync_to_async(seats_to_probe)(league.pk)
        seats = self._seats.setdefault(league.pk, {})
        for agent in agents:
            key = (type(agent).__name__, agent.pk)
            # One that has never answered is pinged at once; one that has, RECHECK_EVERY after
            # this conductor first sees it.
            last = seats.setdefault(key, now if agent.answered_at else now - RECHECK_EVERY)
            if key in self._pinging or now - last < RECHECK_EVERY:
                continue
            seats[key] = now
            self._pinging.add(key)
            task = self.background(self.probe_seat(league, agent))
            task.add_done_callback(lambda _t, key=key: self._pinging.discard(key))
        known = {(type(a).__name__, a.pk) for a in agents}
        for key in [k for k in seats if k not in known]:
            del seats[key]  # removed, or marked unreachable (``probe``'s now)

    async def ping(self, league: League, agent: Player | Referee) -> CallFailed | None:
        """One ping, no retry; None when the agent answered (any JSON-RPC answer, even an error:
        an agent without a ``ping`` tool is there), else the failure. A player that refuses the
        ping for its sender ``league_manager`` is its first chance to learn the spelling it
        takes (``ping_as_other_sender``; notices learn it the same way: ``other_sender``)."""
        client = self.client
        assert client is not None
        message = message_to(agent, "PING", league_id=league.league_id)
        timeout = min(PROBE_TIMEOUT, league.default_timeout)
        try:
            result = await client.call(agent.endpoint, "ping", message, timeout=timeout)
            refused = result.is_error and senders.refuses_sender(result.reply)
        except CallFailed as exc:
            if unreachable_failure(exc):
                return exc
            refused = senders.refuses_sender(None, exc)
        if refused and isinstance(agent, Player) and message["sender"] == senders.DEFAULT:
            await self.ping_as_other_sender(league, agent, message, timeout)
        return None

    async def ping_as_other_sender(
        self, league: League, player: Player, message: dict[str, Any], timeout: float
    ) -> None:
        """The ping once more as ``league_manager:LM01``; kept for the player when it gets past
        the sender check (any answer but a refusal naming the sender: an agent without a ``ping``
        tool answers "method not found" once the sender is one it takes)."""
        assert self.client is not None
        again = {**message, "sender": senders.ALTERNATE}
        try:
            result = await self.client.call(player.endpoint, "ping", again, timeout=timeout)
            taken = not (result.is_error and senders.refuses_sender(result.reply))
        except CallFailed as exc:
            taken = not unreachable_failure(exc) and not senders.refuses_sender(None, exc)
        if taken:
            learn = Player.objects.filter(pk=player.pk).update
            await sync_to_async(learn)(lm_sender=senders.ALTERNATE)
            log.info("league %s: %s takes the sender %s", league.league_id, player.player_id, senders.ALTERNATE)

    async def probe_seat(self, league: League, agent: Player | Referee) -> None:
        failure = await self.ping(league, agent)
        if failure is None:
            if await sync_to_async(record_answer)(agent):
                log.info("league %s: %s answers", league.league_id, self.agent_id(agent))
            return
        reason = f"does not answer a ping at {agent.endpoint}: {failure}"
        if isinstance(agent, Referee):
            await sync_to_async(partial(referee_failed, silent=True))(agent.pk, f"referee {agent.referee_id} {reason}")
        elif await sync_to_async(mark_unreachable)(league.pk, agent.player_id, reason):
            log.warning("league %s: player %s %s", league.league_id, agent.player_id, reason)

    async def probe_before_draw(self, league: League) -> list[str]:
        """A READY league, right before its schedule is drawn: the players that have never
        answered are pinged once more, at once (a registration a moment ago has had no probe
        yet), relay players with a socket count as answered, and those still silent are
        withdrawn (``withdraw_silent_players``). The ids withdrawn."""
        self._seats.pop(league.pk, None)  # registration is over: no more rounds of pings
        await sync_to_async(relay_answered)(league.pk)
        silent = await sync_to_async(never_answered)(league.pk)
        failures = await asyncio.gather(*(self.ping(league, p) for p in silent))
        for player, failure in zip(silent, failures, strict=True):
            if failure is None:
                await sync_to_async(restore_agent)(player)
                await sync_to_async(record_answer)(player)
            elif player.unreachable_since is None:
                await sync_to_async(mark_unreachable)(league.pk, player.player_id, f"does not answer a ping: {failure}")
        return await sync_to_async(withdraw_silent_players)(league.pk)

    @staticmethod
    def agent_id(agent: Player | Referee) -> str:
        return agent.referee_id if isinstance(agent, Referee) else agent.player_id
