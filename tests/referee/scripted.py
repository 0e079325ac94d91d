"""Scripted agents for the referee's tests: players and an LM that are real HTTP servers.

Each is a small leagueproto Toolset (or a raw ASGI app, for broken players) served by
ThreadedServer on an ephemeral loopback port, so the referee talks to them over real HTTP.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from leagueproto import jsonrpc
from leagueproto.asgi import make_asgi_app
from leagueproto.jsonrpc import JsonRpcError
from leagueproto.messages import LeagueMessage
from leagueproto.serve import ThreadedServer
from leagueproto.server import McpServer
from leagueproto.tools import CallContext, Toolset


class Recorder:
    """Thread-safe list of what an agent received, with waiting."""

    def __init__(self) -> None:
        self.items: list[tuple[str, dict[str, Any]]] = []
        self._cond = threading.Condition()

    def add(self, method: str, message: dict[str, Any]) -> None:
        with self._cond:
            self.items.append((method, message))
            self._cond.notify_all()

    def of(self, method: str) -> list[dict[str, Any]]:
        with self._cond:
            return [m for name, m in self.items if name == method]

    def methods(self) -> list[str]:
        with self._cond:
            return [name for name, _ in self.items]

    def wait_for(self, method: str, count: int = 1, timeout: float = 30.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len([1 for name, _ in self.items if name == method]) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{count} × {method} not received; got {[n for n, _ in self.items]}")
                self._cond.wait(left)
            return [m for name, m in self.items if name == method]


class ScriptedPlayer:
    """A player whose answers are scripted.

    ``choices`` (even_odd) and ``moves`` (bo5) are answered in order, the last one repeating;
    a value ``MISSING`` leaves the field out. ``join`` is "accept" or "decline"; ``join_delay`` /
    ``move_delay`` make it answer late; ``join_gate`` holds every join answer until the test sets
    it (a match that must still be running, whatever the machine's load); ``move_gate`` does the
    same for every parity choice and move. ``edits`` maps a tool
    name to a list of field overrides applied to its successive replies (the last repeating), e.g. ``{"choose_parity":
    [{"message_type": "GAME_JOIN_ACK"}, {}]}`` answers with a wrong type once, then correctly.
    """

    MISSING = object()

    def __init__(
        self,
        player_id: str,
        *,
        join: str = "accept",
        choices: list[Any] | None = None,
        moves: list[Any] | None = None,
        join_delay: float = 0.0,
        move_delay: float = 0.0,
        join_gate: threading.Event | None = None,
        move_gate: threading.Event | None = None,
        edits: dict[str, list[dict[str, Any]]] | None = None,
        game_over_gate: threading.Event | None = None,
    ) -> None:
        self.player_id = player_id
        # Holds the answer to GAME_OVER until the test sets it (a referee stopped while telling).
        self.game_over_gate = game_over_gate
        self.edits = edits or {}
        self.join = join
        self.choices = list(choices or ["even"])
        self.moves = list(moves or [1])
        self.join_delay = join_delay
        self.move_delay = move_delay
        self.join_gate = join_gate
        self.move_gate = move_gate
        self.received = Recorder()
        self.toolset = Toolset(
            name=f"player-{player_id}", sender=f"player:{player_id}", error_message_type="GAME_ERROR"
        )
        self._install()

    def _next(self, script: list[Any], count: int) -> Any:
        return script[min(count, len(script) - 1)]

    def _edited(self, tool: str, reply: dict[str, Any]) -> dict[str, Any]:
        script = self.edits.get(tool)
        if script:
            reply.update(self._next(script, len(self.received.of(tool)) - 1))
        return reply

    def _install(self) -> None:
        ts = self.toolset

        @ts.tool("handle_game_invitation", LeagueMessage, message_types=("GAME_INVITATION",))
        async def invitation(msg: LeagueMessage, ctx: CallContext) -> dict[str, Any]:
            self.received.add("handle_game_invitation", msg.model_dump())
            await asyncio.sleep(self.join_delay)
            if self.join_gate is not None:
                await asyncio.to_thread(self.join_gate.wait, 60)
            return self._edited(
                "handle_game_invitation",
                ts.reply(
                    msg,
                    "GAME_JOIN_ACK",
                    match_id=getattr(msg, "match_id", None),
                    player_id=self.player_id,
                    arrival_timestamp=msg.timestamp,
                    accept=self.join == "accept",
                ),
            )

        @ts.tool("choose_parity", LeagueMessage, message_types=("CHOOSE_PARITY_CALL",))
        async def choose(msg: LeagueMessage, ctx: CallContext) -> dict[str, Any]:
            asked = len(self.received.of("choose_parity"))
            self.received.add("choose_parity", msg.model_dump())
            await asyncio.sleep(self.move_delay)
            if self.move_gate is not None:
                await asyncio.to_thread(self.move_gate.wait, 60)
            choice = self._next(self.choices, asked)
            fields = {} if choice is self.MISSING else {"parity_choice": choice}
            reply = ts.reply(msg, "CHOOSE_PARITY_RESPONSE", match_id=msg.match_id, player_id=self.player_id, **fields)
            return self._edited("choose_parity", reply)

        @ts.tool("make_move", LeagueMessage, message_types=("MOVE_REQUEST",))
        async def move(msg: LeagueMessage, ctx: CallContext) -> dict[str, Any]:
            asked = len(self.received.of("make_move"))
            self.received.add("make_move", msg.model_dump())
            await asyncio.sleep(self.move_delay)
            if self.move_gate is not None:
                await asyncio.to_thread(self.move_gate.wait, 60)
            number = self._next(self.moves, asked)
            fields = {} if number is self.MISSING else {"move": {"number": number}}
            reply = ts.reply(msg, "MOVE_RESPONSE", match_id=msg.match_id, game_round=msg.game_round, **fields)
            return self._edited("make_move", reply)

        for tool, message_type in (
            ("notify_match_result", "GAME_OVER"),
            ("notify_game_error", "GAME_ERROR"),
            ("notify_game_start", "GAME_START"),
            ("notify_round_result", "ROUND_RESULT"),
        ):
            ts.add_tool(self._ack_tool(tool, message_type))

    def _ack_tool(self, name: str, message_type: str) -> Any:
        from leagueproto.tools import Tool

        async def ack(msg: LeagueMessage, ctx: CallContext) -> dict[str, Any]:
            self.received.add(name, msg.model_dump())
            if name == "notify_match_result" and self.game_over_gate is not None:
                await asyncio.to_thread(self.game_over_gate.wait, 60)
            return self.toolset.reply(msg, "ACK", status="received", match_id=getattr(msg, "match_id", None))

        return Tool(name=name, handler=ack, model=LeagueMessage, message_types=(message_type,))

    def app(self, *, mcp_only: bool = False) -> Any:
        server = McpOnlyServer(self.toolset) if mcp_only else McpServer(self.toolset)
        return make_asgi_app(server)


class McpOnlyServer(McpServer):
    """An agent that speaks only dialect B: every direct method is unknown (-32601)."""

    async def _direct(self, method: str, params: Any, ctx: CallContext) -> Any:
        raise JsonRpcError(jsonrpc.METHOD_NOT_FOUND, f"Method not found: {method}")


def raw_app(status: int, body: bytes, content_type: str = "application/json") -> Callable:
    """A broken player: answers every request with this status and body."""

    async def app(scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return
        more = True
        while more:
            more = (await receive()).get("more_body", False)
        headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


class ScriptedLM:
    """A League Manager that registers referees and records their reports.

    ``forget()`` makes it answer E013 to the current token, as an LM that lost its referees.
    """

    LM_TOKEN = "lm-token-for-referee"

    def __init__(self) -> None:
        self.received = Recorder()
        self.tokens: dict[str, str] = {}  # token → referee id
        self.acks: dict[str, str] = {}  # match key → digest of the recorded result
        self._issued = 0
        self.key: str | None = None  # when set, registration needs this referee_key (else E012)
        self.referee_id = "REF01"  # the id a registration is given (an LM may give another next time)
        # Reports answered as by an LM whose database is down (-32000, retryable), while > 0.
        self.unavailable = 0
        self.retry_after_seconds = 1.0
        # When set, report answers wait until the test sets it (a POST that must still be in flight).
        self.report_gate: threading.Event | None = None
        # Matches whose result the LM holds from another referee: their reports are refused.
        self.recorded_elsewhere: set[str] = set()
        self.report_bodies: list[bytes] = []  # the HTTP body each report came in (a batch's is shared)
        self.toolset = Toolset(name="scripted-lm", sender="league_manager")
        ts = self.toolset

        @ts.tool("register_referee", LeagueMessage, message_types=("REFEREE_REGISTER_REQUEST",))
        async def register(msg: LeagueMessage, ctx: CallContext) -> dict[str, Any]:
            self.received.add("register_referee", msg.model_dump())
            if self.key is not None and (msg.model_extra or {}).get("referee_key") != self.key:
                from leagueproto.errors import ErrorCode, refusal

                raise refusal(ErrorCode.AUTH_TOKEN_INVALID, "referee_key", "the operator's referee key", "?", "x")
            self._issued += 1
            token = f"referee-token-{self._issued}"
            self.tokens[token] = self.referee_id
            return ts.reply(
                msg,
                "REFEREE_REGISTER_RESPONSE",
                referee_id=self.referee_id,
                auth_token=token,
                league_manager_token=self.LM_TOKEN,
                league_id=getattr(msg, "league_id", None) or "league_test",
                status="ACCEPTED",
                reason=None,
            )

        @ts.tool("report_match_result", LeagueMessage, message_types=("MATCH_RESULT_REPORT",))
        async def report(msg: LeagueMessage, ctx: CallContext) -> dict[str, Any]:
            data = msg.model_dump()
            self.report_bodies.append(ctx.body or b"")
            self.received.add("report_match_result", data)
            if self.report_gate is not None:
                await asyncio.to_thread(self.report_gate.wait, 30)
            if self.unavailable > 0:
                from leagueproto.jsonrpc import JsonRpcError

                self.unavailable -= 1
                raise JsonRpcError(
                    -32000,
                    "Database unavailable; nothing was recorded: send the same message again",
                    {"retryable": True, "retry_after_seconds": self.retry_after_seconds},
                )
            if (data.get("auth_token") or "") not in self.tokens:
                from leagueproto.errors import ErrorCode, LeagueError

                raise LeagueError(ErrorCode.REFEREE_NOT_REGISTERED, "unknown referee token")
            if data["match_id"] in self.recorded_elsewhere:
                from leagueproto.errors import ErrorCode, LeagueError

                raise LeagueError(
                    ErrorCode.INVALID_GAME_STATE,
                    f"match {data['match_id']} already has a different result; the first report stands",
                )
            key = f"{data['league_id']}:{data['match_id']}"
            status = "DUPLICATE" if key in self.acks else "RECORDED"
            self.acks[key] = status
            self.received.add("acknowledged", data)
            return ts.reply(msg, "MATCH_RESULT_ACK", match_id=data["match_id"], status=status)

    def forget(self) -> None:
        self.tokens.clear()

    def app(self) -> Any:
        return make_asgi_app(McpServer(self.toolset))


@contextmanager
def serving(app: Any, port: int = 0) -> Iterator[ThreadedServer]:
    server = ThreadedServer(app, ports=(port,)).start()
    try:
        yield server
    finally:
        server.stop()
