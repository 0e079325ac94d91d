"""Agents for the check's tests: the course's minimal player as a real process, and a broken
player (a raw ASGI app over real HTTP) that gets one thing wrong per message."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from leagueproto.envelope import utc_now
from leagueproto.serve import ThreadedServer
from tests.support.servers import Process, free_port, wait_for_port
from tests.support.waiting import wait_until

MINIMAL_PLAYER = Path(__file__).resolve().parents[2] / "docs" / "examples" / "minimal_player.py"
SLOW_SECONDS = 3.0  # how long the broken player takes over ROUND_COMPLETED (the tests wait 1 s)


@contextmanager
def minimal_player(lm_url: str, league_id: str, env: dict[str, str], log_path: Path) -> Iterator[str]:
    """docs/examples/minimal_player.py registered with ``league_id`` (as P01); yields its /mcp URL.
    It exits once it has had LEAGUE_COMPLETED, as in a league: one check per process."""
    port = free_port()
    args = [sys.executable, str(MINIMAL_PLAYER), "--port", str(port), "--league-url", lm_url]
    process = Process([*args, "--league-id", league_id, "--name", "Mini"], env, log_path=str(log_path))
    try:
        wait_for_port(port)
        _wait_for_text(log_path, "registered as P01")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()


def _wait_for_text(path: Path, text: str, timeout: float = 20.0) -> None:
    wait_until(lambda: text in path.read_text(), timeout, f"{text!r} in {path}")


def _message(request: dict[str, Any], message_type: str, **fields: Any) -> dict[str, Any]:
    return {
        "protocol": "league.v2",
        "message_type": message_type,
        "sender": "player:P01",
        "timestamp": utc_now(),
        "conversation_id": request.get("conversation_id"),
        "match_id": request.get("match_id"),
        "player_id": "P01",
        **fields,
    }


def broken_answer(method: str, params: dict[str, Any]) -> tuple[int, Any, float]:
    """(HTTP status, JSON-RPC result or error, seconds to wait first) for each tool."""
    if method == "notify_round":  # refuses the announcement, naming a field it wants
        error = _message(params, "GAME_ERROR", error_code="E003", error_name="MISSING_REQUIRED_FIELD")
        error.update(error_description="missing season_id", context={"field": "season_id"})
        return 200, error, 0
    if method == "handle_game_invitation":  # joins, with a timestamp in another zone
        return 200, _message(params, "GAME_JOIN_ACK", accept=True, timestamp="2025-01-15T12:30:00+02:00"), 0
    if method == "choose_parity":  # upper case: not a legal choice
        return 200, _message(params, "CHOOSE_PARITY_RESPONSE", parity_choice="EVEN"), 0
    if method == "notify_match_result":  # acknowledges another conversation
        return 200, {**_message(params, "ACK", status="received"), "conversation_id": "conv-elsewhere"}, 0
    if method == "update_standings":  # crashes
        return 500, None, 0
    if method == "notify_round_completed":  # too slow
        return 200, _message(params, "ACK", status="received"), SLOW_SECONDS
    if method == "notify_league_completed":  # an ACK without its envelope
        return 200, {"message_type": "ACK", "status": "received"}, 0
    return 200, {"code": -32601, "message": f"Method not found: {method}"}, 0  # notify_game_error among them


def broken_player() -> Callable:
    """The broken player's ASGI app (every method, direct form only)."""

    async def app(scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return
        body, more = b"", True
        while more:
            event = await receive()
            body += event.get("body", b"")
            more = event.get("more_body", False)
        request = json.loads(body or b"{}")
        method, params = request.get("method"), request.get("params") or {}
        if method == "tools/call":
            method, params = params.get("name"), params.get("arguments") or {}
        status, value, delay = broken_answer(method, params)
        await asyncio.sleep(delay)
        if status == 500:
            payload = b"Internal Server Error"
        elif isinstance(value, dict) and "code" in value and "message_type" not in value:
            payload = json.dumps({"jsonrpc": "2.0", "id": request.get("id"), "error": value}).encode()
        else:
            payload = json.dumps({"jsonrpc": "2.0", "id": request.get("id"), "result": value}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})

    return app


@contextmanager
def serving_broken_player() -> Iterator[str]:
    server = ThreadedServer(broken_player(), ports=(0,)).start()
    try:
        yield server.url
    finally:
        server.stop()


class CoursePlayer:
    """A player written from the course, over real HTTP (a raw ASGI app: direct form and
    tools/call), with one of the habits students' agents have:

    ``player_id``: the fixed id it answers as (from its own configuration); ``notices``: whether it
    serves the four league notices; ``choice_field``: the field it puts its parity in;
    ``timestamp``: what it writes as timestamps; ``rpc_errors``: tool → (code, message), answered
    as a JSON-RPC error; ``strict_referee``: refuses a ROUND_ANNOUNCEMENT whose referee_endpoint is
    no http URL; ``ack_type``: the message_type of its replies to GAME_OVER and notices (None: left
    out). It takes LEAGUE_COMPLETED from anyone (``received`` shows what it was sent).
    """

    NOTICE_TOOLS = ("notify_round", "update_standings", "notify_round_completed", "notify_league_completed")

    def __init__(
        self,
        player_id: str = "P01",
        *,
        notices: bool = True,
        choice_field: str = "parity_choice",
        timestamp: Callable[[], str] = utc_now,
        rpc_errors: dict[str, tuple[int, str]] | None = None,
        strict_referee: bool = False,
        ack_type: str | None = "ACK",
    ) -> None:
        self.player_id = player_id
        self.notices = notices
        self.choice_field = choice_field
        self.timestamp = timestamp
        self.rpc_errors = rpc_errors or {}
        self.strict_referee = strict_referee
        self.ack_type = ack_type
        self.received: list[str] = []

    def reply(self, request: dict[str, Any], message_type: str | None, **fields: Any) -> dict[str, Any]:
        envelope = {"protocol": "league.v2", "sender": f"player:{self.player_id}", "timestamp": self.timestamp()}
        if message_type:
            envelope["message_type"] = message_type
        return {**envelope, "conversation_id": request.get("conversation_id"), "player_id": self.player_id, **fields}

    def answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The JSON-RPC response body's ``result`` or ``error`` for one call."""
        if method in self.rpc_errors:
            code, text = self.rpc_errors[method]
            return {"error": {"code": code, "message": text}}
        if method in self.NOTICE_TOOLS and not self.notices or method not in TOOLS:
            return {"error": {"code": -32601, "message": f"Method not found: {method}"}}
        self.received.append(method)
        match_id = params.get("match_id")
        if method == "handle_game_invitation":
            return {"result": self.reply(params, "GAME_JOIN_ACK", match_id=match_id, accept=True)}
        if method == "choose_parity":
            choice = {self.choice_field: "even"}
            return {"result": self.reply(params, "CHOOSE_PARITY_RESPONSE", match_id=match_id, **choice)}
        if method == "notify_round" and self.strict_referee:
            endpoints = [m.get("referee_endpoint") for m in params.get("matches") or []]
            if not all(isinstance(e, str) and e.startswith(("http://", "https://")) for e in endpoints):
                refusal = self.reply(params, "GAME_ERROR", error_code="E003", error_description="bad referee_endpoint")
                return {"result": {**refusal, "context": {"field": "referee_endpoint"}}}
        return {"result": self.reply(params, self.ack_type, status="received")}

    def app(self) -> Callable:
        async def app(scope: dict, receive: Callable, send: Callable) -> None:
            if scope["type"] != "http":
                return
            body, more = b"", True
            while more:
                event = await receive()
                body += event.get("body", b"")
                more = event.get("more_body", False)
            request = json.loads(body or b"{}")
            method, params = request.get("method"), request.get("params") or {}
            if method == "tools/call":
                method, params = params.get("name"), params.get("arguments") or {}
            payload = json.dumps({"jsonrpc": "2.0", "id": request.get("id"), **self.answer(method, params)}).encode()
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": payload})

        return app


TOOLS = frozenset(
    {"handle_game_invitation", "choose_parity", "notify_match_result", "notify_game_error", *CoursePlayer.NOTICE_TOOLS}
)


def non_utc() -> str:
    """A timestamp in another zone, as an agent that writes local time does."""
    return "2025-01-15T12:30:00+02:00"


@contextmanager
def serving_course_player(player: CoursePlayer) -> Iterator[str]:
    server = ThreadedServer(player.app(), ports=(0,)).start()
    try:
        yield server.url
    finally:
        server.stop()
