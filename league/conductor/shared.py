"""What the conductor's collaborators share: the client they call agents with, and the work that
runs beside the ticks. One ``Shared`` is made per ``Conductor`` and handed to each collaborator
that needs it (league/conductor/worker.py wires them)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from league.conductor.common import DB_OUTAGE
from leagueproto.client import AgentClient

log = logging.getLogger("league.conductor")


@dataclass
class Shared:
    """The agents' client and the background tasks of one conductor."""

    # Set before the first call (``Conductor.run`` opens one unless it was given one).
    client: AgentClient | None = None
    _background: set[asyncio.Task] = field(default_factory=set, init=False, repr=False)

    def agents(self) -> AgentClient:
        """The client to call agents with; set by then (a call before ``run`` is a bug)."""
        assert self.client is not None, "no agent client yet: Conductor.run sets one"
        return self.client

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

    def tasks(self) -> list[asyncio.Task]:
        """The background tasks still running (for a caller that waits them out)."""
        return list(self._background)
