"""Sending notifications: each agent gets its messages in order, agents concurrently, nobody
waits long for the slowest, and a player whose calls keep failing is marked unreachable.

``Sender`` is the conductor's collaborator for every notice (league/conductor/worker.py: round
boundaries, the league's end; league/conductor/farewell.py: a league ended by its organiser).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from asgiref.sync import sync_to_async

from league import senders
from league.conductor.common import UNREACHABLE_AFTER, Delivery, Outcome, retry_policy
from league.conductor.delivery_log import record_deliveries
from league.conductor.reachability import mark_unreachable, unreachable_failure
from league.conductor.shared import Shared
from league.models import League, Player
from leagueproto.client import CallFailed, CallResult, RetryPolicy

log = logging.getLogger("league.conductor")
T = TypeVar("T")


@dataclass
class Sender:
    """Notifications to agents, and what it learns of the players it sends to: a player whose
    calls keep failing is marked unreachable here and skipped until it answers a probe
    (``answered``, ``keep_gone``: league/conductor/probing.py)."""

    shared: Shared
    concurrency: int = 128  # notifications in flight at once
    # Seconds a round's notifications may hold up its matches: chains still going after that
    # (a player that does not answer, or answers slowly) go on in the background and their
    # players' matches start anyway (an invitation before the announcement is fine for players).
    patience: float = 0.5
    # (league pk, player id) → its calls that failed in a row
    _failing: dict[tuple[int, str], int] = field(default_factory=dict, init=False, repr=False)
    # league pk → its players marked unreachable here (their notices are skipped)
    _gone: dict[int, set[str]] = field(default_factory=dict, init=False, repr=False)

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
        after the other, in order; agents are served concurrently (at most ``concurrency``
        at once). Returns the outcomes, batch by batch (empty batches left out), unrecorded.

        Waits at most ``patience`` seconds for the slowest chains: a player that does not
        answer (each call waiting out its timeout and retries) must not hold up the matches of
        the others. Chains still going then finish in the background and are recorded when they
        end; the outcomes returned are those of the chains done. A player whose calls keep
        failing is marked unreachable (``_player_failed``) and the rest of its chain is skipped."""
        batches = [b for b in batches if b]
        if not batches:
            return []
        client = self.shared.agents()
        policy = retry_policy(league)
        gate = asyncio.Semaphore(self.concurrency)
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
                    d, result = await self._other_sender(league, d, timeout, policy)
                else:
                    refused = result.is_error and senders.refuses_sender(result.reply)
                    if refused and d.message["sender"] == senders.DEFAULT:
                        d, result = await self._other_sender(league, d, timeout, policy)
            except CallFailed as exc:
                log.warning("%s to %s failed: %s", d.message["message_type"], d.agent_id, exc)
                self._player_failed(league, d, exc)
                return d, exc.code.value, None
            if failing:
                failing.pop((league.pk, d.agent_id), None)
            return d, "error" if result.is_error else "ok", result.reply

        async def chain(i: int) -> list[Outcome]:
            async with gate:
                return [await one(batch[i]) for batch in batches]

        tasks = [asyncio.ensure_future(chain(i)) for i in range(len(batches[0]))]
        done, pending = await asyncio.wait(tasks, timeout=self.patience)
        if pending:
            late = [t for t in tasks if t in pending]
            log.info(
                "league %s: %d player(s) slow to take %s; not waiting for them",
                league.league_id,
                len(late),
                "/".join(b[0].message["message_type"] for b in batches),
            )
            self.shared.background(self._record_late(league, late, len(batches)))
        chains = [t.result() for t in tasks if t in done]
        return [[c[k] for c in chains] for k in range(len(batches))] if chains else []

    async def _other_sender(
        self, league: League, d: Delivery, timeout: float, policy: RetryPolicy
    ) -> tuple[Delivery, CallResult]:
        """The agent refused ``d`` for its sender ``league_manager``: the same message once more
        as ``league_manager:LM01``; the spelling that worked is kept for the agent (league/senders.py)."""
        again = Delivery(d.agent_id, d.endpoint, d.method, {**d.message, "sender": senders.ALTERNATE})
        learn = sync_to_async(Player.objects.filter(league_id=league.pk, player_id=d.agent_id).update)
        client = self.shared.agents()
        try:
            result = await client.call(d.endpoint, d.method, again.message, timeout=timeout, policy=policy)
        except CallFailed:
            await learn(lm_sender=senders.DEFAULT)  # no better with the other spelling
            raise
        learned = senders.DEFAULT if result.is_error else senders.ALTERNATE
        log.info("league %s: %s takes the sender %s", league.league_id, d.agent_id, learned)
        await learn(lm_sender=learned)
        return again, result

    async def _record_late(self, league: League, late: list[asyncio.Task], count: int) -> None:
        """Record the chains ``send_in_order`` stopped waiting for, once they are over."""
        chains = await asyncio.gather(*late)
        await sync_to_async(record_deliveries)(league, [[c[k] for c in chains] for k in range(count)])

    def _player_failed(self, league: League, d: Delivery, exc: CallFailed) -> None:
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
            self.shared.background(sync_to_async(mark_unreachable)(league.pk, d.agent_id, reason))

    def answered(self, league_pk: int, player_id: str) -> None:
        """The player answers again (a probe): its failures are forgotten and it is sent notices."""
        self._gone.get(league_pk, set()).discard(player_id)
        self._failing.pop((league_pk, player_id), None)

    def keep_gone(self, league_pk: int, unreachable: Iterable[str]) -> None:
        """Of the league's players marked unreachable here, only those still ``unreachable`` (as
        the database says) stay skipped: the others were let back in elsewhere (a registration
        again, another conductor)."""
        gone = self._gone.get(league_pk)
        if gone:
            gone.intersection_update(unreachable)
