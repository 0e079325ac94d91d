"""Sending notifications: each player gets its messages in order, players concurrently, nobody
waits long for the slowest, and a player whose calls keep failing is marked unreachable.

``Sending`` is the first layer of the ``Conductor`` (league/conductor/worker.py declares the
fields it uses), with ``background`` for work that runs beside the ticks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from asgiref.sync import sync_to_async

from league import senders
from league.conductor.common import DB_OUTAGE, UNREACHABLE_AFTER, Delivery, Outcome, retry_policy
from league.conductor.delivery_log import record_deliveries
from league.conductor.reachability import mark_unreachable, unreachable_failure
from league.models import League, Player
from leagueproto.client import AgentClient, CallFailed, CallResult, RetryPolicy

log = logging.getLogger("league.conductor")
T = TypeVar("T")


class Sending:
    """Notifications to players (the ``Conductor``'s fields below are what it uses)."""

    client: AgentClient | None
    notify_concurrency: int
    notify_patience: float
    _failing: dict[tuple[int, str], int]
    _gone: dict[int, set[str]]

    _background: set[asyncio.Task]

    def background(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task:
        """Run ``coro`` beside the ticks; a database outage in it is the tick's to report."""

        async def guarded() -> None:
            try:
                await coro
            except DB_OUTAGE as exc:
                log.debug("background work lost to a database outage: %s", exc)

        task = asyncio.ensure_future(guarded())
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def deliver(
        self, league: League, deliveries: list[Delivery], timeout: float, then: Callable[[], T] | None = None
    ) -> T | None:
        """Send concurrently; failures are logged and recorded, never raised. ``then``: see
        ``deliver_in_order``."""
        return await self.deliver_in_order(league, [deliveries], timeout, then)

    async def deliver_in_order(
        self, league: League, batches: list[list[Delivery]], timeout: float, then: Callable[[], T] | None = None
    ) -> T | None:
        """``send_in_order``, then the outcomes recorded (``record_deliveries``: one insert).

        ``then``: a database step to run once everything is sent and recorded (the transition the
        deliveries complete), in the same trip to the database thread; its result is returned."""
        outcomes = await self.send_in_order(league, batches, timeout)

        def record() -> T | None:
            if outcomes:
                record_deliveries(league, outcomes)
            return then() if then is not None else None

        return await sync_to_async(record)()

    async def send_in_order(self, league: League, batches: list[list[Delivery]], timeout: float) -> list[list[Outcome]]:
        """``batches[k][i]`` is the k-th message for agent i: each agent gets its messages one
        after the other, in order; agents are served concurrently (at most ``notify_concurrency``
        at once). Returns the outcomes, batch by batch (empty batches left out), unrecorded.

        Waits at most ``notify_patience`` seconds for the slowest chains: a player that does not
        answer (each call waiting out its timeout and retries) must not hold up the matches of
        the others. Chains still going then finish in the background and are recorded when they
        end; the outcomes returned are those of the chains done. A player whose calls keep
        failing is marked unreachable (``player_failed``) and the rest of its chain is skipped."""
        batches = [b for b in batches if b]
        if not batches:
            return []
        client = self.client
        assert client is not None
        policy = retry_policy(league)
        gate = asyncio.Semaphore(self.notify_concurrency)
        gone = self._gone.setdefault(league.pk, set())
        failing = self._failing

        async def one(d: Delivery) -> Outcome:
            if d.agent_id in gone:
                return d, "skipped", None  # marked unreachable since this chain began
            try:
                try:
                    result = await client.call(d.endpoint, d.method, d.message, timeout=timeout, policy=policy)
                except CallFailed as exc:
                    if not (d.message["sender"] == senders.DEFAULT and senders.refuses_sender(None, exc)):
                        raise
                    d, result = await self.other_sender(league, d, timeout, policy)
                else:
                    refused = result.is_error and senders.refuses_sender(result.reply)
                    if refused and d.message["sender"] == senders.DEFAULT:
                        d, result = await self.other_sender(league, d, timeout, policy)
            except CallFailed as exc:
                log.warning("%s to %s failed: %s", d.message["message_type"], d.agent_id, exc)
                self.player_failed(league, d, exc)
                return d, exc.code.value, None
            if failing:
                failing.pop((league.pk, d.agent_id), None)
            return d, "error" if result.is_error else "ok", result.reply

        async def chain(i: int) -> list[Outcome]:
            async with gate:
                return [await one(batch[i]) for batch in batches]

        tasks = [asyncio.ensure_future(chain(i)) for i in range(len(batches[0]))]
        done, pending = await asyncio.wait(tasks, timeout=self.notify_patience)
        if pending:
            late = [t for t in tasks if t in pending]
            log.info(
                "league %s: %d player(s) slow to take %s; not waiting for them",
                league.league_id,
                len(late),
                "/".join(b[0].message["message_type"] for b in batches),
            )
            self.background(self.record_late(league, late, len(batches)))
        chains = [t.result() for t in tasks if t in done]
        return [[c[k] for c in chains] for k in range(len(batches))] if chains else []

    async def other_sender(
        self, league: League, d: Delivery, timeout: float, policy: RetryPolicy
    ) -> tuple[Delivery, CallResult]:
        """The agent refused ``d`` for its sender ``league_manager``: the same message once more
        as ``league_manager:LM01``; the spelling that worked is kept for the agent (league/senders.py)."""
        assert self.client is not None
        again = Delivery(d.agent_id, d.endpoint, d.method, {**d.message, "sender": senders.ALTERNATE})
        learn = sync_to_async(Player.objects.filter(league_id=league.pk, player_id=d.agent_id).update)
        try:
            result = await self.client.call(d.endpoint, d.method, again.message, timeout=timeout, policy=policy)
        except CallFailed:
            await learn(lm_sender=senders.DEFAULT)  # no better with the other spelling
            raise
        learned = senders.DEFAULT if result.is_error else senders.ALTERNATE
        log.info("league %s: %s takes the sender %s", league.league_id, d.agent_id, learned)
        await learn(lm_sender=learned)
        return again, result

    async def record_late(self, league: League, late: list[asyncio.Task], count: int) -> None:
        """Record the chains ``send_in_order`` stopped waiting for, once they are over."""
        chains = await asyncio.gather(*late)
        await sync_to_async(record_deliveries)(league, [[c[k] for c in chains] for k in range(count)])

    def player_failed(self, league: League, d: Delivery, exc: CallFailed) -> None:
        """A notification to a player failed; at ``UNREACHABLE_AFTER`` in a row it is marked
        unreachable: its remaining notifications are skipped and its matches decided at once."""
        if not unreachable_failure(exc) or not d.agent_id.startswith("P"):  # players only (P01…), not REF01
            return
        key = (league.pk, d.agent_id)
        self._failing[key] = failures = self._failing.get(key, 0) + 1
        gone = self._gone.setdefault(league.pk, set())
        if failures >= UNREACHABLE_AFTER and d.agent_id not in gone:
            gone.add(d.agent_id)
            reason = f"{failures} calls in a row failed, the last ({d.message['message_type']}): {exc}"
            log.warning("league %s: player %s unreachable: %s", league.league_id, d.agent_id, reason)
            self.background(sync_to_async(mark_unreachable)(league.pk, d.agent_id, reason))
