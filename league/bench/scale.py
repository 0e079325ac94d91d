"""``bench scale``: matches/s by league size (chart into docs/), and a burst of registrations."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from league import actions
from league.bench.api import registration
from league.bench.league_run import BENCH_TIMEOUTS, LeagueBench
from league.bench.machine import machine_info, percentiles
from league.bench.processes import Cluster, free_port
from leagueproto.client import AgentClient, CallFailed


@dataclass
class ScaleBench:
    sizes: list[int] = field(default_factory=lambda: [10, 25, 50, 100])
    referees: int = 2
    registrations: int = 1000
    concurrency: int = 50
    chart: str | None = "docs/benchmarks-scale.svg"
    out: Any = None

    def run(self) -> dict[str, Any]:
        """The leagues of ``sizes`` (none: the registration burst alone), then the burst."""
        leagues = []
        for size in self.sizes:
            report = LeagueBench(players=size, referees=self.referees, out=self.out).run()
            leagues.append({k: report[k] for k in ("players", "matches", "wall_seconds", "matches_per_second")})
        burst = self.registration_burst()
        first = leagues[0]["matches_per_second"] if leagues else 0
        last = leagues[-1]["matches_per_second"] if leagues else 0
        result: dict[str, Any] = {
            "leagues": leagues,
            "fall_from_smallest_to_largest": round(1 - last / first, 3) if first else None,
            "registration_burst": burst,
            "errors": burst["errors"],
            "machine": machine_info(),
        }
        if self.chart and leagues:
            path = Path(self.chart)
            if not path.is_absolute():
                path = Path(settings.BASE_DIR) / path
            path.write_text(svg_chart(leagues))
            result["chart"] = str(path)
        return result

    def registration_burst(self) -> dict[str, Any]:
        """``registrations`` players register at once (``concurrency`` in flight) with one LM; with
        the CPU the LM spent on them (``lm_cpu_seconds``: this machine's other work, the client's
        included, does not count there, so it is the steadier figure)."""
        league = actions.create_league(
            name="Bench registrations",
            league_id=f"bench_reg_{time.strftime('%Y%m%d_%H%M%S')}",
            max_players=self.registrations + 10,
            **BENCH_TIMEOUTS,
        )
        actions.open_registration(league, 3600.0)
        cluster = Cluster(LeagueBench().log_dir)
        port = free_port()
        try:
            lm = cluster.start_site(port)
            lm.sample()
            before = lm.usage.cpu_seconds
            report = {"league_id": league.league_id}
            report |= asyncio.run(self._burst(f"http://127.0.0.1:{port}/mcp", port, league.league_id))
            lm.sample()
            report["lm_cpu_seconds"] = round(lm.usage.cpu_seconds - before, 2)
            return report
        finally:
            cluster.stop()

    async def _burst(self, url: str, lm_port: int, league_id: str) -> dict[str, Any]:
        client = AgentClient()
        latencies: list[float] = []
        errors: list[str] = []
        queue = iter(range(self.registrations))

        async def worker() -> None:
            for n in queue:
                try:
                    result = await client.call(url, "register_player", registration(league_id, n, lm_port), timeout=30)
                except CallFailed as exc:
                    errors.append(f"call failed: {exc}")
                    continue
                if result.is_error or result.reply.get("status") != "ACCEPTED":
                    errors.append(f"answered: {str(result.reply)[:300]}")
                else:
                    latencies.append(result.latency_ms)

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(self.concurrency)))
        elapsed = time.perf_counter() - began
        await client.close()
        return {
            "registrations": self.registrations,
            "accepted": len(latencies),
            "errors": len(errors),
            "first_errors": errors[:5],  # why, when any
            "seconds": round(elapsed, 2),
            "per_second": round(len(latencies) / elapsed, 1) if elapsed else 0.0,
            "latency_ms": percentiles(latencies),
        }


def svg_chart(leagues: list[dict[str, Any]], width: int = 560, height: int = 320) -> str:
    """A small bar chart of matches/s by league size (plain SVG, no plotting dependency)."""
    pad, top = 50, 30
    peak = max((x["matches_per_second"] for x in leagues), default=1) or 1
    bar = (width - 2 * pad) / max(1, len(leagues))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
        'font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14">matches/s by league size '
        "(even_odd, 2 referees)</text>",
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="black"/>',
    ]
    for i, league in enumerate(leagues):
        h = (height - pad - top) * league["matches_per_second"] / peak
        x = pad + i * bar + bar * 0.15
        y = height - pad - h
        parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar * 0.7:.1f}" height="{h:.1f}" fill="#4a7bd0"/>')
        parts.append(
            f'<text x="{x + bar * 0.35:.1f}" y="{y - 4:.1f}" text-anchor="middle">{league["matches_per_second"]}</text>'
        )
        parts.append(
            f'<text x="{x + bar * 0.35:.1f}" y="{height - pad + 16}" text-anchor="middle">{league["players"]} players'
            "</text>"
        )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


__all__ = ["ScaleBench", "percentiles", "svg_chart"]
