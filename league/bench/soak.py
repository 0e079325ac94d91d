"""``bench soak``: consecutive leagues with fault players until the time is up.

Each league is played by fresh processes (LM, conductor, referees, players incl. fault players)
and checked like ``bench league`` (a lost or double result fails the check). Per league we keep
every process's RSS, open file descriptors and sockets at the end of the league, so growth within
a league run (leaks) and across leagues is visible. Bounded by ``minutes`` and ``max_leagues``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from league.bench.league_run import BenchFailed, LeagueBench
from league.bench.machine import machine_info

# Faults a league must survive (players/faults.py); the rest of the field plays normally.
FAULT_MIX = ("random", "always_even", "slow", "late", "malformed", "invalid_parity", "http500", "wrong_type")


@dataclass
class SoakBench:
    minutes: float = 10.0
    players: int = 16
    referees: int = 2
    max_leagues: int = 1000
    out: Any = None

    def run(self) -> dict[str, Any]:
        ends = time.monotonic() + self.minutes * 60
        leagues: list[dict[str, Any]] = []
        failures: list[str] = []
        while time.monotonic() < ends and len(leagues) + len(failures) < self.max_leagues:
            bench = LeagueBench(players=self.players, referees=self.referees, mix=FAULT_MIX, out=self.out)
            try:
                report = bench.run()
            except BenchFailed as exc:
                failures.append(str(exc))
                continue
            leagues.append(
                {
                    "matches": report["matches"],
                    "wall_seconds": report["wall_seconds"],
                    "processes": {
                        name: {k: c.usage.__dict__[k] for k in ("rss_mib", "peak_rss_mib", "fds", "sockets")}
                        for name, c in ((c.name, c) for c in bench.cluster.children)
                    },
                }
            )
        growth = {}
        if len(leagues) >= 2:
            first, last = leagues[0]["processes"], leagues[-1]["processes"]
            for name in first:
                if name in last:
                    growth[name] = {k: round(last[name][k] - first[name][k], 1) for k in ("rss_mib", "fds", "sockets")}
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
