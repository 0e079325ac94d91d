"""``bench api``: the LM's ``/mcp`` under a steady, mixed load from a separate process.

The LM site runs as its own process (uvicorn or daphne); this process registers ``players``
players (their tokens are then used), and sends ``rate`` requests per second for ``seconds``
seconds on an open schedule (a request is sent when due, whether or not earlier ones have
answered, so a slow server shows up as latency instead of a lower rate). The mix: league_query
GET_STANDINGS / GET_NEXT_MATCH / GET_PLAYER_STATS, get_standings, and register_player (new players).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from league import actions
from league.bench.league_run import BENCH_TIMEOUTS
from league.bench.machine import machine_info, percentiles
from league.bench.processes import Cluster, free_port
from leagueproto.client import AgentClient, CallFailed
from leagueproto.endpoint_policy import SERVICE_PORTS
from leagueproto.envelope import AGENT_PROTOCOL_VERSION, make_message

MIX = ("league_query", "league_query", "get_standings", "get_standings", "register_player")


def registration(league_id: str, n: int, lm_port: int) -> dict[str, Any]:
    """Bench player ``n``'s registration: a contact endpoint of its own that nobody serves (the
    bench only registers), on a port the LM accepts: never its own (the bench's free ports come
    from the same range) nor a service's."""
    first = 20000
    port = first + n % 40000
    for refused in sorted(p for p in {lm_port, *SERVICE_PORTS} if p >= first):  # the n-th port that is neither
        if refused <= port:
            port += 1
    return make_message(
        "LEAGUE_REGISTER_REQUEST",
        f"player:bench{n}",
        league_id=league_id,
        player_meta={
            "display_name": f"Bench-{n}",
            "version": "1.0.0",
            "protocol_version": AGENT_PROTOCOL_VERSION,
            "game_types": ["even_odd"],
            "contact_endpoint": f"http://127.0.0.1:{port}/mcp",
        },
    )


@dataclass
class ApiBench:
    rate: float = 200.0
    seconds: float = 30.0
    players: int = 100
    lm_server: str = "uvicorn"
    log_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="league-bench-api-")))

    def run(self) -> dict[str, Any]:
        planned = int(self.rate * self.seconds)
        league = actions.create_league(
            name="Bench API",
            league_id=f"bench_api_{time.strftime('%Y%m%d_%H%M%S')}",
            max_players=self.players,
            **BENCH_TIMEOUTS,
        )
        league = actions.open_registration(league, 3600.0)
        # New players join a second open league, so the league being queried keeps a class's size
        # (``players``) instead of growing by rate × seconds / 5 over the run.
        newcomers = actions.create_league(
            name="Bench API newcomers",
            league_id=f"bench_api_new_{time.strftime('%Y%m%d_%H%M%S')}",
            max_players=planned + 10,
            **BENCH_TIMEOUTS,
        )
        newcomers = actions.open_registration(newcomers, 3600.0)
        cluster = Cluster(self.log_dir)
        port = free_port()
        try:
            lm = cluster.start_site(port, self.lm_server)
            url = f"http://127.0.0.1:{port}/mcp"
            report = asyncio.run(self._load(url, port, league.league_id, newcomers.league_id, planned))
            cluster.sample()
        finally:
            cluster.stop()
        report.update(
            lm_server=self.lm_server,
            lm_cpu_seconds=lm.usage.cpu_seconds,
            lm_peak_rss_mib=lm.usage.peak_rss_mib,
            machine=machine_info(),
        )
        return report

    async def _load(self, url: str, lm_port: int, league_id: str, newcomers_id: str, planned: int) -> dict[str, Any]:
        client = AgentClient()
        agents = []
        for n in range(self.players):
            reply = (await client.call(url, "register_player", registration(league_id, n, lm_port), timeout=10)).reply
            agents.append((reply["player_id"], reply["auth_token"]))
        latencies: dict[str, list[float]] = defaultdict(list)
        errors: Counter = Counter()
        counter = iter(range(self.players, self.players + planned))

        async def one(i: int) -> None:
            kind = MIX[i % len(MIX)]
            player_id, token = agents[i % len(agents)]
            if kind == "league_query":
                query = ("GET_STANDINGS", "GET_NEXT_MATCH", "GET_PLAYER_STATS")[i % 3]
                params = make_message(
                    "LEAGUE_QUERY", f"player:{player_id}", auth_token=token, league_id=league_id, query_type=query
                )
            elif kind == "get_standings":
                params = {"league_id": league_id}
            else:
                params = registration(newcomers_id, next(counter), lm_port)
            try:
                result = await client.call(url, kind, params, timeout=10)
            except CallFailed as exc:
                errors[f"{kind}: {exc.code.value}"] += 1
                return
            accepted = kind != "register_player" or result.reply.get("status") == "ACCEPTED"
            if result.is_error or not accepted:
                errors[f"{kind}: {result.reply.get('error_code') or result.reply.get('reason')}"] += 1
            latencies[kind].append(result.latency_ms)

        tasks = []
        began = time.perf_counter()
        for i in range(planned):
            due = began + i / self.rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i)))
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - began
        await client.close()
        every = [v for values in latencies.values() for v in values]
        return {
            "requests": planned,
            "rate_asked": self.rate,
            "rate_achieved": round(planned / elapsed, 1),
            "seconds": round(elapsed, 2),
            "latency_ms": percentiles(every),
            "latency_ms_by_kind": {k: {**percentiles(v), "n": len(v)} for k, v in sorted(latencies.items())},
            "errors": sum(errors.values()),
            "errors_by_kind": dict(errors),
        }
