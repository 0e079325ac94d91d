"""Fault-injection players: ``runplayer --strategy late`` and friends.

Each one plays like ``random`` and accepts invitations, but misbehaves on the decision calls
(``choose_parity`` / ``make_move``) in one specific way, so the league can be tested against
the agents students will really write:

=================  ==================================================================  =============
fault              what the referee sees                                               within rules?
=================  ==================================================================  =============
``slow``           a legal answer after 60% of the time it has                         yes
``late``           a legal answer, one second after the deadline                       no (E001)
``silent``         no answer at all (the request hangs)                                no (E001)
``dead``           connection refused: it registers a port nobody listens on           no (E009)
``http500``        HTTP 500 with a text body                                           no (E010)
``malformed``      HTTP 200 with truncated JSON                                        no (E002)
``wrong_type``     a reply with message_type GAME_JOIN_ACK instead of the response     no
``invalid_parity`` ``"EVEN"`` / move 7, every time (asked again, then a loss)          no (E004)
``flapping``       every other match it is down (HTTP 503 to every call of the match)  no, half
``impostor``       the reply names its opponent (its endpoint still says who it is)    yes (logged)
``oversized``      a legal reply padded past 256 KB (the client's reply cap)           no
=================  ==================================================================  =============
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from leagueproto.envelope import parse_timestamp
from leagueproto.errors import LeagueError
from leagueproto.jsonutil import dumps, dumps_str, loads
from leagueproto.server import HttpResponse, McpServer
from leagueproto.tools import Toolset
from players.strategies.base import MoveSituation, ParitySituation, Strategy

FAULTS = (
    "slow",
    "late",
    "silent",
    "dead",
    "http500",
    "malformed",
    "wrong_type",
    "invalid_parity",
    "flapping",
    "impostor",
    "oversized",
)

DECISIONS = frozenset({"choose_parity", "make_move"})
SILENT_MAX = 60.0  # a silent player answers nothing for this long at most (then the server can stop)


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Player(Protocol):
    """What a faulty server needs of the player it wraps (players.agent.Player)."""

    toolset: Toolset
    in_play: dict[str, dict[str, Any]]


class FaultStrategy(Strategy):
    """Random play; the fault itself lives in :class:`FaultyServer` (and ``slow`` here)."""

    blocking = False

    def __init__(self, fault: str, *args: Any, **kwargs: Any) -> None:
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}")
        super().__init__(*args, **kwargs)
        self.fault = self.name = fault
        # dead: the endpoint we register is a port nothing listens on (connection refused).
        self.advertise_port = _unused_port() if fault == "dead" else None

    async def choose_parity(self, situation: ParitySituation) -> str:
        if self.fault == "slow":
            await asyncio.sleep(situation.budget * 0.6)
        return self.rng.choice(("even", "odd"))

    async def choose_move(self, situation: MoveSituation) -> int:
        if self.fault == "slow":
            await asyncio.sleep(situation.budget * 0.6)
        return self.rng.randint(1, 5)

    def wrap_server(self, player: Player) -> McpServer:
        return FaultyServer(player, self.fault)


def _seconds_to_deadline(message: Mapping[str, Any]) -> float:
    """How long until the call's deadline (its ``deadline``, else ``time_limit_seconds``)."""
    deadline = message.get("deadline")
    if isinstance(deadline, str):
        try:
            return (parse_timestamp(deadline) - datetime.now(UTC)).total_seconds()
        except LeagueError:
            pass
    limit = message.get("time_limit_seconds")
    return float(limit) if isinstance(limit, (int, float)) else 5.0


class FaultyServer(McpServer):
    """The player's MCP server with one fault injected into its decision calls."""

    def __init__(self, player: Player, fault: str) -> None:
        super().__init__(player.toolset)
        self.player = player
        self.fault = fault
        self.down_matches: set[str] = set()
        self._invitations = 0

    def _peek(self, body: bytes) -> tuple[str | None, dict[str, Any]]:
        """(tool name, league message) of a request, or (None, {}) when it is not a tool call."""
        try:
            payload = loads(body)
        except ValueError:
            return None, {}
        if not isinstance(payload, dict) or not isinstance(payload.get("method"), str):
            return None, {}
        params = payload.get("params") if isinstance(payload.get("params"), dict) else {}
        method = payload["method"]
        if method == "tools/call":
            method = params.get("name") if isinstance(params.get("name"), str) else ""
            params = params.get("arguments") if isinstance(params.get("arguments"), dict) else {}
        tool = self.toolset.find_tool(method)
        return (tool.name if tool else None), params

    async def handle_http(self, http_method: str, body: bytes, headers: Mapping[str, str], **kw: Any) -> HttpResponse:
        tool, message = self._peek(body)
        if self.fault == "flapping" and tool is not None:
            match_id = message.get("match_id")
            if tool == "handle_game_invitation":
                self._invitations += 1
                if self._invitations % 2 == 1 and isinstance(match_id, str):
                    self.down_matches.add(match_id)
            if match_id in self.down_matches:
                return HttpResponse(503, b"down", [("content-type", "text/plain")])
        if tool not in DECISIONS:
            return await super().handle_http(http_method, body, headers, **kw)
        if self.fault == "http500":
            return HttpResponse(500, b"Internal Server Error", [("content-type", "text/plain")])
        if self.fault == "malformed":
            return HttpResponse(
                200, b'{"jsonrpc": "2.0", "id": 1, "result": {"parity_ch', [("content-type", "application/json")]
            )
        if self.fault == "late":
            await asyncio.sleep(max(0.0, _seconds_to_deadline(message)) + 1.0)
        elif self.fault == "silent":
            await asyncio.sleep(min(SILENT_MAX, max(0.0, _seconds_to_deadline(message)) + 30.0))
            return HttpResponse(204)
        response = await super().handle_http(http_method, body, headers, **kw)
        editor = {
            "wrong_type": self._wrong_type,
            "invalid_parity": self._invalid,
            "impostor": self._impostor,
            "oversized": self._oversized,
        }.get(self.fault)
        return _edit_reply(response, editor) if editor else response

    @staticmethod
    def _wrong_type(reply: dict[str, Any]) -> None:
        reply["message_type"] = "GAME_JOIN_ACK"

    @staticmethod
    def _invalid(reply: dict[str, Any]) -> None:
        if "parity_choice" in reply:
            reply["parity_choice"] = "EVEN"
        if isinstance(reply.get("move"), dict):
            reply["move"]["number"] = 7

    def _impostor(self, reply: dict[str, Any]) -> None:
        other = next(
            (r.get("opponent_id") for r in self.player.in_play.values() if r.get("match_id") == reply.get("match_id")),
            None,
        )
        other = other or "P99"
        reply["player_id"] = other
        reply["sender"] = f"player:{other}"

    @staticmethod
    def _oversized(reply: dict[str, Any]) -> None:
        reply["padding"] = "x" * (300 * 1024)


def _edit_reply(response: HttpResponse, edit: Any) -> HttpResponse:
    """Apply ``edit`` to the league message inside a JSON-RPC response (either dialect)."""
    try:
        payload = loads(response.body)
    except ValueError:
        return response
    result = payload.get("result") if isinstance(payload, dict) else None
    if not isinstance(result, dict):
        return response
    if isinstance(result.get("structuredContent"), dict):
        edit(result["structuredContent"])
        result["content"] = [{"type": "text", "text": dumps_str(result["structuredContent"])}]
    else:
        edit(result)
    return HttpResponse(response.status, dumps(payload), response.headers)
