"""The live dashboard's websocket: one group per league (contract 6).

Thin on purpose: join the league's group, send a snapshot on connect so the page is current,
then forward every ``league.event`` as it comes. The ORM runs in ``database_sync_to_async``.
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from league.api import readmodel


def group_name(league_id: str) -> str:
    return f"league_{league_id}"


class LeagueConsumer(AsyncJsonWebsocketConsumer):
    """ws/leagues/<league_id>/: {"type": "snapshot", "data": …} first, then {"type": "event", …}."""

    group: str | None = None

    async def connect(self) -> None:
        league_id = self.scope["url_route"]["kwargs"]["league_id"]
        snapshot = await database_sync_to_async(readmodel.snapshot)(league_id)
        if snapshot is None:
            await self.close(code=4404)
            return
        self.group = group_name(league_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.send_json({"type": "snapshot", "data": snapshot})

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        # The only thing a viewer may ask for is a fresh snapshot (e.g. after a hidden tab wakes).
        if isinstance(content, dict) and content.get("type") == "snapshot":
            snapshot = await database_sync_to_async(readmodel.snapshot)(self.scope["url_route"]["kwargs"]["league_id"])
            await self.send_json({"type": "snapshot", "data": snapshot})

    async def league_event(self, message: dict[str, Any]) -> None:
        await self.send_json({"type": "event", "event": message.get("event"), "data": message.get("data") or {}})
