#!/usr/bin/env python3
"""A complete Even/Odd league player in one file, Python standard library only.

Copy it, then run:

    python minimal_player.py --port 8105 --league-url http://127.0.0.1:8000/mcp --name MyBot

It serves POST /mcp (JSON-RPC 2.0: the direct form ``"method": "choose_parity"`` and the MCP
form ``"method": "tools/call"``), registers with the League Manager, accepts every
invitation, answers every choice at random, prints each result and exits when the league is
over. Make it yours by changing ``choose_parity`` (and ``choose_move`` for best-of-5 leagues).

Anyone can call it, so it trusts as docs/protocol.md ("Whom to trust") says: League Manager
notices must carry the league_manager_token it got at registration, and a match belongs to the
referee whose invitation came first, unless the League Manager confirms a new one.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import random
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit, urlunsplit

# -- your strategy ----------------------------------------------------------------------------


def choose_parity(message: dict) -> str:
    """Return exactly "even" or "odd". ``message["context"]`` names the opponent."""
    return random.choice(["even", "odd"])


def choose_move(message: dict) -> int:
    """Best-of-5 games: a whole number 1-5. ``message["game_state"]["your_role"]`` is ODD or EVEN."""
    return random.randint(1, 5)


# -- the protocol -----------------------------------------------------------------------------

ME = {"name": "MinimalPlayer", "player_id": None, "auth_token": None, "league_id": None, "league_url": None}
LM_TOKEN = {"value": None}  # the league_manager_token from registration: LM notices must carry it
MATCH_TOKENS: dict = {}  # match_id → the token of the referee the match is bound to
LOCK = threading.Lock()  # the server answers calls on several threads
DONE = threading.Event()


def same(a: str, b: str) -> bool:
    """Tokens compared in constant time."""
    return hmac.compare_digest(a.encode(), b.encode())


def now() -> str:
    """UTC, whole seconds, ending in Z: the only timestamp format the league sends."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: UP017 (Python 3.9+)


def reply(request: dict, message_type: str, **fields) -> dict:
    """A league.v2 message answering ``request`` (same conversation_id)."""
    message = {
        "protocol": "league.v2",
        "message_type": message_type,
        "sender": f"player:{ME['player_id'] or ME['name']}",
        "timestamp": now(),
        "conversation_id": request.get("conversation_id") or str(uuid.uuid4()),
    }
    # Echo the token the caller sent (a referee's match token). Never our own auth_token: anyone
    # can call us, and that token goes only to the League Manager (docs/protocol.md#whom-to-trust).
    if isinstance(request.get("auth_token"), str):
        message["auth_token"] = request["auth_token"]
    for key in ("league_id", "round_id", "match_id"):
        if request.get(key) is not None:
            message[key] = request[key]
    message.update(fields)
    return message


def game_error(request: dict, code: str, name: str, description: str) -> dict:
    return reply(request, "GAME_ERROR", error_code=code, error_name=name, error_description=description)


def ack(request: dict) -> dict:
    return reply(request, "ACK", status="received", player_id=ME["player_id"])


def lm_confirms(match_id: str, token: str) -> bool:
    """Whether the League Manager says ``token`` is ours for ``match_id`` now: the token its referee
    now sends us (each player has its own; the LM answers each the SHA-256 of its own)."""
    if not ME["auth_token"]:
        return False
    query = {
        "protocol": "league.v2",
        "message_type": "LEAGUE_QUERY",
        "sender": f"player:{ME['player_id']}",
        "timestamp": now(),
        "conversation_id": str(uuid.uuid4()),
        "auth_token": ME["auth_token"],  # our own token goes to the League Manager only
        "league_id": ME["league_id"],
        "query_type": "GET_MATCH_ASSIGNMENT",
        "query_params": {"match_id": match_id},
    }
    try:
        answer = post(ME["league_url"], "league_query", query, timeout=3.0)
    except (OSError, ValueError):
        return False
    digest = (answer.get("data") or {}).get("match_token_sha256")
    return isinstance(digest, str) and same(hashlib.sha256(token.encode()).hexdigest(), digest)


def handle_game_invitation(msg: dict) -> dict:
    match_id, token = msg.get("match_id"), msg["auth_token"]
    with LOCK:
        bound = MATCH_TOKENS.get(match_id)
    # The first invitation binds the match. A copy of it with another token (anyone can send one)
    # is refused, unless the League Manager confirms the match was given to a new referee.
    if bound is not None and not same(token, bound) and not lm_confirms(match_id, token):
        return game_error(msg, "E012", "AUTH_TOKEN_INVALID", f"{match_id} is bound to another referee's token")
    with LOCK:
        MATCH_TOKENS[match_id] = token
    print(f"invited to {match_id} against {msg.get('opponent_id')}", flush=True)
    return reply(msg, "GAME_JOIN_ACK", player_id=ME["player_id"], arrival_timestamp=now(), accept=True)


def handle_choose_parity(msg: dict) -> dict:
    return reply(msg, "CHOOSE_PARITY_RESPONSE", player_id=ME["player_id"], parity_choice=choose_parity(msg))


def handle_make_move(msg: dict) -> dict:
    number = choose_move(msg)
    return reply(
        msg, "MOVE_RESPONSE", player_id=ME["player_id"], game_round=msg.get("game_round"), move={"number": number}
    )


def handle_match_result(msg: dict) -> dict:
    result = msg.get("game_result") or {}
    winner = result.get("winner_player_id")
    outcome = "draw" if result.get("status") == "DRAW" else ("won" if winner == ME["player_id"] else "lost")
    print(f"{msg.get('match_id')}: {outcome} ({result.get('reason') or result.get('status')})", flush=True)
    return ack(msg)


def handle_league_completed(msg: dict) -> dict:
    if msg.get("league_status"):  # CANCELLED or DELETED: the organiser ended the league
        print(f"league {str(msg['league_status']).lower()}: {msg.get('reason') or 'no reason given'}", flush=True)
    else:
        champion = (msg.get("champion") or {}).get("player_id")
        print(f"league completed, champion {champion}", flush=True)
    DONE.set()
    return ack(msg)


# tool name → (message type, handler, who calls it)
TOOLS = {
    "handle_game_invitation": ("GAME_INVITATION", handle_game_invitation, "referee"),
    "choose_parity": ("CHOOSE_PARITY_CALL", handle_choose_parity, "referee"),
    "make_move": ("MOVE_REQUEST", handle_make_move, "referee"),
    "notify_game_start": ("GAME_START", ack, "referee"),
    "notify_round_result": ("ROUND_RESULT", ack, "referee"),
    "notify_match_result": ("GAME_OVER", handle_match_result, "referee"),
    "notify_game_error": ("GAME_ERROR", ack, "referee"),
    "notify_round": ("ROUND_ANNOUNCEMENT", ack, "league_manager"),
    "update_standings": ("LEAGUE_STANDINGS_UPDATE", ack, "league_manager"),
    "notify_round_completed": ("ROUND_COMPLETED", ack, "league_manager"),
    "notify_league_completed": ("LEAGUE_COMPLETED", handle_league_completed, "league_manager"),
}
BY_MESSAGE_TYPE = {message_type: name for name, (message_type, _, _) in TOOLS.items()}


def refusal(name: str, msg: dict) -> dict | None:
    """A GAME_ERROR when the caller shows the wrong token for tool ``name``, else None."""
    _, _, caller = TOOLS[name]
    token = msg.get("auth_token")
    if caller == "league_manager":
        # Once registered, only our League Manager's notices count: anyone else's
        # LEAGUE_COMPLETED (a practice run, a classmate) would stop us in the middle of the league.
        if LM_TOKEN["value"] and not (isinstance(token, str) and same(token, LM_TOKEN["value"])):
            return game_error(msg, "E012", "AUTH_TOKEN_INVALID", "not our League Manager's league_manager_token")
        return None
    if not isinstance(token, str) or not token:
        return game_error(msg, "E011", "AUTH_TOKEN_MISSING", "referee calls must carry auth_token")
    with LOCK:
        bound = MATCH_TOKENS.get(msg.get("match_id"))
    if name != "handle_game_invitation" and bound is not None and not same(token, bound):
        return game_error(msg, "E012", "AUTH_TOKEN_INVALID", "not the token of this match's invitation")
    return None


def call_tool(name: str, msg: dict) -> tuple[dict, bool]:
    """(reply message, is_error) for a league message sent to tool ``name``."""
    refused = refusal(name, msg)
    if refused is not None:
        return refused, True
    answer = TOOLS[name][1](msg)
    return answer, answer["message_type"] == "GAME_ERROR"


def handle_rpc(request: dict) -> dict | None:
    """One JSON-RPC request → its response (None for a notification)."""
    rid, method, params = request.get("id"), request.get("method"), request.get("params") or {}

    def result(value: dict) -> dict:
        return {"jsonrpc": "2.0", "id": rid, "result": value}

    if rid is None:  # notifications (e.g. notifications/initialized) get no answer
        return None
    if method == "initialize":
        version = params.get("protocolVersion") or "2025-06-18"
        return result({"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": {"name": ME["name"]}})
    if method == "ping":
        return result({})
    if method == "tools/list":
        tools = [{"name": n, "description": t[0], "inputSchema": {"type": "object"}} for n, t in TOOLS.items()]
        return result({"tools": tools})
    if method == "tools/call":  # the MCP form: {"name": tool, "arguments": message}
        name, message = params.get("name"), params.get("arguments") or {}
        if name not in TOOLS:
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": f"Unknown tool: {name}"}}
        answer, is_error = call_tool(name, message)
        text = json.dumps(answer)
        return result({"content": [{"type": "text", "text": text}], "structuredContent": answer, "isError": is_error})
    name = method if method in TOOLS else BY_MESSAGE_TYPE.get(method)  # the direct form
    if name is None:
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"Method not found: {method}"}}
    return result(call_tool(name, params)[0])


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        if self.path.rstrip("/") != "/mcp":
            return self.send_json(404, {"error": "POST /mcp"})
        try:
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        except ValueError:
            return self.send_json(
                400, {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
            )
        response = handle_rpc(request) if isinstance(request, dict) else None
        if response is None:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self.send_json(200, response)

    def do_GET(self) -> None:  # noqa: N802
        self.send_json(405, {"error": "only POST"})

    def send_json(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:  # keep the console for results
        pass


def post(url: str, method: str, params: dict, timeout: float = 10.0) -> dict:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        result = json.loads(response.read()).get("result") or {}
    return result.get("structuredContent") or result  # either dialect's reply


def trouble(exc: Exception) -> str:
    """What went wrong with a call to the League Manager, in words."""
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused: is the League Manager running, at this address and port?"
    if isinstance(reason, socket.gaierror):
        return "its host name does not resolve: check the address"
    if isinstance(reason, (TimeoutError, socket.timeout)):
        return "no answer in time"
    return str(reason)


def open_leagues(league_url: str) -> str:
    """The leagues open for registration there (the LM's public list_leagues), as a sentence."""
    try:
        leagues = post(league_url, "list_leagues", {}).get("leagues") or []
    except (OSError, ValueError):
        return ""
    names = [x.get("league_id") for x in leagues if x.get("status") == "REGISTERING"]
    return f"open for registration: {', '.join(names)}" if names else "no league is open for registration there now"


def register(league_url: str, endpoint: str, league_id: str | None, attempts: int = 10) -> bool:
    # The course's registration, field for field. Without league_id it joins the one league whose
    # registration is open; protocol_version may be added ("2.1.0"), it is not required.
    message = {
        "protocol": "league.v2",
        "message_type": "LEAGUE_REGISTER_REQUEST",
        "sender": f"player:{ME['name']}",
        "timestamp": now(),
        "conversation_id": str(uuid.uuid4()),
        "player_meta": {
            "display_name": ME["name"],
            "version": "1.0.0",
            "game_types": ["even_odd", "even_odd_bo5"],
            "contact_endpoint": endpoint,
        },
    }
    if league_id:
        message["league_id"] = league_id
    for attempt in range(attempts):
        try:
            answer = post(league_url, "register_player", message)
        except urllib.error.HTTPError as exc:
            if exc.code < 500 and exc.code not in (408, 429):  # the URL is wrong: asking again will not help
                parts = urlsplit(league_url)
                mcp = urlunsplit((parts.scheme, parts.netloc, "/mcp", "", ""))
                hint = "" if parts.path.rstrip("/").endswith("/mcp") else f"; did you mean {mcp}?"
                print(f"HTTP {exc.code} from {league_url}: not a League Manager's /mcp endpoint{hint}", flush=True)
                return False
            problem = f"HTTP {exc.code} from {league_url}"
        except (OSError, ValueError) as exc:  # LM not up yet, or not reachable: try again
            problem = f"{league_url}: {trouble(exc)}"
        else:
            if answer.get("status") == "ACCEPTED":
                ME.update(
                    player_id=answer["player_id"], auth_token=answer["auth_token"], league_id=answer.get("league_id")
                )
                LM_TOKEN["value"] = answer.get("league_manager_token")
                print(f"registered as {ME['player_id']} in {ME['league_id']}", flush=True)
                return True
            why = answer.get("reason") or answer.get("error_description")
            if answer.get("error_code") != "E008":
                print(f"registration refused: {why}", flush=True)
                return False
            if league_id:  # E008 for a league we named: it does not exist
                print(f"no league {league_id!r} at {league_url}; {open_leagues(league_url)}", flush=True)
                return False
            if (answer.get("context") or {}).get("leagues"):  # several open: we must choose
                print(f"registration refused: {why} (run again with --league-id <one of them>)", flush=True)
                return False
            problem = why  # no league open yet: worth waiting for
        pause = min(2**attempt * 0.5, 10)
        if attempt + 1 < attempts:
            print(f"registration attempt {attempt + 1}/{attempts}: {problem}; retrying in {pause:g} s", flush=True)
            time.sleep(pause)
        else:
            print(f"registration attempt {attempt + 1}/{attempts}: {problem}; giving up", flush=True)
    return False


def main() -> int:
    parser = argparse.ArgumentParser(description="A minimal Even/Odd league player.")
    parser.add_argument("--port", type=int, default=8105)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--league-url", default="http://127.0.0.1:8000/mcp")
    parser.add_argument("--league-id")
    parser.add_argument("--name", default="MinimalPlayer")
    args = parser.parse_args()
    ME.update(name=args.name, league_url=args.league_url)

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://{args.host}:{server.server_address[1]}/mcp"
    print(f"serving {endpoint}", flush=True)
    if not register(args.league_url, endpoint, args.league_id):
        server.shutdown()
        return 1
    try:
        DONE.wait()
        time.sleep(0.5)  # let the last answer go out
    except KeyboardInterrupt:
        pass
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
