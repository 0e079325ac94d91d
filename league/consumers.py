"""The dashboard's websockets: one group per league, and the league list.

Thin on purpose. ``LeagueConsumer`` joins the league's group, sends a snapshot on connect so the
page is current, then forwards every ``league.event`` as it comes. ``LeagueListConsumer`` (the
home page) joins the group of every league and ``LEAGUES_GROUP``, where a league's creation or
deletion is announced (``announce_leagues``), and joins each new league's group as it appears.
The ORM runs in ``database_sync_to_async``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.db import transaction

from league import events
from league.api import readmodel
from league.events import LEAGUES_GROUP, group_name
from league.models import League, league_id_problem


def announce_leagues(change: str, league_id: str) -> None:
    """Tell league lists that a league was created or deleted, once the transaction commits.
    (Every other change of a league reaches them through the league's own group.)"""
    transaction.on_commit(partial(events.send, [(LEAGUES_GROUP, change, {"league_id": league_id})]))


class LeagueConsumer(AsyncJsonWebsocketConsumer):
    """ws/leagues/<league_id>/: {"type": "snapshot", "data": …} first, then {"type": "event", …}."""

    group: str | None = None

    async def connect(self) -> None:
        league_id = self.scope["url_route"]["kwargs"]["league_id"]
        snapshot = await database_sync_to_async(readmodel.snapshot)(league_id)
        if snapshot is None:
            await self.close(code=4404)
            return
        if league_id_problem(league_id) is None:  # channel groups cannot carry other names
            self.group = group_name(league_id)
            await self.channel_layer.group_add(self.group, self.channel_name)
            events.joined(self.group)
        await self.accept()
        await self.send_json({"type": "snapshot", "data": snapshot})

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)
            events.left(self.group)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        # The only thing a viewer may ask for is a fresh snapshot (e.g. after a hidden tab wakes).
        if isinstance(content, dict) and content.get("type") == "snapshot":
            snapshot = await database_sync_to_async(readmodel.snapshot)(self.scope["url_route"]["kwargs"]["league_id"])
            await self.send_json({"type": "snapshot", "data": snapshot})

    async def league_event(self, message: dict[str, Any]) -> None:
        await self.send_json({"type": "event", "event": message.get("event"), "data": message.get("data") or {}})


def _league_ids() -> list[str]:
    ids = League.objects.values_list("league_id", flat=True)
    return [league_id for league_id in ids if league_id_problem(league_id) is None]


class LeagueListConsumer(AsyncJsonWebsocketConsumer):
    """ws/leagues/: {"type": "event", "event": …, "data": {"league_id": …}} for any league."""

    groups_joined: set[str]

    async def connect(self) -> None:
        self.groups_joined = set()
        await self.accept()
        await self._join([LEAGUES_GROUP, *map(group_name, await database_sync_to_async(_league_ids)())])

    async def _join(self, groups: list[str]) -> None:
        for group in groups:
            if group not in self.groups_joined:
                await self.channel_layer.group_add(group, self.channel_name)
                self.groups_joined.add(group)
                events.joined(group)

    async def disconnect(self, code: int) -> None:
        for group in getattr(self, "groups_joined", ()):
            await self.channel_layer.group_discard(group, self.channel_name)
            events.left(group)

    async def league_event(self, message: dict[str, Any]) -> None:
        data = message.get("data") or {}
        league_id = data.get("league_id")
        if message.get("event") == "league_created" and isinstance(league_id, str) and not league_id_problem(league_id):
            await self._join([group_name(league_id)])
        await self.send_json({"type": "event", "event": message.get("event"), "data": data})
