"""Playing from behind NAT: players that connect out to the League Manager's relay.

A player registered with ``contact_endpoint: "connect"`` opens a WebSocket to the LM's
``/agents/connect``, sends its auth_token, and answers there the JSON-RPC requests it would have
received on ``POST /mcp``: each request frame goes through the player's own MCP server (the same
code that serves HTTP) and the response goes back on the socket. A dropped socket is reopened
with a growing pause (0.2 s doubling to 5 s), so an LM restart costs a few seconds, not a match.
docs/protocol.md, "Playing from behind NAT", has the messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import signal
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from leagueproto.client import AgentClient
from leagueproto.jsonutil import dumps, loads
from players.agent import Player, PlayerConfig, PlayerHost

log = logging.getLogger("players")

FIRST_PAUSE, LONGEST_PAUSE = 0.2, 5.0
# Close codes from the LM (league/relay/consumer.py) after which reconnecting is pointless.
REFUSED = 4401  # the token is not accepted: register again first
REPLACED = 4409  # another process of ours took the socket over
# A relayed call did not come by HTTP, so no Host to check against DNS rebinding: it is the LM's,
# over the socket we opened. Loopback is a host every player's server answers.
_JSON_HEADERS = {"content-type": "application/json", "host": "127.0.0.1"}


def connect_url(league_url: str) -> str:
    """The relay's WebSocket address on the LM whose /mcp is ``league_url``."""
    parts = urlsplit(league_url)
    scheme = "wss" if parts.scheme == "https" else "ws"
    return urlunsplit((scheme, parts.netloc, "/agents/connect", "", ""))


class RelayLink:
    """One player's socket to the relay, reopened whenever it drops, until the player is done."""

    def __init__(self, player: Player, url: str, *, stay: bool = False) -> None:
        self.player = player
        self.url = url
        self.stay = stay
        self.connections = 0  # sockets opened and welcomed (a test reads how often it reconnected)
        self._tasks: set[asyncio.Task] = set()

    async def run(self) -> None:
        pause = FIRST_PAUSE
        while self.stay or not self.player.done.is_set():
            try:
                # No per-message deflate: the frames are small JSON, and compressing each one cost
                # CPU on both ends of every relayed call for next to no bytes saved.
                async with connect(self.url, max_size=None, open_timeout=10, compression=None) as socket:
                    if await self._welcomed(socket):
                        pause = FIRST_PAUSE
                        await self._serve(socket)
            except ConnectionClosed as exc:
                code = exc.rcvd.code if exc.rcvd else None
                if code == REPLACED:
                    self.player.warn(f"{self.player.name}: another connection took over; stopping")
                    return
                if code == REFUSED and not await self._register_again():
                    return
            except (OSError, InvalidHandshake, InvalidURI, TimeoutError) as exc:
                self.player.warn(f"{self.player.name}: relay {self.url} unreachable ({exc}); retrying in {pause:.1f} s")
            if self.player.done.is_set() and not self.stay:
                return
            await asyncio.sleep(pause * random.uniform(0.8, 1.2))
            pause = min(pause * 2, LONGEST_PAUSE)

    async def _welcomed(self, socket: ClientConnection) -> bool:
        await socket.send(dumps({"auth_token": self.player.token}).decode())
        welcome = loads(await socket.recv())
        if not isinstance(welcome, dict) or welcome.get("type") != "welcome":
            self.player.warn(f"{self.player.name}: relay refused the socket: {welcome}")
            return False
        self.connections += 1
        if self.connections == 1:
            self.player.echo(f"{self.player.name}: connected to the relay as {welcome.get('player_id')}")
        return True

    async def _serve(self, socket: ClientConnection) -> None:
        """Answer each request frame in its own task: calls of different matches run side by side.
        Once the league is over (LEAGUE_COMPLETED answered) the socket is closed, unless ``stay``:
        no frame may ever come again to wake the loop, so waiting for one would keep us forever."""
        closer = None if self.stay else asyncio.create_task(self._close_when_done(socket))
        try:
            async for frame in socket:
                task = asyncio.create_task(self._answer(socket, frame))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        finally:
            if closer is not None:
                closer.cancel()

    async def _close_when_done(self, socket: ClientConnection) -> None:
        await self.player.done.wait()
        await asyncio.gather(*self._tasks, return_exceptions=True)  # the last answers go out first
        await socket.close()

    async def _answer(self, socket: ClientConnection, frame: str | bytes) -> None:
        body = frame.encode() if isinstance(frame, str) else frame
        response = await self.player.server.handle_http("POST", body, _JSON_HEADERS)
        if response.body:  # a notification gets none
            with contextlib.suppress(ConnectionClosed):
                await socket.send(response.body.decode())

    async def _register_again(self) -> bool:
        self.player.warn(f"{self.player.name}: the relay refused our token; registering again")
        return await self.player.register()


class ConnectHost:
    """Players of one process that all play through the relay: no port, no listening socket."""

    def __init__(self, players: list[Player], *, register: bool = True, stay: bool = False) -> None:
        self.players = players
        self.register = register
        self.stay = stay
        self.links: list[RelayLink] = []
        self.executor = ThreadPoolExecutor(max_workers=min(32, 4 + len(players)), thread_name_prefix="strategy")
        for player in players:
            player.config.connect = True
            player.executor = self.executor

    @classmethod
    def build(
        cls, config: PlayerConfig, count: int = 1, *, register: bool = True, stay: bool = False, **kwargs: Any
    ) -> ConnectHost:
        """``count`` players named and dealt strategies as ``PlayerHost.build`` does them."""
        players = PlayerHost.build(replace(config, connect=True), count, **kwargs).players
        return cls(players, register=register, stay=stay)

    async def run(self) -> None:
        client = AgentClient()
        for player in self.players:
            player.client = client
        try:
            await asyncio.gather(*(self._play(player) for player in self.players))
        finally:
            for player in self.players:
                player.save()
            await client.close()
            self.executor.shutdown(wait=False, cancel_futures=True)

    async def _play(self, player: Player) -> None:
        if self.register and not await player.register():
            return
        if not player.config.league_url or not player.token:
            player.warn(f"{player.name}: no league and token to connect with")
            return
        link = RelayLink(player, connect_url(player.config.league_url), stay=self.stay)
        self.links.append(link)
        await link.run()

    def serve_forever(self) -> None:
        """Run in the foreground until every player is done (or SIGINT/SIGTERM)."""

        async def main() -> None:
            task = asyncio.current_task()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, task.cancel)
            with contextlib.suppress(asyncio.CancelledError):
                await self.run()

        asyncio.run(main())
