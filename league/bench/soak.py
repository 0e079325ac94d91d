"""``bench soak``: consecutive leagues with fault players on one long-lived LM and conductor.

The LM site and the conductor start once and serve every league, as they would for a class, so a
leak in either shows as growth of its RSS, open file descriptors or sockets from league to league.
Each league gets fresh referees and players (players exit after LEAGUE_COMPLETED, as students'
agents do), including fault players, and is checked like ``bench league``: a lost or doubled result
fails it. Bounded by ``minutes`` and ``max_leagues``; loopback only; stops by itself.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from league import actions
from league.bench.league_run import BenchFailed, LeagueBench, validate_league
from league.bench.machine import machine_info
from league.bench.processes import Cluster, free_port, free_port_run, strategy_groups

# Faults a league must survive (players/faults.py); the rest of the field plays normally.
FAULT_MIX = ("random", "always_even", "slow", "late", "malformed", "invalid_parity", "http500", "wrong_type")
WATCHED = ("rss_mib", "fds", "sockets")


@dataclass
class SoakBench:
    minutes: float = 10.0
    players: int = 16
    referees: int = 2
    max_leagues: int = 1000
    out: Any = None
    log_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="league-soak-")))

    def run(self) -> dict[str, Any]:
        ends = time.monotonic() + self.minutes * 60
        core = Cluster(self.log_dir)  # the long-lived processes: LM site and conductor
        port = free_port()
        lm_url = f"http://127.0.0.1:{port}/mcp"
        leagues: list[dict[str, Any]] = []
        failures: list[str] = []
        try:
            core.start_site(port)
            core.start_conductor(None, poll=0.05)
            while time.monotonic() < ends and len(leagues) + len(failures) < self.max_leagues:
                number = len(leagues) + len(failures) + 1
                try:
                    leagues.append(self._one_league(core, lm_url, number))
                except BenchFailed as exc:
                    failures.append(f"league {number}: {exc}")
                core.check()
        finally:
            core.stop()
        growth = {}
        if len(leagues) >= 2:
            first, last = leagues[0]["long_lived"], leagues[-1]["long_lived"]
            growth = {name: {k: round(last[name][k] - first[name][k], 1) for k in WATCHED} for name in first}
        return {
            "minutes": self.minutes,
            "leagues": len(leagues),
            "lost_or_bad_leagues": len(failures),
            "failures": failures,
            "errors": len(failures),
            "matches": sum(x["matches"] for x in leagues),
            "per_league": leagues,
            "growth_first_to_last_league": growth,
            "machine": machine_info(),
        }

    def _one_league(self, core: Cluster, lm_url: str, number: int) -> dict[str, Any]:
        bench = LeagueBench(players=self.players, referees=self.referees, mix=FAULT_MIX, out=self.out)
        bench.cluster = agents = Cluster(self.log_dir / f"league{number}")
        agents.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            league = bench.create_league(suffix=f"_{number}")  # several leagues may start within a second
            agents.start_referees(
                lm_url,
                league.league_id,
                self.referees,
                free_port_run(self.referees),
                int(bench.max_concurrent or 1),
                referee_key=actions.generate_referee_key(league),
            )
            agents.start_players(
                lm_url, league.league_id, strategy_groups(self.players, FAULT_MIX), free_port_run(self.players)
            )
            bench.wait_for_registrations(league)
            started = time.monotonic()
            actions.start_league(league)
            league = bench.follow(league)
            problems = validate_league(league, self.players)
        finally:
            agents.stop()
        if problems:
            raise BenchFailed("; ".join(problems))
        core.sample()
        return {
            "league_id": league.league_id,
            "matches": league.matches.count(),
            "wall_seconds": round(time.monotonic() - started, 2),
            "long_lived": {c.name: {k: getattr(c.usage, k) for k in WATCHED} for c in core.children},
        }
