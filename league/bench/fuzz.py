"""``bench fuzz``: N invalid or odd requests over the LM, a referee, a player and a relay endpoint.

Real processes on loopback (the LM site under uvicorn, ``runreferee``, ``runplayer`` on its own
port and ``runplayer --connect`` behind the LM's relay), registered in a league of their own.
The requests are generated from a seed: malformed JSON, wrong types, deep nesting, huge strings,
wrong HTTP methods and content types, batches, unknown tools, messages with bad tokens. None is a
valid state change, so afterwards: no 5xx, no transport failure, the relay player still on its
first socket, and the rows of Player, Referee, Match and MatchResult exactly as before.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import secrets
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from league import actions
from league.bench.machine import machine_info
from league.bench.processes import Cluster, free_port, wait_for_port
from league.models import League, Match, MatchResult, Player, Referee
from leagueproto.envelope import make_message

CONNECTED = "connected to the relay as"  # players/connect.py, once per socket opened
TOOLS = (
    "register_player",
    "register_referee",
    "report_match_result",
    "league_query",
    "start_match",
    "run_match",
    "get_match_state",
    "handle_game_invitation",
    "choose_parity",
    "make_move",
    "notify_match_result",
    "notify_league_completed",
    "ping",
    "initialize",
    "tools/list",
    "tools/call",
    "resources/read",
    "no_such_tool",
)
MESSAGE_TYPES = ("GAME_INVITATION", "START_MATCH", "LEAGUE_QUERY", "GAME_OVER", "MATCH_RESULT_REPORT", "PING", "X")


@dataclass(frozen=True)
class Case:
    kind: str
    verb: str
    body: bytes | None
    content_type: str | None = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


def _junk(rng: random.Random, depth: int = 0) -> Any:
    """A JSON value of any shape."""
    roll = rng.random()
    if depth > 3 or roll < 0.5:
        return rng.choice([None, True, 0, -1, 2**70, 1.5e308, "", "é", "\u0000", "x" * rng.randint(1, 40), []])
    if roll < 0.75:
        return [_junk(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(("a", "auth_token", "sender", "match_id", "")): _junk(rng, depth + 1) for _ in range(3)}


def _message(rng: random.Random, league_id: str) -> dict[str, Any]:
    """A league message with a token nobody was given, some fields of the wrong type."""
    message = make_message(
        rng.choice(MESSAGE_TYPES),
        rng.choice(("referee:REF01", "league_manager", "player:P01", "player:x", "nobody")),
        auth_token=rng.choice((secrets.token_hex(32), "", None, "é")),
        league_id=rng.choice((league_id, "nosuch")),
        match_id=rng.choice(("R1M1", "R9M9", 7)),
        player_id=rng.choice(("P01", "P99", None)),
    )
    for key in rng.sample(list(message), rng.randint(0, 3)):
        message[key] = _junk(rng)
    return message


def make_case(rng: random.Random, league_id: str) -> Case:
    """One generated request; every kind is invalid for every endpoint."""
    kind = rng.choice(
        ("bad_json", "wrong_types", "deep", "huge", "wrong_verb", "content_type", "batch", "unknown", "bad_token")
    )
    rpc = {"jsonrpc": "2.0", "id": rng.randint(0, 10**6), "method": rng.choice(TOOLS)}
    if kind == "bad_json":
        text = json.dumps({**rpc, "params": _message(rng, league_id)})
        cut = rng.randint(0, max(0, len(text) - 1))
        body = rng.choice((text[:cut], text + "}", "\xff\xfe" + text, "{'a': 1}", "", "null", "[]", "[1,2"))
        return Case(kind, "POST", body.encode("utf-8", "surrogatepass"))
    if kind == "wrong_types":
        rpc = {k: _junk(rng) if rng.random() < 0.5 else v for k, v in rpc.items()}
        rpc["params"] = _junk(rng)
    elif kind == "deep":
        levels = rng.choice((50, 254, 1000, 5000))
        return Case(kind, "POST", ("[" * levels + "]" * levels).encode())
    elif kind == "huge":
        size = 2_000_000 if rng.random() < 0.02 else rng.choice((10_000, 100_000))  # over the body limit, rarely
        rpc["params"] = {**_message(rng, league_id), "display_name": "x" * size}
    elif kind == "wrong_verb":
        return Case(kind, rng.choice(("GET", "PUT", "DELETE", "PATCH", "OPTIONS")), json.dumps(rpc).encode())
    elif kind == "content_type":
        form = rng.choice(("text/plain", "multipart/form-data; boundary=x", "application/x-www-form-urlencoded", None))
        return Case(kind, "POST", b"--x\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--x--", form)
    elif kind == "batch":
        items = [{**rpc, "id": i, "params": _message(rng, league_id)} for i in range(rng.choice((0, 1, 5, 200)))]
        return Case(kind, "POST", json.dumps(items).encode())
    elif kind == "unknown":
        rpc["method"] = rng.choice(("no_such_tool", "rpc.discover", "tools/call", "__init__", "../mcp"))
        rpc["params"] = {"name": "no_such_tool", "arguments": _message(rng, league_id)}
    else:  # bad_token: a well-formed call of a real tool, with a token nobody holds
        token = secrets.token_hex(32)
        rpc["params"] = {**_message(rng, league_id), "auth_token": token}
        return Case(kind, "POST", json.dumps(rpc).encode(), headers={"Authorization": f"Bearer {token}"})
    return Case(kind, "POST", json.dumps(rpc, ensure_ascii=rng.random() < 0.5).encode())


def state_rows() -> dict[str, dict[int, dict[str, Any]]]:
    """Every row of the tables invalid input must not change (a few rows: the bench's league)."""
    return {
        model.__name__: {r["id"]: r for r in model.objects.values()} for model in (Player, Referee, Match, MatchResult)
    }


def summary(rows: dict[str, dict[int, dict[str, Any]]]) -> dict[str, Any]:
    """Row counts and a SHA-256 of the rows of each table."""
    return {
        name: {"rows": len(table), "sha256": hashlib.sha256(repr(sorted(table.items())).encode()).hexdigest()}
        for name, table in rows.items()
    }


def changes(before: dict[str, dict[int, dict[str, Any]]], after: dict[str, dict[int, dict[str, Any]]]) -> list[str]:
    """``table#id.column`` for every value that differs, and rows added or removed."""
    found = []
    for name, table in after.items():
        old = before.get(name, {})
        found += [f"{name}#{pk} added" for pk in table.keys() - old.keys()]
        found += [f"{name}#{pk} removed" for pk in old.keys() - table.keys()]
        for pk in table.keys() & old.keys():
            found += [f"{name}#{pk}.{col}" for col, value in table[pk].items() if old[pk].get(col) != value]
    return found


@dataclass
class FuzzBench:
    requests: int = 100_000
    concurrency: int = 16
    seed: int = 0
    out: Any = None
    log_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="league-fuzz-")))
    targets: tuple[str, ...] = ("lm", "referee", "player", "relay")  # which endpoints get requests
    env: dict[str, str] | None = None  # the agents' environment (default: this process's)
    failed: Counter = field(default_factory=Counter)  # "target kind verb: outcome" of each 5xx or transport error

    def say(self, text: str) -> None:
        if self.out is not None:
            self.out.write(text)

    def run(self) -> dict[str, Any]:
        cluster = Cluster(self.log_dir, env=self.env)
        ports = {name: free_port() for name in ("lm", "referee", "player")}
        lm_url = f"http://127.0.0.1:{ports['lm']}/mcp"
        try:
            league = actions.open_registration(
                actions.create_league(name="Fuzz", league_id=f"fuzz_{time.strftime('%Y%m%d_%H%M%S')}"), 3600.0
            )
            key = actions.generate_referee_key(league)
            cluster.start_site(ports["lm"])
            cluster.start_referees(lm_url, league.league_id, 1, ports["referee"], referee_key=key)
            cluster.start_players(lm_url, league.league_id, [("random", 1)], ports["player"], stay=True)
            # The relay player logs at INFO: it says so each time it opens a socket to the relay.
            args = cluster.manage("runplayer", "--connect", "--stay", "--name", "Relay", "--league-url", lm_url)
            cluster.spawn("players-relay", "players", [*args, "--league-id", league.league_id, "--log-level", "INFO"])
            targets = self._wait_for_agents(league, ports, lm_url)
            relay_log = self.log_dir / "players-relay.log"
            before = state_rows()
            started = time.monotonic()
            counts = asyncio.run(self._send(targets, league.league_id))
            seconds = time.monotonic() - started
            time.sleep(1.0)  # a dropped socket is noticed and reopened within this
            after = state_rows()
            cluster.check(("lm", "referee", "players"))
            sockets = relay_log.read_text().count(CONNECTED)
        finally:
            cluster.stop()
        server_errors = {t: sum(n for s, n in c.items() if s.isdigit() and int(s) >= 500) for t, c in counts.items()}
        transport = {t: sum(n for s, n in c.items() if not s.isdigit()) for t, c in counts.items()}
        report = {
            "bench": "fuzz",
            "requests": self.requests,
            "seconds": round(seconds, 1),
            "requests_per_second": round(self.requests / seconds, 1) if seconds else None,
            "seed": self.seed,
            "status_by_target": {t: dict(sorted(c.items())) for t, c in counts.items()},
            "server_errors": server_errors,
            "transport_errors": transport,
            "failures_by_kind": dict(self.failed.most_common()),
            "relay_sockets_opened": sockets,
            # A new socket shows in the log, or only in the player's row (the LM's relay channel).
            "relay_socket_dropped": sockets != 1 or any(".relay_channel" in c for c in changes(before, after)),
            "state": summary(after),
            "state_changes": changes(before, after),
            "machine": machine_info(),
            "logs": str(self.log_dir),
        }
        errors = [f"{t}: {n} 5xx" for t, n in server_errors.items() if n]
        errors += [f"{t}: {n} transport errors" for t, n in transport.items() if n]
        if report["relay_socket_dropped"]:
            errors.append(f"relay: the player's socket was dropped ({sockets} opened, as its log says)")
        if report["state_changes"]:
            errors.append(f"rows changed: {', '.join(report['state_changes'])}")
        report["errors"] = errors
        return report

    def _wait_for_agents(self, league: League, ports: dict[str, int], lm_url: str) -> dict[str, str]:
        wait_for_port(ports["referee"], 60)
        wait_for_port(ports["player"], 60)
        ends = time.monotonic() + 120
        while time.monotonic() < ends:
            players = {p.display_name: p.endpoint for p in Player.objects.filter(league=league)}
            relayed = [url for url in players.values() if "/relay/" in url]
            connected = Player.objects.filter(league=league).exclude(relay_channel="").exists()
            if len(players) == 2 and relayed and connected and Referee.objects.filter(league=league).exists():
                return {
                    "lm": lm_url,
                    "referee": f"http://127.0.0.1:{ports['referee']}/mcp",
                    "player": f"http://127.0.0.1:{ports['player']}/mcp",
                    "relay": relayed[0],
                }
            time.sleep(0.2)
        raise RuntimeError(f"the agents did not register within 120 s; logs in {self.log_dir}")

    async def _send(self, targets: dict[str, str], league_id: str) -> dict[str, Counter]:
        rng = random.Random(self.seed)
        names = sorted(name for name in targets if name in self.targets)
        cases = [(names[i % len(names)], make_case(rng, league_id)) for i in range(self.requests)]
        counts: dict[str, Counter] = {name: Counter() for name in names}
        queue = iter(cases)
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)

        async def worker(http: httpx.AsyncClient) -> None:
            for target, case in queue:
                headers = dict(case.headers)
                if case.content_type:
                    headers["Content-Type"] = case.content_type
                try:
                    response = await http.request(case.verb, targets[target], content=case.body, headers=headers)
                    outcome = str(response.status_code)
                except httpx.HTTPError as exc:
                    outcome = type(exc).__name__
                counts[target][outcome] += 1
                if not outcome.isdigit() or int(outcome) >= 500:
                    self.failed[f"{target} {case.kind} {case.verb}: {outcome}"] += 1

        async with httpx.AsyncClient(timeout=10.0, limits=limits) as http:
            last = time.monotonic()
            tasks = [asyncio.create_task(worker(http)) for _ in range(self.concurrency)]
            while not all(task.done() for task in tasks):
                await asyncio.sleep(1.0)
                if time.monotonic() - last > 15:
                    last = time.monotonic()
                    self.say(f"fuzz: {sum(sum(c.values()) for c in counts.values())} / {self.requests} sent")
            await asyncio.gather(*tasks)
        return counts
