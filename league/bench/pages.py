"""``bench pages``: how many first pages of a league the LM serves a second, and what each costs
it. A league is played to its end (``bench league``'s, its processes stopped after it), then the
LM alone serves ``pages`` loads of its page (``GET /leagues/<id>/``, what a new viewer's browser
asks first), ``concurrency`` at a time, from this process (aiohttp). A class opening the page
together needs that rate: 500 viewers arriving within 2 s ask for 250 pages a second, on top of
the league. Reported: pages a second, latency (p50/p95/p99), bytes a page, the LM's CPU a page
and its peak RSS. Every answer must be the league's page (status 200, its id in it)."""

from __future__ import annotations

import asyncio
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from league.bench.league_run import BenchFailed, LeagueBench
from league.bench.machine import machine_info, percentiles
from league.bench.processes import Cluster, free_port


@dataclass
class PagesBench:
    players: int = 100
    referees: int = 2
    pages: int = 500
    concurrency: int = 50
    lm_server: str = "uvicorn"
    lm_workers: int = 1
    timeout: float = 900.0
    log_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="league-bench-pages-")))
    out: Any = None

    def run(self) -> dict[str, Any]:
        league = LeagueBench(
            players=self.players, referees=self.referees, timeout=self.timeout, log_dir=self.log_dir, out=self.out
        ).run()
        league_id = league["league_id"]
        cluster = Cluster(self.log_dir / "pages")  # the LM's log beside the league's own
        cluster.log_dir.mkdir(exist_ok=True)
        port = free_port()
        try:
            lm = cluster.start_site(port, self.lm_server, self.lm_workers)
            url = f"http://127.0.0.1:{port}/leagues/{league_id}/"
            asyncio.run(self._load(url, league_id, 1))  # the page rendered once, as the league left it
            cluster.mark()
            started = time.perf_counter()
            latencies, sizes = asyncio.run(self._load(url, league_id, self.pages))
            wall = time.perf_counter() - started
            cluster.sample()
        finally:
            cluster.stop()
        cpu = lm.usage.cpu_seconds - (lm.cpu_at_mark or 0.0)
        return {
            "players": self.players,
            "matches": league["matches"],
            "league_id": league_id,
            "lm_server": self.lm_server,
            "lm_workers": self.lm_workers,
            "pages": self.pages,
            "concurrency": self.concurrency,
            "seconds": round(wall, 3),
            "pages_per_second": round(self.pages / wall, 1),
            "latency_ms": percentiles(latencies),
            "page_kib": round(sum(sizes) / len(sizes) / 1024, 1),
            "lm_cpu_ms_per_page": round(1000 * cpu / self.pages, 2),
            "lm_peak_rss_mib": lm.usage.peak_rss_mib,
            "valid": True,
            "machine": machine_info(),
        }

    async def _load(self, url: str, league_id: str, count: int) -> tuple[list[float], list[int]]:
        """``count`` loads of ``url``, ``concurrency`` at a time: their latencies (ms) and sizes."""
        import aiohttp  # as the spectators' bench loads its first pages (league/bench/spectator.py)

        latencies: list[float] = []
        sizes: list[int] = []
        slots = asyncio.Semaphore(self.concurrency)
        connector = aiohttp.TCPConnector(limit=self.concurrency)
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60.0)) as client:

            async def one() -> None:
                async with slots:
                    asked = time.perf_counter()
                    async with client.get(url) as response:
                        body = await response.read()
                    latencies.append(1000 * (time.perf_counter() - asked))
                    if response.status != 200 or league_id.encode() not in body:
                        raise BenchFailed(f"{url} answered {response.status}, not the league's page")
                    sizes.append(len(body))

            await asyncio.gather(*(one() for _ in range(count)))
        return latencies, sizes
