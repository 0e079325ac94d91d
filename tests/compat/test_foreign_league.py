"""Our player plays anywhere: ``runplayer`` completes a league run by a League Manager that is
not ours and does things its own way, as another implementation of the course may.

The League Manager below is written for this test with the standard library only, deliberately
different from ours: it signs as ``league_manager:LM01``, issues no tokens at all (neither the
player's ``auth_token`` nor a ``league_manager_token``), answers the registration with
``{"status": "registered", "id": "S-1"}``, writes every id as a string (``"round_id": "1"``,
match ids ``m-1``), timestamps with fractions and ``+00:00``, and referees the matches itself
as ``referee:R1`` without any token.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT
from tests.support.servers import Process, free_ports
from tests.support.waiting import wait_until

PLAYERS = 3  # three rounds with a bye each: every player plays twice


def now() -> str:
    return datetime.now(UTC).isoformat()  # e.g. 2025-01-15T10:30:00.123456+00:00


class StudentLeagueManager:
    """Registers players over JSON-RPC and, once all are in, runs a round robin against them."""

    def __init__(self) -> None:
        self.players: list[dict[str, Any]] = []  # {"id", "name", "endpoint"}
        self.replies: list[tuple[str, dict[str, Any]]] = []  # (method, reply) of every call made
        self.lock = threading.Lock()
        self.ids = itertools.count(1)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/mcp"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        lm = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                params = request.get("params") or {}
                if request.get("method") != "register_player":
                    body = {"jsonrpc": "2.0", "id": request.get("id"), "error": {"code": -32601, "message": "no"}}
                else:
                    body = {"jsonrpc": "2.0", "id": request.get("id"), "result": lm.register(params)}
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    def register(self, params: dict[str, Any]) -> dict[str, Any]:
        meta = params["player_meta"]
        with self.lock:
            player = {"id": f"S-{next(self.ids)}", "name": meta["display_name"], "endpoint": meta["contact_endpoint"]}
            self.players.append(player)
        return {"status": "registered", "id": player["id"], "league_id": "spring-cup", "note": "welcome"}

    # -- running the league -------------------------------------------------------------------
    def send(self, player: dict[str, Any], method: str, message_type: str, sender: str, **fields: Any) -> dict:
        message = {
            "protocol": "league.v2",
            "message_type": message_type,
            "sender": sender,
            "timestamp": now(),
            "conversation_id": f"c-{next(self.ids)}",
            "league_id": "spring-cup",
            **fields,
        }
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": message}
        reply = httpx.post(player["endpoint"], json=body, timeout=10).json()["result"]
        self.replies.append((method, reply))
        return reply

    def announce(self, method: str, message_type: str, **fields: Any) -> None:
        for player in self.players:
            self.send(player, method, message_type, "league_manager:LM01", **fields)

    def play(self, round_id: str, match_id: str, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
        referee = "referee:R1"
        choices = {}
        for me, other, role in ((a, b, "PLAYER_A"), (b, a, "PLAYER_B")):
            self.send(
                me,
                "handle_game_invitation",
                "GAME_INVITATION",
                referee,
                round_id=round_id,
                match_id=match_id,
                player_id=me["id"],
                game_type="even_odd",
                role_in_match=role,
                opponent_id=other["id"],
            )
        for me, other in ((a, b), (b, a)):
            reply = self.send(
                me,
                "choose_parity",
                "CHOOSE_PARITY_CALL",
                referee,
                round_id=round_id,
                match_id=match_id,
                player_id=me["id"],
                game_type="even_odd",
                context={"opponent_id": other["id"]},
            )
            choices[me["id"]] = reply["parity_choice"]
        number = 4
        parity = "even"
        winner = next((pid for pid, choice in choices.items() if choice == parity), None)
        status = "DRAW" if len(set(choices.values())) == 1 else "WIN"
        result = {
            "status": status,
            "winner_player_id": winner if status == "WIN" else None,
            "drawn_number": number,
            "choices": choices,
        }
        for me in (a, b):
            self.send(
                me,
                "notify_match_result",
                "GAME_OVER",
                referee,
                round_id=round_id,
                match_id=match_id,
                player_id=me["id"],
                game_result=result,
            )
        return {"winner": result["winner_player_id"], "players": [a["id"], b["id"]]}

    def run_league(self) -> None:
        points = {p["id"]: 0 for p in self.players}
        rounds = [(0, 1), (1, 2), (0, 2)]
        for number, (i, j) in enumerate(rounds, start=1):
            round_id, match_id = str(number), f"m-{number}"
            a, b = self.players[i], self.players[j]
            match = {
                "match_id": match_id,
                "game_type": "even_odd",
                "player_A_id": a["id"],
                "player_B_id": b["id"],
                "referee_endpoint": "http://127.0.0.1:1/mcp",
            }
            self.announce("notify_round", "ROUND_ANNOUNCEMENT", round_id=round_id, matches=[match])
            outcome = self.play(round_id, match_id, a, b)
            for pid in outcome["players"]:
                points[pid] += 3 if outcome["winner"] == pid else (1 if outcome["winner"] is None else 0)
            table = sorted(points.items(), key=lambda item: (-item[1], item[0]))
            standings = [{"rank": n, "player_id": pid, "points": pts} for n, (pid, pts) in enumerate(table, 1)]
            self.announce("update_standings", "LEAGUE_STANDINGS_UPDATE", round_id=round_id, standings=standings)
            self.announce(
                "notify_round_completed",
                "ROUND_COMPLETED",
                round_id=round_id,
                matches_played=1,
                next_round_id=str(number + 1) if number < len(rounds) else None,
            )
        champion = {"player_id": table[0][0], "display_name": "?", "points": table[0][1]}
        self.announce(
            "notify_league_completed",
            "LEAGUE_COMPLETED",
            total_rounds=len(rounds),
            total_matches=len(rounds),
            champion=champion,
            final_standings=standings,
        )

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def student_lm() -> Iterator[StudentLeagueManager]:
    lm = StudentLeagueManager()
    yield lm
    lm.close()


@pytest.mark.processes
def test_runplayer_completes_a_league_run_by_another_league_manager(student_lm, manage_py, tmp_path):
    port = free_ports(PLAYERS)
    log = tmp_path / "runplayer.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    args = [*manage_py, "runplayer", "--count", str(PLAYERS), "--port", str(port), "--name", "Visitor"]
    process = Process([*args, "--league-url", student_lm.url, "--strategy", "random"], env, str(log))
    try:
        wait_until(lambda: len(student_lm.players) == PLAYERS, timeout=30)
        student_lm.run_league()
        assert process.proc.wait(30) == 0  # it left at LEAGUE_COMPLETED, by itself
    finally:
        process.kill()
    output = log.read_text()

    # Every call was answered with a normal reply, none refused.
    rounds = 3
    assert len(student_lm.replies) == rounds * (3 * PLAYERS + 6) + PLAYERS  # 3 notices a round, 6 match calls
    refused = [(method, reply) for method, reply in student_lm.replies if reply.get("message_type") == "GAME_ERROR"]
    assert refused == []
    assert {reply["parity_choice"] for method, reply in student_lm.replies if method == "choose_parity"} <= {
        "even",
        "odd",
    }
    # Each player took its id from the reply, answered under it, and finished the league.
    registered = dict(re.findall(r"(Visitor-\d): registered as (S-\d) in spring-cup", output))
    assert sorted(registered) == [f"Visitor-{n}" for n in range(1, PLAYERS + 1)]
    assert sorted(registered.values()) == [f"S-{n}" for n in range(1, PLAYERS + 1)]
    assert output.count("league completed") == PLAYERS
    senders = {reply["sender"] for _, reply in student_lm.replies}
    assert senders == {f"player:S-{n}" for n in range(1, PLAYERS + 1)}
    # Unverified calls are said once per player and kind of caller, not once per call.
    assert output.count("calls (first: notify_round) are accepted unverified") == PLAYERS
    assert output.count("calls (first: handle_game_invitation) are accepted unverified") == PLAYERS
    assert "Traceback" not in output
