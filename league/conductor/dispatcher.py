"""Matches handed to referees: claimed, START_MATCH sent per referee, the answers settled, what a
referee did not take given back, and referees that fail left alone for a while.

``Dispatcher`` is the conductor's collaborator for it; the database steps it takes are in
``dispatch`` (claims, settled starts, releases, referee failures) and ``embedded`` (the LM's
built-in referee).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from asgiref.sync import sync_to_async
from django.utils import timezone

from league.conductor.common import DB_OUTAGE, EMBEDDED_CAPACITY, Dispatch, retry_policy
from league.conductor.dispatch import (
    claim_matches,
    has_live_referee,
    is_accepted,
    referee_cooldown,
    referee_failed,
    release_match,
    settle_starts,
)
from league.conductor.embedded import claim_embedded, play_embedded
from league.conductor.shared import Shared
from league.models import League, Round
from leagueproto.client import CallFailed
from leagueproto.errors import ErrorCode

log = logging.getLogger("league.conductor")
SETTLE_TRIES = 3  # tries of the transaction that records a batch of start_match calls


@dataclass
class Dispatcher:
    """Starting matches, and which referees get none for now (they just failed)."""

    shared: Shared
    # Seconds a referee is left alone after a first failure (``referee_cooldown``), doubling.
    cooldown_base: float = 1.0
    # match pk → the task starting it (a referee's start_match batch) or playing it (embedded)
    _inflight: dict[int, asyncio.Task] = field(default_factory=dict, init=False, repr=False)
    # league pk → its start_match tasks
    _starting: dict[int, set[asyncio.Task]] = field(default_factory=dict, init=False, repr=False)
    # referee pk → monotonic time until which it gets no match
    _cooldown: dict[int, float] = field(default_factory=dict, init=False, repr=False)

    # -- what is under way -------------------------------------------------------------------
    def in_flight(self, match_pk: int) -> bool:
        """Whether this conductor is starting (or, embedded, playing) the match now."""
        return match_pk in self._inflight

    def _forget(self, pk: int, task: asyncio.Task | None) -> None:
        """The match is no longer being started (or played) by ``task``; if another task has
        taken it up since (it was given back and claimed again), it stays that task's."""
        if self._inflight.get(pk) is task:
            del self._inflight[pk]

    def _done(self, task: asyncio.Task, pks: list[int]) -> None:
        """``task`` is over: its matches are no longer being started by it."""
        for pk in pks:
            self._forget(pk, task)

    def matches_in_flight(self) -> list[int]:
        return list(self._inflight)

    def tasks(self) -> list[asyncio.Task]:
        """The tasks starting or playing matches (for a caller that waits them out)."""
        return list(self._inflight.values())

    async def starts_sent(self, league: League) -> None:
        """Wait for the league's start_match calls under way to be answered and recorded (a
        match can be played and reported before its start is)."""
        starting = self._starting.pop(league.pk, set())
        if starting:
            await asyncio.wait(starting)

    # -- referees that failed ----------------------------------------------------------------
    def cooling(self) -> list[int]:
        """Referees not to give matches to now (they just failed)."""
        now = time.monotonic()
        return [pk for pk, until in self._cooldown.items() if until > now]

    async def count_failure(
        self, league: League, referee_pk: int, reason: str, cooldown: float = 0.0, *, silent: bool = False
    ) -> None:
        """One failure of a referee; it gets no match for ``referee_cooldown`` (at least
        ``cooldown``). ``silent``: see ``referee_failed``."""
        _suspended, failures = await sync_to_async(partial(referee_failed, silent=silent))(referee_pk, reason)
        wait = max(cooldown, referee_cooldown(league, failures, self.cooldown_base))
        self._cooldown[referee_pk] = time.monotonic() + wait

    def referee_back(self, referee_pk: int) -> None:
        """The referee answers again (a probe let it back in): it may get matches at once."""
        self._cooldown.pop(referee_pk, None)

    # -- starting matches --------------------------------------------------------------------
    async def dispatch(self, league: League, rnd: Round) -> None:
        """Claim what the league's referees have room for in ``rnd`` and send it (the built-in
        referee's, for a league that asks for it and has no live referee)."""
        if league.embedded_referee and not await sync_to_async(has_live_referee)(league.pk):
            await self._dispatch_embedded(league, rnd)
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
            task = asyncio.create_task(self._start_matches(league, group))
            pks = [item.match_pk for item in group]
            for pk in pks:
                self._inflight[pk] = task
            task.add_done_callback(lambda t, pks=pks: self._done(t, pks))
            starting.add(task)
            task.add_done_callback(starting.discard)

    async def _start_matches(self, league: League, items: list[Dispatch]) -> None:
        """Send one referee's start_match calls, record them (``settle_starts``), and give back
        what it did not accept (``_referee_trouble``)."""
        client = self.shared.agents()
        policy = retry_policy(league)

        async def one(item: Dispatch) -> tuple[Dispatch, str, dict[str, Any] | None]:
            d = item.delivery
            try:
                result = await client.call(
                    d.endpoint, d.method, d.message, timeout=league.default_timeout, policy=policy
                )
            except CallFailed as exc:
                return item, exc.code.value, {"detail": str(exc), "maybe_delivered": exc.maybe_delivered}
            return item, "error" if result.is_error else "ok", result.reply

        sent_at = timezone.now()
        outcomes = await asyncio.gather(*(one(item) for item in items))
        settled = [(i, o, r if o in ("ok", "error") else None) for i, o, r in outcomes]
        for attempt in range(SETTLE_TRIES):
            try:
                await sync_to_async(settle_starts)(league, settled, sent_at)
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
        kept: list[tuple[Dispatch, str]] = []
        silent = False
        for item, outcome, reply in outcomes:
            if is_accepted(outcome, reply):
                continue
            if outcome not in ("ok", "error"):
                # No reply in time: the referee is there (it took the connection) but stopped or
                # cut off. A refused connection is a referee restarting: it cools down instead.
                silent = silent or outcome == ErrorCode.TIMEOUT_ERROR.value
                reason = f"start_match failed: {(reply or {}).get('detail', outcome)}"
                if (reply or {}).get("maybe_delivered") or item.sent_before:
                    # The referee may have it (a try, now or before, got through and no answer
                    # came back), and may have told its players an outcome: given to another
                    # referee, they could be told a second one. It stays with this referee, sent
                    # again until it answers (``stale_assignments``) or released at the deadline.
                    kept.append((item, reason))
                    continue
            else:
                reply = reply or {}
                why = reply.get("reason") or reply.get("error_description") or reply.get("status") or "rejected"
                reason = f"start_match not accepted: {why}"
            troubles.append((item, reason))
        for item, reason in kept:
            log.warning("match %s: referee %s: %s; it stays there", item.match_id, item.referee_id, reason)
        if troubles or kept:
            try:
                last, reason = (troubles or kept)[-1]
                await self._referee_trouble(league, last.referee_pk, troubles, reason, silent=silent)
            except DB_OUTAGE as exc:
                log.debug("start_match troubles not recorded (database unavailable): %s", exc)

    async def _referee_trouble(
        self, league: League, referee_pk: int, troubles: list[tuple[Dispatch, str]], last: str, *, silent: bool = False
    ) -> None:
        """A referee's batch of start_match calls went wrong: ``troubles`` go back to the pool and
        ``referee_pk`` counts one failure (one, however many matches the batch held: one referee
        down for a moment is not four failures; ``last``: its reason) and cools down before it
        gets another match. ``silent``: a call got no answer at all; the referee is suspended
        until it answers a ping (``referee_failed``). It cools down first, so a match given back
        is not claimed for it again at once."""
        await self.count_failure(league, referee_pk, last, silent=silent)
        for item, reason in troubles:
            log.warning("match %s: referee %s: %s", item.match_id, item.referee_id, reason)
            # No longer this task's before it is back in the pool: claimed again at once (for
            # another referee, while this batch is still releasing the rest), it must be sent at
            # once, not skipped as being started and left ASSIGNED until the stale-assignment
            # sweep, its round waiting.
            self._forget(item.match_pk, asyncio.current_task())
            await sync_to_async(release_match)(item.match_pk, item.referee_pk, item.attempt, reason)

    async def _dispatch_embedded(self, league: League, rnd: Round) -> None:
        """Claim what the built-in referee has room for and play each match in its own task."""
        client = self.shared.agents()
        free = EMBEDDED_CAPACITY - sum(1 for t in self._inflight.values() if not t.done())
        for match in await sync_to_async(claim_embedded)(league.pk, rnd.pk, free):
            task = asyncio.create_task(play_embedded(client, league, match))
            self._inflight[match.pk] = task
            task.add_done_callback(lambda t, pk=match.pk: self._forget(pk, t))
