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
