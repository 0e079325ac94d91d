"""Telling the agents of a league the organiser ended: cancelled (``actions.cancel_league``) or
deleted before it was over (``actions.delete_league``), which send ``league_ended``; ``tell``
is its receiver (connected in league/apps.py). The messages are ``farewell_messages``
(league/conductor/notices.py); they go through the conductor's own ``Sender`` (each agent's
sender spelling, the league's timeouts and retries, the deliveries recorded), from a
thread of the process that made the change, once it is committed: the admin's request and the
``league`` command return at once, and a process exits only once its farewells are sent (the
thread is not a daemon)."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from django.db import connections

from league.actions.leagues import league_ended
from league.conductor.common import Delivery
from league.conductor.notices import farewell_messages
from league.conductor.sending import Sender
from league.conductor.shared import Shared
from league.endpoints import ConnectPolicy
from league.models import League
from leagueproto.client import AgentClient

log = logging.getLogger("league.conductor")


def connect() -> None:
    """Receive ``league_ended`` (once, however often called)."""
    league_ended.connect(tell, sender=League, dispatch_uid="league.conductor.farewell")


def tell(
    sender: type[League], *, league: League, league_status: str, reason: str, record: bool = True, **_: Any
) -> threading.Thread | None:
    """``league_ended``'s receiver: LEAGUE_COMPLETED with ``league_status`` and ``reason`` to the
    league's players and referees (``send``)."""
    return send(league, farewell_messages(league, league_status, reason), record=record)


def send(league: League, deliveries: list[Delivery], *, record: bool = True) -> threading.Thread | None:
    """Send ``deliveries`` to the league's agents from a new thread; ``record``: their outcomes
    go to the league's Event log (not for a league about to be deleted). The thread, or None
    when there is no one to tell."""
    if not deliveries:
        return None
    thread = threading.Thread(
        target=_run, args=(league, deliveries, record), name=f"farewell-{league.league_id}", daemon=False
    )
    thread.start()
    return thread


def _run(league: League, deliveries: list[Delivery], record: bool) -> None:
    try:
        asyncio.run(_send(league, deliveries, record))
    except Exception:  # a thread's exception would be printed and lost: log it with its cause
        log.exception("league %s: the end notice to its agents failed", league.league_id)
    finally:
        connections.close_all()


async def _send(league: League, deliveries: list[Delivery], record: bool) -> None:
    client = AgentClient(address_check=ConnectPolicy(league.pk))
    shared = Shared(client)
    # Every agent's answer is waited for here (nothing else waits on this thread).
    patience = (league.default_timeout + league.retry_delay) * (league.retries + 1) + 1.0
    sender = Sender(shared, patience=patience)
    try:
        if record:
            await sender.deliver(league, deliveries, league.default_timeout)
        else:
            await sender.send_in_order(league, [deliveries], league.default_timeout)
        await asyncio.gather(*shared.tasks(), return_exceptions=True)
    finally:
        await client.close()
    log.info("league %s: %d agent(s) told it is over", league.league_id, len(deliveries))
