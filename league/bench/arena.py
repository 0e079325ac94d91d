"""``bench arena``: a practice arena played by real processes on loopback, measured and checked.

The LM site, ``referees`` referees, ``agents`` players (a mix of strategies, one ``runplayer
--count`` host) and two house bots register with the ordinary registration; the arena is opened
(no hourly cap) and the conductor drives it for ``seconds`` after a warm-up. Half-way, one more
agent joins: the time from its registration to its first rated match is measured. Checked: every
result is rated exactly once (two rating changes per match, one per player, none for a match
both sides lost technically), and each rating is its latest change's.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db.models import Count

from league import actions
from league.actions.arena import open_arena
from league.bench.league_run import QUICK_TIMEOUTS as FAST
from league.bench.machine import machine_info
from league.bench.processes import Cluster, free_port, free_port_run
from league.models import Arena, League, MatchResult, Player, Rating, RatingChange

MIX = "random,adaptive,always_even,alternate"


def check_ratings(league: League) -> list[str]:
    """What does not add up in the arena's ratings (empty: all is well)."""
    problems = []
    per_match = RatingChange.objects.filter(league=league).values("match").annotate(n=Count("pk"))
    doubled = [row["match"] for row in per_match if row["n"] != 2]
    if doubled:
        problems.append(f"{len(doubled)} matches without exactly two rating changes")
    rated = set(RatingChange.objects.filter(league=league).values_list("match_id", flat=True))
    results = MatchResult.objects.filter(league=league).exclude(outcome=MatchResult.Outcome.BOTH_LOSE)
    unrated = set(results.values_list("match_id", flat=True)) - rated
    if unrated:
        problems.append(f"{len(unrated)} results not rated")
    players = Player.objects.filter(league=league)
    for rating in Rating.objects.filter(changes__league=league).distinct():
        last = rating.changes.order_by("-pk").first()
        if last is not None and (last.mu, last.sigma) != (rating.mu, rating.sigma):
            problems.append(f"rating {rating.identity} is not its latest change's")
    if not players.exists():
        problems.append("no player registered")
    return problems


@dataclass
class ArenaBench:
    agents: int = 20
    referees: int = 2
    max_concurrent: int = 16
    seconds: float = 60.0
    warmup: float = 10.0
    out: Any = None
    log_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="league-arena-")))

    def say(self, line: str) -> None:
        if self.out is not None:
            self.out.write(line)

    def run(self) -> dict[str, Any]:
        league_id = "bench_arena"
        league = actions.create_league(
            name="Bench arena", league_id=league_id, schedule_format="arena", max_players=self.agents + 10, **FAST
        )
        league = open_arena(league)
        Arena.objects.filter(league=league).update(max_matches_per_hour=0)
        key = actions.generate_referee_key(league)
        cluster = Cluster(self.log_dir)
        try:
            port = free_port()
            cluster.start_site(port)
            lm = f"http://127.0.0.1:{port}/mcp"
            cluster.start_referees(
                lm, league_id, self.referees, free_port_run(self.referees), self.max_concurrent, referee_key=key
            )
            cluster.start_players(lm, league_id, [(MIX, self.agents)], free_port_run(self.agents), names={MIX: "Agent"})
            cluster.start_players(lm, league_id, [("random", 2)], free_port_run(2), names={"random": "house"})
            deadline = time.monotonic() + 120
            while Player.objects.filter(league=league).count() < self.agents + 2 or (
                league.referees.count() < self.referees
            ):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"agents did not register in 120 s; logs in {self.log_dir}")
                time.sleep(0.2)
            cluster.start_conductor(league_id, poll=0.01)
            self.say(f"arena: {self.agents} agents and 2 house bots registered; warming up {self.warmup:g} s\n")
            time.sleep(self.warmup)
            cluster.check()
            results_before, began = MatchResult.objects.filter(league=league).count(), time.monotonic()
            cluster.mark()
            time.sleep(self.seconds / 2)
            cluster.start_players(lm, league_id, [("random", 1)], free_port_run(1), names={"random": "Late"})
            to_first = self._first_rated_match(league, began)
            rest = self.seconds - (time.monotonic() - began)
            if rest > 0:
                time.sleep(rest)
            cluster.check()
            cluster.sample()
            results = MatchResult.objects.filter(league=league).count() - results_before
            elapsed = time.monotonic() - began
            usage = cluster.usage()
        finally:
            cluster.stop()
        problems = check_ratings(league)
        technical = MatchResult.objects.filter(league=league).exclude(technical_loss_a=False, technical_loss_b=False)
        return {
            "bench": "arena",
            "agents": self.agents,
            "house_bots": 2,
            "referees": self.referees,
            "max_concurrent": self.max_concurrent,
            "seconds": round(elapsed, 1),
            "results": results,
            "matches_per_second": round(results / elapsed, 2),
            "rated_matches_total": RatingChange.objects.filter(league=league).values("match").distinct().count(),
            "results_with_technical_loss": technical.count(),
            "late_agent_first_rated_match_seconds": to_first,
            "valid": not problems and to_first is not None,
            "errors": problems,
            "processes": usage,
            "logs": str(self.log_dir),
            "machine": machine_info(),
        }

    def _first_rated_match(self, league: League, began: float) -> float | None:
        """Seconds from the late agent's registration to its first rated match (None: none in time)."""
        while not Player.objects.filter(league=league, display_name="Late").exists():
            if time.monotonic() - began > self.seconds + 60:
                return None
            time.sleep(0.02)
        late = Player.objects.get(league=league, display_name="Late")
        while time.monotonic() - began < self.seconds + 60:
            first = RatingChange.objects.filter(player=late).order_by("pk").first()
            if first is not None:
                return round((first.at - late.registered_at).total_seconds(), 2)
            time.sleep(0.02)
        return None
