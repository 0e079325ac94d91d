"""A player as students write it from the course, run as its own process (standard library only).

What it does that ours does not: it carries a fixed id of its own (``--id P02``) and writes it in
every sender and ``player_id``, whatever id the League Manager gave it; it registers with the
course's message exactly (no league_id, no token kept anywhere), sending the same message again
when it gets no reply; and with ``--strict-sender`` it refuses any League Manager message whose
sender is not ``league_manager:<id>`` (``E002 Sender not registered``), as some students' agents
do. Every message it receives is appended to ``--log`` (one JSON object a line).

    python tests/compat/course_player.py --port 9301 --lm http://127.0.0.1:8000/mcp --id P02
"""

from __future__ import annotations

import argparse
import json
import random
import re
import threading
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

STRICT_LM = re.compile(r"^league_manager:[A-Za-z0-9_]+$")
NOTICES = {
    "notify_round",
    "update_standings",
    "notify_round_completed",
    "notify_league_completed",
    "notify_match_result",
    "notify_game_error",
}


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class CoursePlayer:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.lock = threading.Lock()
        self.registered = threading.Event()

    def envelope(self, message_type: str, conversation_id: str) -> dict[str, Any]:
        return {
            "protocol": "league.v2",
            "message_type": message_type,
            "sender": f"player:{self.args.id}",
            "timestamp": now(),
            "conversation_id": conversation_id,
        }

    def record(self, entry: dict[str, Any]) -> None:
        with self.lock, open(self.args.log, "a") as log:
            log.write(json.dumps(entry) + "\n")

    def answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.record({"method": method, "params": params})
        conversation_id = params.get("conversation_id", "conv")
        sender = str(params.get("sender", ""))
        if self.args.strict_sender and sender.startswith("league_manager") and not STRICT_LM.match(sender):
            return {
                **self.envelope("LEAGUE_ERROR", conversation_id),
                "error_code": "E002",
                "error_description": f"Sender not registered: {sender}",
            }
        if method == "handle_game_invitation":
            return {
                **self.envelope("GAME_JOIN_ACK", conversation_id),
                "match_id": params.get("match_id"),
                "player_id": self.args.id,
                "arrival_timestamp": now(),
                "accept": True,
            }
        if method == "choose_parity":
            return {
                **self.envelope("CHOOSE_PARITY_RESPONSE", conversation_id),
                "match_id": params.get("match_id"),
                "player_id": self.args.id,
                "parity_choice": random.choice(["even", "odd"]),
            }
        if method in NOTICES:
            return {**self.envelope("ACK", conversation_id), "status": "received"}
        raise LookupError(method)

    def register(self) -> None:
        """The course's registration; the same message again (same conversation) until accepted."""
        message = {
            **self.envelope("LEAGUE_REGISTER_REQUEST", f"conv-reg-{self.args.id}"),
            "player_meta": {
                "display_name": f"Course {self.args.id}",
                "version": "1.0.0",
                "game_types": ["even_odd"],
                "contact_endpoint": f"http://127.0.0.1:{self.args.port}/mcp",
            },
        }
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "register_player", "params": message}).encode()
        for _ in range(60):
            request = urllib.request.Request(self.args.lm, body, {"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=self.args.timeout) as response:
                    reply = json.loads(response.read())["result"]
            except (OSError, urllib.error.URLError, ValueError, KeyError):
                self.record({"registration": "no reply"})
                time.sleep(0.5)
                continue
            self.record({"registration": reply})
            if reply.get("status") == "ACCEPTED":
                self.registered.set()
                return
            time.sleep(0.5)


def handler(player: CoursePlayer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            try:
                body = {
                    "jsonrpc": "2.0",
                    "id": request.get("id"),
                    "result": player.answer(request["method"], request.get("params") or {}),
                }
            except LookupError:
                body = {
                    "jsonrpc": "2.0",
                    "id": request.get("id"),
                    "error": {"code": -32601, "message": "Method not found"},
                }
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--lm", required=True)
    parser.add_argument("--id", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--timeout", type=float, default=3.0)
    parser.add_argument("--strict-sender", action="store_true")
    player = CoursePlayer(parser.parse_args())
    server = ThreadingHTTPServer(("127.0.0.1", player.args.port), handler(player))
    threading.Thread(target=player.register, daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
