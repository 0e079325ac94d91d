"""``bench ceiling``: the physical reference for the league's HTTP traffic.

The same server stack (uvicorn + leagueproto) and client (AgentClient/aiohttp) exchange minimal
JSON-RPC requests on loopback with a given concurrency, in separate processes like the league.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

from league.bench.machine import percentiles
from league.bench.processes import read_usage
from leagueproto.client import AgentClient

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_port(port: int, timeout: float = 15.0) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"echo server did not listen on {port}")


async def _drive(url: str, calls: int, concurrency: int) -> tuple[float, list[float], int]:
    client = AgentClient()
    latencies: list[float] = []
    errors = 0
    remaining = calls

    async def worker() -> None:
        nonlocal remaining, errors
        while remaining > 0:
            remaining -= 1
            try:
                result = await client.call(url, "ping", {}, timeout=10)
                latencies.append(result.latency_ms)
            except Exception:
                errors += 1

    # Warm the connection pool first, so connects are not timed.
    await asyncio.gather(*(client.call(url, "ping", {}, timeout=10) for _ in range(concurrency)))
    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    await client.close()
    return elapsed, latencies, errors


def run_ceiling(calls: int = 20_000, concurrency: int = 32) -> dict[str, object]:
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "league.bench.echo_server", str(port)], env=env, cwd=ROOT)
    try:
        _wait_port(port)
        import uvloop

        elapsed, latencies, errors = uvloop.run(_drive(f"http://127.0.0.1:{port}/mcp", calls, concurrency))
        # The echo server's own CPU, read before it exits: RUSAGE_CHILDREN would add up every child
        # this process ever waited for (in `bench league --with-ceiling`, the whole league's).
        usage = read_usage(proc.pid)
    finally:
        proc.terminate()
        proc.wait(10)
    server_cpu = usage.cpu_seconds if usage is not None else None
    return {
        "calls": calls,
        "concurrency": concurrency,
        "wall_seconds": round(elapsed, 3),
        "calls_per_second": round(len(latencies) / elapsed, 1) if elapsed else 0.0,
        "errors": errors,
        "latency_ms": percentiles(latencies),
        "server_cpu_seconds": server_cpu,
        "stack": "uvicorn(httptools,uvloop) + leagueproto ASGI; client aiohttp via AgentClient",
    }


def median_ceiling(runs: list[dict[str, object]]) -> dict[str, object]:
    """The run of median calls/s among ``runs`` (the report of that run), with every run's calls/s
    under ``runs_calls_per_second``. One ceiling run varied by a quarter from the next on this VM
    (3,661–4,622 calls/s in one series), more than most changes to the league: the ratio is taken
    against the median of several."""
    if not runs:
        raise ValueError("no ceiling runs")
    ordered = sorted(runs, key=lambda run: float(run["calls_per_second"]))  # type: ignore[arg-type]
    return {**ordered[(len(ordered) - 1) // 2], "runs_calls_per_second": [run["calls_per_second"] for run in runs]}
