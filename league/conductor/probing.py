"""Agents probed: those marked unreachable (players) or suspended (referees) pinged with backoff
until they answer and are let back in, the seats of a registering league pinged as they
register, and the players that never answered withdrawn before a league's schedule is drawn.

``Prober`` is the conductor's collaborator for it; the database steps it takes are in
``reachability``. An agent back is the ``Sender``'s to notify again (a player) or the
``Dispatcher``'s to give matches again (a referee).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from asgiref.sync import sync_to_async

from league import senders
from league.conductor.common import PROBE_FIRST, PROBE_MAX, message_to
from league.conductor.dispatch import referee_failed
from league.conductor.dispatcher import Dispatcher
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
from league.conductor.sending import Sender
from league.conductor.shared import Shared
from league.models import League, Player, Referee
from leagueproto.client import CallFailed

log = logging.getLogger("league.conductor")
# Seconds between probes of an agent that answers, while its league registers: the panel shows
# within this long that an agent which answered has stopped.
RECHECK_EVERY = 10.0
# Seconds a probe waits for an answer at most (a ping is answered at once by any live agent).
PROBE_TIMEOUT = 5.0

Agent = tuple[str, int]  # ("Player" or "Referee", pk): an agent as the prober keys it


def agent_id(agent: Player | Referee) -> str:
    return agent.referee_id if isinstance(agent, Referee) else agent.player_id


def key_of(agent: Player | Referee) -> Agent:
    return type(agent).__name__, agent.pk


@dataclass
class Prober:
    """Pinging agents: a league's agents to probe are read every ``every`` seconds at most."""

    shared: Shared
    sender: Sender
    dispatcher: Dispatcher
    every: float = 1.0  # seconds between reads of a league's agents to probe
    # agent → (when it is next pinged, the delay after that), while it is marked unreachable
    _probes: dict[Agent, tuple[float, float]] = field(default_factory=dict, init=False, repr=False)
    # league pk → when its agents to probe were last read (monotonic)
    _probed: dict[int, float] = field(default_factory=dict, init=False, repr=False)
    # agents being pinged now
    _pinging: set[Agent] = field(default_factory=set, init=False, repr=False)
    # league pk → agent → when it was last pinged as a seat of the registering league
    _seats: dict[int, dict[Agent, float]] = field(default_factory=dict, init=False, repr=False)

    # -- agents marked unreachable ---------------------------------------------------------
    async def probe(self, league: League, now: float) -> None:
        """Every ``every`` s, read the league's agents marked unreachable (players) or
        suspended by the conductor (referees) and ping those due, each with its own backoff
        (``PROBE_FIRST`` doubling to ``PROBE_MAX``). One that answers is let back in."""
        if now - self._probed.get(league.pk, 0.0) < self.every:
            return
        self._probed[league.pk] = now
        agents = await sync_to_async(unreachable_agents)(league.pk)
        # Players let back in elsewhere (a registration again, another conductor) are sent notices.
        self.sender.keep_gone(league.pk, (a.player_id for a in agents if isinstance(a, Player)))
        for agent in agents:
            key = key_of(agent)
            due, delay = self._probes.setdefault(key, (now + PROBE_FIRST, PROBE_FIRST))
            if due > now or key in self._pinging:
                continue
            self._probes[key] = (now + delay, min(PROBE_MAX, delay * 2))
            self._pinging.add(key)
            task = self.shared.background(self._probe_one(league, agent, key))
            task.add_done_callback(lambda _t, key=key: self._pinging.discard(key))
        known = {key_of(a) for a in agents}
        for key in [k for k in self._probes if k not in known]:
            del self._probes[key]  # restored (here or by another conductor), or removed

    async def _probe_one(self, league: League, agent: Player | Referee, key: Agent) -> None:
        """Ping an agent marked unreachable; one that answers is let back in (``restore_agent``)."""
        client = self.shared.agents()
        message = message_to(agent, "PING", league_id=league.league_id)
        try:
            await client.call(agent.endpoint, "ping", message, timeout=league.default_timeout)
        except CallFailed as exc:
            if unreachable_failure(exc):
                return
            # Any JSON-RPC answer (even "no such method") shows the agent is there again.
        if await sync_to_async(restore_agent)(agent):
            log.info("league %s: %s answers again; back in play", league.league_id, agent_id(agent))
            self._probes.pop(key, None)
            if isinstance(agent, Referee):
                self.dispatcher.referee_back(agent.pk)
            else:
                self.sender.answered(league.pk, agent.player_id)

    # -- seats of a registering league ---------------------------------------------------------
    async def probe_seats(self, league: League, now: float) -> None:
        """While a league registers, every ``every`` s: ping each agent not yet probed by
        this conductor at once and each that answers every ``RECHECK_EVERY`` s; one that does not
        answer is marked unreachable (a referee suspended) and left to ``probe``, which lets it
        back in when it answers. What each agent did is what the registration panel shows."""
        if now - self._probed.get(league.pk, 0.0) < self.every:
            return
        await self.probe(league, now)  # those marked unreachable (stamps ``_probed``)
        agents = await sync_to_async(seats_to_probe)(league.pk)
        seats = self._seats.setdefault(league.pk, {})
        for agent in agents:
            key = key_of(agent)
            # One that has never answered is pinged at once; one that has, RECHECK_EVERY after
            # this conductor first sees it.
            last = seats.setdefault(key, now if agent.answered_at else now - RECHECK_EVERY)
            if key in self._pinging or now - last < RECHECK_EVERY:
                continue
            seats[key] = now
            self._pinging.add(key)
            task = self.shared.background(self._probe_seat(league, agent))
            task.add_done_callback(lambda _t, key=key: self._pinging.discard(key))
        known = {key_of(a) for a in agents}
        for key in [k for k in seats if k not in known]:
            del seats[key]  # removed, or marked unreachable (``probe``'s now)

    async def _ping(self, league: League, agent: Player | Referee) -> CallFailed | None:
        """One ping, no retry; None when the agent answered (any JSON-RPC answer, even an error:
        an agent without a ``ping`` tool is there), else the failure. A player that refuses the
        ping for its sender ``league_manager`` is its first chance to learn the spelling it
        takes (``_ping_as_other_sender``; notices learn it the same way: ``Sender``)."""
        client = self.shared.agents()
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
            await self._ping_as_other_sender(league, agent, message, timeout)
        return None

    async def _ping_as_other_sender(
        self, league: League, player: Player, message: dict[str, Any], timeout: float
    ) -> None:
        """The ping once more as ``league_manager:LM01``; kept for the player when it gets past
        the sender check (any answer but a refusal naming the sender: an agent without a ``ping``
        tool answers "method not found" once the sender is one it takes)."""
        again = {**message, "sender": senders.ALTERNATE}
        try:
            result = await self.shared.agents().call(player.endpoint, "ping", again, timeout=timeout)
            taken = not (result.is_error and senders.refuses_sender(result.reply))
        except CallFailed as exc:
            taken = not unreachable_failure(exc) and not senders.refuses_sender(None, exc)
        if taken:
            learn = Player.objects.filter(pk=player.pk).update
            await sync_to_async(learn)(lm_sender=senders.ALTERNATE)
            log.info("league %s: %s takes the sender %s", league.league_id, player.player_id, senders.ALTERNATE)

    async def _probe_seat(self, league: League, agent: Player | Referee) -> None:
        """Ping a seat of a registering league: its first answer recorded, its silence marked."""
        failure = await self._ping(league, agent)
        if failure is None:
            if await sync_to_async(record_answer)(agent):
                log.info("league %s: %s answers", league.league_id, agent_id(agent))
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
        failures = await asyncio.gather(*(self._ping(league, p) for p in silent))
        for player, failure in zip(silent, failures, strict=True):
            if failure is None:
                await sync_to_async(restore_agent)(player)
                await sync_to_async(record_answer)(player)
            elif player.unreachable_since is None:
                await sync_to_async(mark_unreachable)(league.pk, player.player_id, f"does not answer a ping: {failure}")
        return await sync_to_async(withdraw_silent_players)(league.pk)
