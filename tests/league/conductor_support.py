"""Scripted agents for the conductor's tests: real HTTP servers built on leagueproto.

They speak the league protocol for real (Toolset + McpServer on loopback); only the game is
scripted: the referee declares the player with the lower id the winner, so standings are known.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from leagueproto.asgi import make_asgi_app
from leagueproto.client import AgentClient
from leagueproto.envelope import utc_now
from leagueproto.messages import LeagueMessage
from leagueproto.scoring import id_sort_key
from leagueproto.serve import ThreadedServer
from leagueproto.server import McpServer
from leagueproto.tools import CallContext, Toolset
from tests.league.lm_support import log_for, referee_meta, register_player, register_referee
from tests.league.lm_support import player_meta as make_player_meta

NOTIFICATIONS = {
    "notify_round": "ROUND_ANNOUNCEMENT",
    "update_standings": "LEAGUE_STANDINGS_UPDATE",
    "notify_round_completed": "ROUND_COMPLETED",
    "notify_league_completed": "LEAGUE_COMPLETED",
}


class ScriptedPlayers:
    """``count`` players on one server (one port each) that ack and record every notification."""

    def __init__(self, count: int) -> None:
        self.received: dict[int, list[dict[str, Any]]] = defaultdict(list)
        self.games: dict[int, list[dict[str, Any]]] = defaultdict(list)
        self._servers: dict[int, McpServer] = {}
        self.server = ThreadedServer(make_asgi_app(self._servers.get), ports=(0,) * count)
        for port in self.server.ports:
            self._servers[port] = McpServer(self._toolset(port))

    def _toolset(self, port: int) -> Toolset:
        toolset = Toolset(name=f"player-{port}", sender="player:scripted", error_message_type="GAME_ERROR")
        for method, message_type in NOTIFICATIONS.items():

            async def ack(msg: LeagueMessage, ctx: CallContext, method: str = method) -> dict[str, Any]:
                self.received[port].append(msg.model_dump())
                return toolset.reply(msg, "ACK", status="received")

            toolset.tool(method, LeagueMessage, message_types=(message_type,))(ack)

        # The game side, for matches run by a real referee (the LM's built-in one in these tests).
        @toolset.tool("handle_game_invitation", LeagueMessage, message_types=("GAME_INVITATION",))
        async def join(msg: LeagueMessage, ctx: CallContext) -> dict[str, Any]:
            data = msg.model_dump()
            self.games[port].append(data)
            return toolset.reply(
                msg,
                "GAME_JOIN_ACK",
                match_id=data.get("match_id"),
                player_id=data.get("player_id"),
                arrival_timestamp=utc_now(),
                accept=True,
            )

        @toolset.tool("choose_parity", LeagueMessage, message_types=("CHOOSE_PARITY_CALL",))
        async def choose(msg: LeagueMessage, ctx: CallContext) -> dict[str, Any]:
            data = msg.model_dump()
            self.games[port].append(data)
            choice = "even" if port % 2 == 0 else "odd"
            return toolset.reply(
                msg, "CHOOSE_PARITY_RESPONSE", match_id=data.get("match_id"), player_id=data.get("player_id"),
                parity_choice=choice,
            )  # fmt: skip

        for method, message_type in (("notify_match_result", "GAME_OVER"), ("notify_game_error", "GAME_ERROR")):

            async def game_ack(msg: LeagueMessage, ctx: CallContext) -> dict[str, Any]:
                self.games[port].append(msg.model_dump())
                return toolset.reply(msg, "ACK", status="received")

            toolset.tool(method, LeagueMessage, message_types=(message_type,))(game_ack)
        return toolset

    def start(self) -> ScriptedPlayers:
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop()

    def register(self, lm_url: str, league_id: str) -> dict[int, str]:
        """Register every player; returns port → player_id."""
        ids = {}
        for port, url in zip(self.server.ports, self.server.urls(), strict=True):
            meta = make_player_meta(url, display_name=f"bot{port}")
            reply = register_player(lm_url, f"bot{port}", player_meta=meta, league_id=league_id)
            assert reply["status"] == "ACCEPTED", reply
            ids[port] = reply["player_id"]
        return ids

    def notices(self, port: int) -> list[dict[str, Any]]:
        """What the player at ``port`` received, a notice repeated right after itself kept once:
        one whose answer came after the call's timeout (0.5 s: a loaded machine) is sent again."""
        return [next(same) for _, same in itertools.groupby(self.received[port], key=lambda m: m["message_type"])]

    def types(self, port: int) -> list[str]:
        return [m["message_type"] for m in self.notices(port)]


class ScriptedReferee:
    """Accepts start_match and reports 'the lower id wins' to the LM (unless ``silent``)."""

    def __init__(
        self,
        lm_url: str,
        *,
        silent: bool = False,
        delay: float = 0.02,
        on_start: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.lm_url = lm_url
        self.on_start = on_start  # called with each START_MATCH as it arrives
        self.silent = silent
        self.delay = delay
        self.starts: list[tuple[str, str]] = []  # (match_id, match_token) in arrival order
        self._held: set[tuple[str, str]] = set()  # running, or its result taken by the LM
        self.running = 0
        self.max_running = 0
        self.received: list[dict[str, Any]] = []
        self.reports: list[dict[str, Any]] = []
        self.registration: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._client: AgentClient | None = None
        self._tasks: set[asyncio.Task] = set()
        toolset = Toolset(name="scripted-referee", sender=lambda: self.sender, error_message_type="GAME_ERROR")
        self.toolset = toolset

        @toolset.tool("start_match", LeagueMessage, aliases=("run_match",), message_types=("START_MATCH",))
        async def start_match(msg: LeagueMessage, ctx: CallContext) -> dict[str, Any]:
            data = msg.model_dump()
            if self.on_start is not None:
                self.on_start(data)
            start = (data["match_id"], data["match_token"])
            with self._lock:
                # The same start_match again, while its match runs or after its result was taken:
                # the conductor's retry of a call whose reply it did not get in time. A referee
                # accepts it again and plays the match once.
                if start in self._held:
                    return toolset.reply(
                        msg, "START_MATCH_RESPONSE", match_id=data["match_id"], status="ACCEPTED", reason=""
                    )
                self._held.add(start)
                self.starts.append(start)
                self.running += 1
                self.max_running = max(self.max_running, self.running)
            if not self.silent:
                task = asyncio.create_task(self._report(data))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            return toolset.reply(msg, "START_MATCH_RESPONSE", match_id=data["match_id"], status="ACCEPTED", reason="")

        @toolset.tool("notify_league_completed", LeagueMessage, message_types=("LEAGUE_COMPLETED",))
        async def completed(msg: LeagueMessage, ctx: CallContext) -> dict[str, Any]:
            self.received.append(msg.model_dump())
            return toolset.reply(msg, "ACK", status="received")

        self.server = ThreadedServer(make_asgi_app(McpServer(toolset)))

    @property
    def sender(self) -> str:
        return f"referee:{self.registration.get('referee_id', 'scripted')}"

    @property
    def url(self) -> str:
        return self.server.url

    def start(self) -> ScriptedReferee:
        self.server.start()
        return self

    def stop(self) -> None:
        if self._client is not None and self.server.loop is not None:
            asyncio.run_coroutine_threadsafe(self._client.close(), self.server.loop).result(5)
        self.server.stop()

    def register(self, league_id: str, capacity: int = 2) -> dict[str, Any]:
        meta = referee_meta(self.url, display_name="scripted", max_concurrent_matches=capacity)
        self.registration = register_referee(self.lm_url, "scripted", referee_meta=meta, league_id=league_id)
        assert self.registration["status"] == "ACCEPTED", self.registration
        return self.registration

    def report_message(self, start: dict[str, Any]) -> dict[str, Any]:
        a, b = start["player_A_id"], start["player_B_id"]
        winner, loser = sorted((a, b), key=id_sort_key)
        result = {
            "status": "WIN",
            "winner": winner,
            "score": {winner: 3, loser: 0},
            "technical_loss": [],
            "details": {"reason": "scripted: the lower id wins"},
        }
        return self.toolset.message(
            "MATCH_RESULT_REPORT",
            auth_token=self.registration["auth_token"],
            league_id=start["league_id"],
            round_id=start["round_id"],
            match_id=start["match_id"],
            game_type=start["game_type"],
            result=result,
            match_log=log_for(a, b, result),
        )

    async def _report(self, start: dict[str, Any]) -> None:
        await asyncio.sleep(self.delay)
        if self._client is None:
            self._client = AgentClient()
        with self._lock:  # done before reporting: the LM may assign the next match right after the report
            self.running -= 1
        result = await self._client.call(self.lm_url, "report_match_result", self.report_message(start), timeout=5)
        self.reports.append(result.reply)
        if result.reply.get("message_type") != "MATCH_RESULT_ACK":
            with self._lock:  # refused (e.g. while suspended): sent again, the match is played again
                self._held.discard((start["match_id"], start["match_token"]))
