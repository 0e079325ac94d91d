"""``bench chaos``: leagues played back to back while processes die and the database goes away.

The LM site and the conductor run for the whole bench; each league gets its own referees and
player hosts (with ``--state-dir``, so a restarted agent keeps its identity and its unsent
reports). While a league plays, every few seconds one process chosen at random (the LM, the
conductor, a referee, a player host) is killed with SIGKILL and started again a moment later
(never the LM and the conductor both at once: ``killable``), and
now and then the database is cut for a few seconds (see league/bench/outage.py). A process that
exits on its own (not killed by the bench) is a violation: it is started again, and reported.

Every league is then checked: complete with n(n-1)/2 results, none twice, the final standings
equal to a recount from the results (``validate_league``), every outcome a player was told
(GAME_OVER, kept in its --state-dir) the one recorded (league/bench/told.py), and finished within
``bound`` seconds of its start. Registration may take up to 300 s (a machine at a load average
of 10 starts Django processes slowly; the bound counts from the league's start). The bound is
stated in docs/operations.md (Recovery).
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from league import actions
from league.actions import cancel_league
from league.bench.league_run import BENCH_TIMEOUTS, INSTANT_MIX, validate_league
from league.bench.machine import machine_info
from league.bench.outage import Outage, database_outage
from league.bench.processes import Child, Cluster, free_port, free_port_run
from league.bench.told import recorded_outcomes, told_in_states, told_problems
from league.models import AgentStatus, Event, League, Match, MatchResult
from players.management.commands.runplayer import EXIT_REFUSED

# What the bench kills (every kind alike, in turn).
ROLES = ("lm", "conductor", "referee", "players")
CORE = ("lm", "conductor")  # without either, no league moves
READY_LINE = b"conductor started"  # the conductor's first log line (league/conductor/worker.py)


@dataclass
class Victim:
    """A process the bench may kill: its child and whether it is down on purpose."""

    child: Child
    log_dir: Path
    restart_at: float | None = None  # monotonic time of the planned restart while killed
    started_at: float = field(default_factory=time.monotonic)
    ready_at: float | None = None  # when it was first seen serving since its last start
    log_offset: int = 0  # where its log was at its last start
    restarted: bool = False  # started again by the bench (killed, or exited by itself)

    @property
    def down(self) -> bool:
        return self.restart_at is not None

    @property
    def port(self) -> int | None:
        """The port it serves on (the conductor has none)."""
        args = list(self.child.proc.args)  # type: ignore[arg-type]
        return int(args[args.index("--port") + 1]) if "--port" in args else None

    def probe(self, now: float) -> None:
        """Note when it starts serving: its port accepts connections or, for the conductor
        (no port), its log says it started (``READY_LINE``) since its last start."""
        if self.ready_at is not None or self.down or self.child.proc.poll() is not None:
            return
        port = self.port
        if port is None:
            try:
                with open(self.log_dir / f"{self.child.name}.log", "rb") as log:
                    log.seek(self.log_offset)
                    if READY_LINE in log.read():
                        self.ready_at = now
            except OSError:
                pass
            return
        with socket.socket() as sock:
            sock.settimeout(0.05)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                self.ready_at = now

    def settled(self, now: float, settle: float) -> bool:
        """Up, serving and left alone since for ``settle`` seconds, or for as long as it took to
        start again if that was longer. A Django process takes seconds to start on a loaded
        machine: one killed again before it serves would never serve at all, which tests nothing,
        and one killed as soon as it serves would leave its league too little time with every
        process up (the bound measures the league, not the machine's start-up time). A first start
        is not counted: a league's agents all start at once and take long for it (7 s each on a
        loaded 2-core machine), which says nothing of how soon one comes back; waiting that long
        again, a short league would end before its referees were ever killable."""
        alive = not self.down and self.child.proc.poll() is None
        if not alive or self.ready_at is None:
            return False
        came_back_in = self.ready_at - self.started_at if self.restarted else 0.0
        return now - self.ready_at >= max(settle, came_back_in)


class Turn:
    """Which kind of process is killed next: each kind in turn, in a shuffled order, so that every
    kind is killed alike however few kills a run has room for. A kind with none to kill now (a
    short league's agents, not settled yet) is waited for, up to ``patience`` seconds (skipping
    it, a short run could end without ever killing a referee); then the next turn begins."""

    def __init__(self, rng: random.Random, now: float, patience: float = 30.0) -> None:
        self.rng = rng
        self.patience = patience
        self._begin(now)

    def _begin(self, now: float) -> None:
        self.left = self.rng.sample(ROLES, len(ROLES))  # the kinds still to kill in this turn
        self.began = now

    def next(self, killable_kinds: list[str], now: float) -> str | None:
        """The kind to kill now, among ``killable_kinds``; None to wait for the turn's others."""
        due = [role for role in self.left if role in killable_kinds]
        if not due:
            if now - self.began < self.patience:
                return None
            self._begin(now)
            due = [role for role in self.left if role in killable_kinds]
            if not due:
                return None
        self.left.remove(due[0])
        if not self.left:
            self._begin(now)
        return due[0]


def killable(victims: list[Victim], now: float, settle: float) -> list[Victim]:
    """The processes the bench may kill now: the settled ones (serving, and for at least as long
    as they took to start), but neither the LM nor the conductor while the other is away (killed
    and not settled again). No league moves while one of those two is away, and on a loaded
    machine a restart takes seconds: their crashes piling up would leave a league no time with
    them both up, and the bound would measure the machine, not the league. An agent away holds
    up only its own matches. Both killed together is the recovery tests' concern
    (tests/integration/test_recovery_referee.py kills the conductor and a referee together)."""
    core_away = any(
        v.child.role in CORE
        and v.restarted
        and (v.down or (v.child.proc.poll() is None and not v.settled(now, settle)))
        for v in victims
    )
    return [v for v in victims if v.settled(now, settle) and not (core_away and v.child.role in CORE)]


@dataclass
class LeagueOutcome:
    league_id: str
    players: int  # those seated when the schedule was drawn (the others were withdrawn)
    results: int
    wall_seconds: float | None
    problems: list[str]


@dataclass
class ChaosBench:
    minutes: float = 10.0
    players: int = 8
    referees: int = 2
    game: str = "even_odd"
    player_hosts: int = 2
    kill_every: tuple[float, float] = (2.0, 5.0)  # seconds between kills, drawn uniformly
    down_for: tuple[float, float] = (0.5, 2.5)  # seconds a killed process stays down
    settle: float = 3.0  # seconds a process serves before it may be killed again (Victim.settled)
    outage_every: tuple[float, float] = (15.0, 30.0)  # seconds between database outages
    outage_for: tuple[float, float] = (2.0, 6.0)  # seconds an outage lasts
    bound: float = 90.0  # each league must finish within this many seconds of its start (docs/operations.md)
    max_leagues: int = 1000
    seed: int | None = None
    out: Any = None
    log_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="league-chaos-")))
    rng: random.Random = field(init=False)
    outage: Outage = field(init=False)
    outage_ends: float | None = field(init=False, default=None)  # while the database is cut
    next_kill: float = field(init=False, default=0.0)  # monotonic time of the next kill
    next_outage: float = field(init=False, default=0.0)  # and of the next database cut
    env: dict[str, str] = field(init=False)  # of every process under test
    lm_url: str = field(init=False)
    core: list[Victim] = field(init=False)  # the LM site and the conductor: the whole run
    agents: list[Victim] = field(init=False, default_factory=list)  # the current league's
    progress: Any = field(init=False)
    kills: Counter = field(default_factory=Counter)
    crashes: list[str] = field(default_factory=list)
    outages: list[float] = field(default_factory=list)
    outcomes: list[LeagueOutcome] = field(default_factory=list)
    told_checked: int = 0  # (player, match) outcomes told and compared with the record
    league: League | None = field(init=False, default=None)  # the league being played
    turn: Turn = field(init=False)  # which kind is killed next (_kill_one)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.turn = Turn(self.rng, time.monotonic())

    # -- the run ------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        ends = time.monotonic() + self.minutes * 60
        self.next_kill = time.monotonic() + self.rng.uniform(*self.kill_every)
        self.next_outage = time.monotonic() + self.rng.uniform(*self.outage_every)
        self.outage, child_database_url = database_outage(free_port())
        # The processes under test reach the database through the outage (a proxy on PostgreSQL).
        self.env = {**os.environ, "DATABASE_URL": child_database_url, "PYTHONUNBUFFERED": "1"}
        core = Cluster(self.log_dir, env=self.env)
        port = free_port()
        self.lm_url = f"http://127.0.0.1:{port}/mcp"
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        console = Console(file=self.out, stderr=self.out is None)
        try:
            self.core = [
                Victim(core.start_site(port), self.log_dir),
                Victim(core.start_conductor(None, poll=0.05), self.log_dir),
            ]
            with Progress(*columns, console=console, transient=False) as progress:
                self.progress = progress
                while time.monotonic() < ends and len(self.outcomes) < self.max_leagues:
                    self.outcomes.append(self._one_league(len(self.outcomes) + 1))
        finally:
            self.outage.close()
            core.stop()
        return self.report()

    def _one_league(self, number: int) -> LeagueOutcome:
        expected = self.players * (self.players - 1) // 2
        league = self.league = self._create_league(number)
        agents = Cluster(self.log_dir / f"league{number}", env=self.env)
        agents.log_dir.mkdir(parents=True, exist_ok=True)
        task = self.progress.add_task(f"league {number}: registering", total=expected)
        try:
            self.agents = self._start_agents(agents, league)
            problems = self._wait_for_registrations(league)
            if problems:
                return LeagueOutcome(league.league_id, self.players, 0, None, problems)
            self._end_outage()  # the bench writes: on SQLite its own lock would hold it up
            actions.start_league(league)
            started = time.monotonic()
            league, problems = self._play(league, task, number, started)
            wall = None
            self._end_chaos()
            # A player whose host was killed before it ever answered the LM's ping, and was still
            # down when the schedule was drawn, is withdrawn (docs/operations.md): the league is
            # then the others' round-robin.
            seated = self.players - Event.objects.filter(league=league, kind="player_withdrawn").count()
            expected = seated * (seated - 1) // 2
            if league.status == League.Status.COMPLETED:
                problems += validate_league(league, seated)
                told = told_in_states(agents.log_dir / "state", league.league_id)
                problems += told_problems(told, recorded_outcomes(league))
                self.told_checked += len(told)
                # From the LM's own clock: started (start_league) to completed (the last result).
                wall = round((league.completed_at - league.started_at).total_seconds(), 2)
                if wall > self.bound:
                    problems.append(f"finished in {wall:g} s, over the bound of {self.bound:g} s")
            results = MatchResult.objects.filter(league=league).count()
            matched = Match.objects.filter(league=league).count()
            if matched > expected:
                problems.append(f"{matched} matches scheduled, expected {expected}")
            state = "ok" if not problems else f"[red]{len(problems)} violation(s)[/red]"
            self.progress.update(task, completed=results, description=f"league {number}: {state}")
            return LeagueOutcome(league.league_id, seated, results, wall, problems)
        finally:
            self._end_chaos()
            agents.stop()
            self.agents = []

    def _create_league(self, number: int) -> League:
        league = actions.create_league(
            name=f"Chaos {number}",
            league_id=f"chaos_{time.strftime('%Y%m%d_%H%M%S')}_{number}",
            game_type=self.game,
            min_players=2,
            max_players=self.players,
            max_referees=self.referees,
            **BENCH_TIMEOUTS,
        )
        return actions.open_registration(league, 600.0)

    def _start_agents(self, agents: Cluster, league: League) -> list[Victim]:
        state = agents.log_dir / "state"  # identities and unsent reports survive a kill
        referees = agents.start_referees(
            self.lm_url,
            league.league_id,
            self.referees,
            free_port_run(self.referees),
            state_dir=state,
            referee_key=actions.generate_referee_key(league),  # the run's own key (docs/operations.md)
        )
        mix = ",".join(INSTANT_MIX)
        hosts = agents.start_players(
            self.lm_url,
            league.league_id,
            [(mix, self.players)],
            free_port_run(self.players),
            hosts_per_group=self.player_hosts,
            names={mix: "Chaos"},
            state_dir=state,
        )
        return [Victim(child, agents.log_dir) for child in (*referees, *hosts)]

    def _wait_for_registrations(self, league: League, timeout: float = 300.0) -> list[str]:
        """Wait for every agent to register, under chaos (agents retry their registration): the
        bench only reads meanwhile, which a cut does not stop (WAL readers; a direct connection)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._chaos_tick(time.monotonic())
            players = league.players.exclude(status=AgentStatus.REMOVED).count()
            referees = league.referees.exclude(status=AgentStatus.REMOVED).count()
            if players >= self.players and referees >= self.referees:
                return []
            time.sleep(0.1)
        return [f"registration incomplete after {timeout:g} s (logs in {self.log_dir})"]

    # -- chaos while a league plays -------------------------------------------------------------
    def _play(self, league: League, task: Any, number: int, started: float) -> tuple[League, list[str]]:
        """Kill, restart and cut until the league ends, or until twice the bound has passed
        (then it is cancelled, so that it does not hold the conductor for the next one)."""
        problems: list[str] = []
        next_look = time.monotonic()
        while True:
            now = time.monotonic()
            self._chaos_tick(now)
            if now >= next_look:
                next_look = now + 0.5
                league.refresh_from_db()
                results = MatchResult.objects.filter(league=league).count()
                killed = sum(self.kills.values())
                description = (
                    f"league {number}: {league.status.lower()} · {killed} kills · {len(self.outages)} outages"
                    + (" · [yellow]database cut[/yellow]" if self.outage_ends is not None else "")
                )
                self.progress.update(task, completed=results, description=description)
                if league.status in (League.Status.COMPLETED, League.Status.CANCELLED):
                    if league.status == League.Status.CANCELLED:
                        problems.append("the league was cancelled")
                    return league, problems
                if now - started > 2 * self.bound:
                    self._end_chaos()
                    problems.append(
                        f"not finished {2 * self.bound:g} s after its start ({results} results); cancelled"
                        f" (logs in {self.log_dir})"
                    )
                    return cancel_league(league), problems
            time.sleep(0.05)

    def _chaos_tick(self, now: float) -> None:
        """Restart what is due, kill the next victim and cut or restore the database when
        their times have come."""
        self._supervise(now)
        if now >= self.next_kill and self._kill_one(now):
            self.next_kill = now + self.rng.uniform(*self.kill_every)
        if self.outage_ends is None and now >= self.next_outage:
            length = self.rng.uniform(*self.outage_for)
            self.outage.cut()
            self.outages.append(round(length, 1))
            self.outage_ends = time.monotonic() + length
        elif self.outage_ends is not None and now >= self.outage_ends:
            self._end_outage()

    def _end_outage(self) -> None:
        if self.outage_ends is not None:
            self.outage.restore()
            self.outage_ends = None
            self.next_outage = time.monotonic() + self.rng.uniform(*self.outage_every)

    def _victims(self) -> list[Victim]:
        return [*self.core, *self.agents]

    def _kill_one(self, now: float) -> bool:
        """SIGKILL one process (``killable``): a kind first (each kind that has one alike), then
        one of that kind, so that the one LM is as likely a victim as any of the player hosts.
        False when none may be killed now."""
        settled = killable(self._victims(), now, self.settle)
        kinds = [role for role in ROLES if any(v.child.role == role for v in settled)]
        if not kinds:
            return False
        role = self.turn.next(kinds, now)
        if role is None:
            return False
        victim = self.rng.choice([v for v in settled if v.child.role == role])
        victim.child.proc.send_signal(signal.SIGKILL)
        victim.child.proc.wait(10)
        victim.restart_at = now + self.rng.uniform(*self.down_for)
        victim.restarted = True
        self.kills[role] += 1
        return True

    def _supervise(self, now: float) -> None:
        """Start again what the bench killed once its time is up, and what exited on its own."""
        for victim in self._victims():
            victim.probe(now)
            child = victim.child
            if victim.down:
                if now >= (victim.restart_at or 0.0):
                    victim.restart_at = None
                    self._restart(victim)
            elif child.proc.poll() is not None:
                if child.role == "players" and child.proc.returncode == 0:
                    continue  # players leave once told LEAGUE_COMPLETED: the league is over
                if child.role == "players" and self._shut_out(victim):
                    continue  # its players were withdrawn before the draw: they cannot join again
                self.crashes.append(f"{child.name} exited by itself ({child.proc.returncode}); log in {self.log_dir}")
                self._restart(victim)

    def _shut_out(self, victim: Victim) -> bool:
        """Whether a player host exited because its players were withdrawn: killed before they
        ever answered the LM and still down when the schedule was drawn (docs/operations.md), they
        are refused when they come back, and runplayer exits with EXIT_REFUSED. A refusal with no
        withdrawal in the league is no part of the chaos: a crash, to report."""
        if victim.child.proc.returncode != EXIT_REFUSED or self.league is None:
            return False
        return Event.objects.filter(league=self.league, kind="player_withdrawn").exists()

    def _restart(self, victim: Victim) -> None:
        """The same command again, its output appended to the same log."""
        child = victim.child
        victim.started_at, victim.ready_at, victim.restarted = time.monotonic(), None, True
        with open(victim.log_dir / f"{child.name}.log", "a") as log:
            victim.log_offset = log.tell()
            log.write(f"--- started again at {time.strftime('%H:%M:%S')}\n")
            log.flush()
            child.proc = subprocess.Popen(
                list(child.proc.args),  # type: ignore[arg-type]
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=child.env or self.env,  # a referee's key is in its own environment
            )

    def _end_chaos(self) -> None:
        """Restore the database and start every killed process again (the LM and the conductor
        serve the next league; the agents are stopped with their league)."""
        self._end_outage()
        for victim in self._victims():
            if victim.down:
                victim.restart_at = time.monotonic()
        self._supervise(time.monotonic())

    # -- the summary ----------------------------------------------------------------------------
    def report(self) -> dict[str, Any]:
        violations = [f"{o.league_id}: {p}" for o in self.outcomes for p in o.problems] + self.crashes
        walls = [o.wall_seconds for o in self.outcomes if o.wall_seconds is not None]
        return {
            "minutes": self.minutes,
            "players": self.players,
            "referees": self.referees,
            "game": self.game,
            "player_hosts": self.player_hosts,
            "bound_seconds": self.bound,
            "database_outage": self.outage.kind,
            "leagues": len(self.outcomes),
            "leagues_valid": sum(1 for o in self.outcomes if not o.problems),
            "results": sum(o.results for o in self.outcomes),
            "results_expected": sum(o.players * (o.players - 1) // 2 for o in self.outcomes),
            "withdrawn": sum(self.players - o.players for o in self.outcomes),
            "kills": sum(self.kills.values()),
            "kills_by_role": dict(sorted(self.kills.items())),
            "outages": len(self.outages),
            "outage_seconds_total": round(sum(self.outages), 1),
            "league_seconds_max": max(walls) if walls else None,
            "league_seconds_mean": round(sum(walls) / len(walls), 1) if walls else None,
            "told_checked": self.told_checked,
            "violations": violations,
            "errors": len(violations),
            "valid": not violations and bool(self.outcomes),
            "log_dir": str(self.log_dir),
            "machine": machine_info(),
        }
