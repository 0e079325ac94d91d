"""``bench league``: one whole league through real HTTP between real agent processes.

Starts the LM site, the conductor, referees and player hosts on loopback (the processes of
``manage.py demo``, see :mod:`league.bench.processes`), plays one league with short timeouts
and instant strategies, then reads what happened from the database (the Event log, each
result's match log) and checks the league is complete and correct before reporting.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

from league import actions
from league.bench.machine import machine_info, percentiles
from league.bench.processes import (
    Cluster,
    busy_share,
    free_port,
    free_port_run,
    machine_cpu_times,
)
from league.conductor import delivery_log
from league.models import AgentStatus, Bye, Event, League, Match, MatchResult, format_problem
from league.standings import ranking_results
from leagueproto.scoring import BYE_POINTS

# Instant strategies only: the bench measures the platform, not the players' thinking.
INSTANT_MIX = ("random", "always_even", "always_odd", "alternate")
BENCH_TIMEOUTS = {
    "join_timeout": 1.0,
    "move_timeout": 2.0,
    "game_over_timeout": 1.0,
    "report_timeout": 5.0,
    "default_timeout": 5.0,
    "retries": 1,
    "retry_delay": 0.2,
    "match_deadline": 60.0,
    "rate_limit_per_minute": 10_000_000,  # one loopback address makes every call
}
# Shorter still, for leagues of a few agents that must meet failures fast (the arena bench; the
# recovery tests).
QUICK_TIMEOUTS = {
    "join_timeout": 1.0,
    "move_timeout": 1.0,
    "game_over_timeout": 1.0,
    "report_timeout": 2.0,
    "default_timeout": 1.0,
    "retries": 1,
    "retry_delay": 0.2,
    "match_deadline": 20.0,
}


class BenchFailed(Exception):
    """The league did not complete, or its results do not add up."""


@dataclass
class LeagueBench:
    players: int = 100
    referees: int = 2
    game: str = "even_odd"
    schedule_format: str = "single"  # single, double, swiss (with ``rounds``) or knockout
    rounds: int = 0  # Swiss: rounds to play
    max_concurrent: int | None = None  # per referee; default: a whole round at once
    # runplayer processes, each hosting its share of the players with the whole mix dealt out in
    # turn. The players are the load, not the platform, and one busy host costs less per call than
    # several (more requests per wake-up, fewer processes to switch between): in a 100-player
    # league the players took ~15 CPU-s in one host, ~17 in two, ~20 in four (2026-11-27).
    player_hosts: int = 1
    lm_server: str = "uvicorn"
    lm_workers: int = 1
    mix: tuple[str, ...] = INSTANT_MIX
    connect: bool = False  # every player connects out to the LM's relay (league/relay/)
    poll: float = field(default_factory=lambda: settings.CONDUCTOR_POLL)
    timeout: float = 900.0
    log_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="league-bench-")))
    out: Any = None
    cluster: Cluster = field(init=False)
    busy: float = field(init=False, default=0.0)  # the machine's busy share during the league
    lm_port: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.cluster = Cluster(self.log_dir)
        problem = format_problem(self.schedule_format, self.rounds, self.players)
        if problem:
            raise BenchFailed(problem)
        if self.max_concurrent is None:
            per_round = max(1, self.players // 2)
            self.max_concurrent = max(2, -(-per_round // self.referees))

    @property
    def concurrency(self) -> int:
        """In-flight calls at full capacity: two players per running match."""
        return self.referees * int(self.max_concurrent or 1) * 2

    def say(self, text: str) -> None:
        if self.out is not None:
            self.out.write(text + "\n")
            self.out.flush()

    # -- running ----------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        try:
            league = self.create_league()
            self.lm_port = lm_port = free_port()
            lm_url = f"http://127.0.0.1:{lm_port}/mcp"
            self.cluster.start_site(lm_port, self.lm_server, self.lm_workers)
            self.cluster.start_conductor(league.league_id, self.poll)
            self.cluster.start_referees(
                lm_url,
                league.league_id,
                self.referees,
                free_port_run(self.referees),
                int(self.max_concurrent or 1),
                referee_key=actions.generate_referee_key(league),  # the run's own key (docs/operations.md)
            )
            mix = ",".join(self.mix)  # runplayer deals it out in turn
            self.cluster.start_players(
                lm_url,
                league.league_id,
                [(mix, self.players)],
                free_port_run(self.players),
                hosts_per_group=self.player_hosts,
                stay=True,
                names={mix: "Bench"},
                connect=self.connect,
            )
            registration_seconds = self.wait_for_registrations(league)
            self.cluster.mark()
            machine_before = machine_cpu_times()
            started = timezone.now()
            actions.start_league(league)
            self.say(f"league {league.league_id}: {self.players} players, {self.referees} referees, started")
            league = self.follow(league)
            self.cluster.sample()
            self.busy = busy_share(machine_before, machine_cpu_times())
            report = self.report(league, started, registration_seconds)
        finally:
            self.cluster.stop()
        return report

    def create_league(self, suffix: str = "") -> League:
        suffix = suffix or ("_relay" if self.connect else "")
        league_id = f"bench_{time.strftime('%Y%m%d_%H%M%S')}_{self.players}p{suffix}"
        league = actions.create_league(
            name=f"Bench {self.players} players ({self.game})",
            league_id=league_id,
            game_type=self.game,
            min_players=2,
            max_players=self.players,
            max_referees=self.referees,
            schedule_format=self.schedule_format,
            swiss_rounds=self.rounds,
            **BENCH_TIMEOUTS,
        )
        return actions.open_registration(league, 600.0)

    def wait_for_registrations(self, league: League, timeout: float | None = None) -> float:
        # 120 s, or 0.3 s a player for the largest leagues (1,000 players start slowly on 2 cores).
        timeout = timeout if timeout is not None else max(120.0, 0.3 * self.players)
        began = time.monotonic()
        while time.monotonic() - began < timeout:
            self.cluster.check()
            players = league.players.exclude(status=AgentStatus.REMOVED)
            if self.connect:  # registered is not enough: the player's socket must be open
                players = players.exclude(relay_channel="")
            players = players.count()
            referees = league.referees.exclude(status=AgentStatus.REMOVED).count()
            if players >= self.players and referees >= self.referees:
                return round(time.monotonic() - began, 2)
            time.sleep(0.1)
        raise BenchFailed(f"registration incomplete after {timeout:g} s (logs in {self.log_dir})")

    def follow(self, league: League) -> League:
        deadline = time.monotonic() + self.timeout
        next_sample = 0.0
        while True:
            league.refresh_from_db()
            if league.status in (League.Status.COMPLETED, League.Status.CANCELLED):
                return league
            now = time.monotonic()
            if now > deadline:
                raise BenchFailed(f"the league did not finish in {self.timeout:g} s (logs in {self.log_dir})")
            if now >= next_sample:
                self.cluster.sample()
                self.cluster.check()
                next_sample = now + 1.0
            time.sleep(0.1)

    # -- reading and checking the outcome --------------------------------------------------------
    def report(self, league: League, started: datetime, registration_seconds: float) -> dict[str, Any]:
        problems = validate_league(league, self.players)
        if problems:
            raise BenchFailed("; ".join(problems))
        wall = (league.completed_at - started).total_seconds()
        calls, latency = count_calls(league, started)
        total = sum(calls.values())
        matches = MatchResult.objects.filter(league=league).count()
        return {
            "league_id": league.league_id,
            "game": self.game,
            "format": self.schedule_format,
            "rounds": league.rounds.count(),
            "players": self.players,
            "referees": self.referees,
            "referee_capacity": self.max_concurrent,
            "lm_server": self.lm_server,
            "lm_workers": self.lm_workers,
            "connection": "relay" if self.connect else "direct",
            "matches": matches,
            "registration_seconds": registration_seconds,
            "wall_seconds": round(wall, 3),
            "matches_per_second": round(matches / wall, 2) if wall else 0.0,
            "calls": total,
            "calls_by_kind": dict(sorted(calls.items())),
            "calls_per_second": round(total / wall, 1) if wall else 0.0,
            "calls_per_second_by_kind": {k: round(v / wall, 1) for k, v in sorted(calls.items())} if wall else {},
            "latency_ms": latency,
            "round_phases": round_phases(round_times(league), wall),
            "processes": self.cluster.usage(),
            "cpu_seconds_total": round(sum(c.usage.cpu_seconds for c in self.cluster.children), 2),
            # What the league itself cost (start-up and registration left out), and how busy the
            # machine's cores were meanwhile: near 1.0 means CPU-bound, lower means waiting.
            "cpu_seconds_league": round(
                sum(c.usage.cpu_seconds - (c.cpu_at_mark or 0.0) for c in self.cluster.children), 2
            ),
            "machine_busy_share": self.busy,
            "valid": True,
            "log_dir": str(self.log_dir),
            "machine": machine_info(),
        }


def validate_league(league: League, players: int) -> list[str]:
    """What is wrong with a finished league (empty when it is complete and consistent): every
    match finished with one result, the pairs its format plays (every pair once in a round-robin;
    no pair twice, each round played by all but at most one bye in a Swiss league; one fewer
    matches than players in a knockout), and the final standings equal to a recount."""
    problems = []
    if league.status != League.Status.COMPLETED:
        problems.append(f"league ended {league.status}")
    fmt = league.schedule_format
    results = ranking_results(league)
    byes = Counter(Bye.objects.filter(league=league).values_list("player__player_id", flat=True))
    rounds = league.rounds.count()
    if fmt == League.ScheduleFormat.SWISS:
        expected = league.swiss_rounds * (players // 2)
        if rounds != league.swiss_rounds:
            problems.append(f"{rounds} rounds, expected {league.swiss_rounds}")
        if any(n > 1 for n in byes.values()) or sum(byes.values()) != league.swiss_rounds * (players % 2):
            problems.append(f"byes {dict(byes)}: expected one a round when the count is odd, at most one each")
    elif fmt == League.ScheduleFormat.KNOCKOUT:
        expected = players - 1  # each match knocks one player out
        if rounds != math.ceil(math.log2(players)):
            problems.append(f"{rounds} rounds, expected {math.ceil(math.log2(players))}")
    else:
        expected = players * (players - 1) // 2 * (2 if fmt == League.ScheduleFormat.DOUBLE else 1)
    if len(results) != expected:
        problems.append(f"{len(results)} results, expected {expected}")
    unfinished = Match.objects.filter(league=league).exclude(status=Match.Status.FINISHED).count()
    if unfinished:
        problems.append(f"{unfinished} matches not FINISHED")
    pairs = Counter(frozenset((r.player_a, r.player_b)) for r in results)
    if any(n != (2 if fmt == League.ScheduleFormat.DOUBLE else 1) for n in pairs.values()):
        problems.append("some pair of players met more often than the format plays them")
    # Recompute the table from the results alone and compare with what the players were told.
    tally: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(("played", "points", "technical_losses"), 0))
    for r in results:
        sides = ((r.player_a, r.points_a, r.technical_loss_a), (r.player_b, r.points_b, r.technical_loss_b))
        for pid, pts, tech in sides:
            tally[pid]["played"] += 1
            tally[pid]["points"] += pts
            tally[pid]["technical_losses"] += int(tech)
    for pid, count in byes.items():
        tally[pid]["points"] += BYE_POINTS * count
    if fmt == League.ScheduleFormat.SWISS:
        if len(tally) != players or any(t["played"] + byes[p] != league.swiss_rounds for p, t in tally.items()):
            problems.append("not every player played or sat out every round once")
    elif fmt != League.ScheduleFormat.KNOCKOUT:
        per_player = (players - 1) * (2 if fmt == League.ScheduleFormat.DOUBLE else 1)
        if len(tally) != players or any(t["played"] != per_player for t in tally.values()):
            problems.append("not every player played every other player once")
    final = (
        Event.objects.filter(league=league, direction="OUT", kind="LEAGUE_COMPLETED")
        .order_by("id")
        .values_list("payload", flat=True)
        .first()
    )
    standings = ((final or {}).get("message") or {}).get("final_standings") or []
    if len(standings) != players:
        problems.append(f"LEAGUE_COMPLETED carried {len(standings)} standings rows, expected {players}")
    for row in standings:
        mine = tally.get(row.get("player_id"), {})
        for key in ("played", "points", "technical_losses"):
            if row.get(key) != mine.get(key):
                problems.append(f"standings of {row.get('player_id')}: {key} {row.get(key)} != {mine.get(key)}")
                break
    points = [row.get("points", 0) for row in standings]
    if fmt != League.ScheduleFormat.KNOCKOUT and points != sorted(points, reverse=True):
        problems.append("final standings are not ranked by points")
    if standings and league.champion and league.champion.player_id != standings[0]["player_id"]:
        problems.append("the champion is not the top of the final standings")
    if fmt == League.ScheduleFormat.KNOCKOUT and league.champion:
        final_match = Match.objects.filter(league=league, round__number=rounds).select_related("result").first()
        if final_match is None or league.champion_id not in (final_match.player_a_id, final_match.player_b_id):
            problems.append("the champion did not play the final")
    return problems


def round_times(league: League) -> list[tuple[float, float]]:
    """Each round's (first start_match sent, last result received), in round order, as epoch
    seconds from the Event log: START_MATCH rows carry when their batch was sent, the results'
    IN rows when the LM took them. A round with no start or no result (all decided without
    play, a bye's) is left out."""
    round_of = dict(Match.objects.filter(league=league).values_list("match_id", "round__number"))
    starts: dict[int, float] = {}
    ends: dict[int, float] = {}
    rows = Event.objects.filter(league=league, kind__in=("START_MATCH", "MATCH_RESULT_REPORT")).exclude(match_id="")
    for kind, match_id, at in rows.values_list("kind", "match_id", "at").iterator(chunk_size=2000):
        number = round_of.get(match_id)
        if number is None:
            continue
        when = at.timestamp()
        if kind == "START_MATCH":
            starts[number] = min(starts.get(number, when), when)
        else:
            ends[number] = max(ends.get(number, when), when)
    return [(starts[n], ends[n]) for n in sorted(starts) if n in ends]


def round_phases(times: list[tuple[float, float]], wall: float) -> dict[str, Any]:
    """Where a league's time goes, round by round (``round_times``): ``play`` from a round's
    first start_match to its last result (the referees, the players, the LM recording), and
    ``boundary`` from that last result to the next round's first start_match (the conductor
    seeing the round played, its standings, ROUND_COMPLETED and the next ROUND_ANNOUNCEMENT to
    every player): each phase's median and 95th percentile in milliseconds, its total in seconds
    and its share of the league's ``wall`` seconds."""
    play = [(end - start) * 1000 for start, end in times]
    boundary = [(times[i + 1][0] - times[i][1]) * 1000 for i in range(len(times) - 1)]

    def phase(samples: list[float]) -> dict[str, float]:
        points = percentiles(samples, (50, 95))
        total = sum(samples) / 1000
        return {
            "p50_ms": points["p50"],
            "p95_ms": points["p95"],
            "seconds": round(total, 3),
            "share": round(total / wall, 3) if wall else 0.0,
        }

    return {"rounds": len(times), "play": phase(play), "boundary": phase(boundary)}


def count_calls(league: League, since: datetime) -> tuple[Counter, dict[str, dict[str, float]]]:
    """HTTP calls made during the league by kind, and latency percentiles per kind.

    Conductor → agents: its deliveries in the Event log (``delivery_log.sent``); agents → LM: the
    IN messages the LM logged; referee → players: every OUT entry of every match log (with its
    latency).
    """
    calls: Counter = Counter()
    latencies: dict[str, list[float]] = defaultdict(list)
    for d in delivery_log.sent(league, since=since):
        calls[f"lm->{d.method}"] += 1
    received = Event.objects.filter(league=league, at__gte=since, direction=Event.Direction.IN)
    for kind in received.values_list("kind", flat=True).iterator(chunk_size=2000):
        calls[f"->lm {kind}"] += 1
    for entries in MatchResult.objects.filter(league=league).values_list("log", flat=True).iterator(chunk_size=500):
        for entry in entries or []:
            if entry.get("direction") != "OUT" or not entry.get("method"):
                continue
            key = f"referee->{entry['method']}"
            calls[key] += 1
            if entry.get("latency_ms") is not None:
                latencies[key].append(entry["latency_ms"])
    return calls, {k: {**percentiles(v), "n": len(v)} for k, v in sorted(latencies.items())}
