"""``bench spectators``: a class watching its league. The same league is played twice in one
run, unwatched and then watched by N spectators, and the two times are compared. Both runs are
``bench league``'s (:class:`league.bench.league_run.LeagueBench`), of any format it plays: a
round-robin, a Swiss league of some rounds or a knockout, each checked as ``bench league``
checks it.

Each spectator does what the league page does (static/league/league.js): it loads the page
(``GET /leagues/<id>/``, the first full page), opens ``ws/leagues/<id>/``, takes the snapshot,
applies every pushed patch to its state (``league.api.live.apply``, the page's ``applyPatch``)
and asks for the snapshot again when a patch does not follow its version; a socket closed under
it is opened again (counted as a drop) and starts from a new snapshot. Spectators arrive
spread over the league's first seconds (new viewers while results come in), in
``--spectator-procs`` processes of their own (``python -m league.bench.spectator``), so that
their cost is not the bench's; the pages of a process decode a frame and apply a patch once
between them (``league.bench.spectator.Frames``), the work a class's browsers do on their own
machines. Each reports its first-page and snapshot latencies, the times of its refreshes and its
final state; the bench checks every page ended with the whole league.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from league.bench.league_run import LeagueBench
from league.bench.machine import machine_info, percentiles
from league.bench.processes import Child, split
from league.models import League

# How long the watched league's pages are given, once it completed, to show its end.
SETTLE_SECONDS = 20.0


@dataclass
class WatchedLeague(LeagueBench):
    """``LeagueBench`` with spectators: they arrive once registration is over and leave once the
    league's end has reached them."""

    spectators: int = 100
    spectator_procs: int = 2
    ramp: float = 2.0  # seconds over which the spectators arrive
    nice: int = 0  # the spectators' processes' CPU niceness (19: only what the league leaves idle)
    watchers: list[Child] = field(default_factory=list)
    outputs: list[Path] = field(default_factory=list)
    completed_at: float = 0.0  # time.time() when the bench saw the league complete

    def wait_for_registrations(self, league: League, timeout: float | None = None) -> float:
        seconds = super().wait_for_registrations(league, timeout)
        self.start_spectators(league.league_id)
        return seconds

    def start_spectators(self, league_id: str) -> None:
        base = f"http://127.0.0.1:{self.lm_port}"
        for i, count in enumerate(split(self.spectators, self.spectator_procs)):
            out = self.log_dir / f"spectators-{i}.json"
            args = [sys.executable, "-m", "league.bench.spectator", base, league_id, str(count), str(self.ramp)]
            args += [str(self.nice)]
            self.watchers.append(self.cluster.spawn(f"spectators-{i}", "spectators", [*args, str(out)]))
            self.outputs.append(out)

    def follow(self, league: League) -> League:
        """Follow the league to its end, then give its pages ``SETTLE_SECONDS`` to show it (each
        spectator leaves once its page shows the league completed) before asking the rest to
        leave; their records are written as they go."""
        league = super().follow(league)
        self.completed_at = time.time()
        self.cluster.sample()
        deadline = time.monotonic() + SETTLE_SECONDS
        while time.monotonic() < deadline and any(w.proc.poll() is None for w in self.watchers):
            time.sleep(0.1)
        for watcher in self.watchers:
            if watcher.proc.poll() is None:
                watcher.proc.send_signal(signal.SIGTERM)
        for watcher in self.watchers:
            watcher.proc.wait(60)
        return league

    def outcomes(self) -> list[dict[str, Any]]:
        """Each spectators' process's output: its pages' records and its event loop's lags."""
        return [json.loads(out.read_text()) for out in self.outputs if out.exists()]

    def pages(self) -> list[dict[str, Any]]:
        """Every spectator's record."""
        return [page for outcome in self.outcomes() for page in outcome["pages"]]

    def loop_lags(self) -> list[float]:
        """How late the spectators' event loops woke their timers, every 0.1 s, all processes."""
        return [lag for outcome in self.outcomes() for lag in outcome["loop_lags"]]

    def shared_work(self) -> dict[str, int]:
        """Frames the spectators' processes decoded and patches they applied, each once for the
        pages of a process that received it (``league.bench.spectator.Frames``)."""
        outcomes = self.outcomes()
        return {key: sum(o.get(key, 0) for o in outcomes) for key in ("frames_decoded", "patches_applied")}


@dataclass
class SpectatorsBench:
    players: int = 40
    spectators: int = 100
    referees: int = 2
    # The league's format, as ``bench league`` plays it (``LeagueBench``: its check of the format
    # before anything starts, its league, its validation of the outcome): single, double, swiss
    # (with ``rounds``) or knockout.
    schedule_format: str = "single"
    rounds: int = 0
    player_hosts: int = 1
    lm_server: str = "uvicorn"
    lm_workers: int = 1  # uvicorn worker processes for the LM (they share pushes through Redis)
    spectator_procs: int = 2
    ramp: float = 2.0
    nice: int = 0
    timeout: float = 900.0
    out: Any = None

    def say(self, text: str) -> None:
        if self.out is not None:
            self.out.write(text + "\n")
            self.out.flush()

    def run(self) -> dict[str, Any]:
        common = {
            "players": self.players,
            "referees": self.referees,
            "schedule_format": self.schedule_format,
            "rounds": self.rounds,
            "player_hosts": self.player_hosts,
            "lm_server": self.lm_server,
            "lm_workers": self.lm_workers,
            "timeout": self.timeout,
            "out": self.out,
        }
        league = f"{self.players} players, {self.schedule_format}" + (f" {self.rounds} rounds" if self.rounds else "")
        self.say(f"unwatched: {league}")
        unwatched = LeagueBench(**common).run()
        self.say(f"watched by {self.spectators}: {league}")
        bench = WatchedLeague(
            **common,
            spectators=self.spectators,
            spectator_procs=self.spectator_procs,
            ramp=self.ramp,
            nice=self.nice,
        )
        watched = bench.run()
        return self.report(unwatched, watched, bench.pages(), bench)

    def report(
        self, unwatched: dict[str, Any], watched: dict[str, Any], pages: list[dict[str, Any]], bench: WatchedLeague
    ) -> dict[str, Any]:
        total = watched["matches"]
        behind = [p for p in pages if p["finished"] != total]
        errors = [p["error"] for p in pages if p.get("error")]
        if len(pages) != self.spectators:
            errors.append(f"{len(pages)} spectators reported, expected {self.spectators}")
        if behind:
            errors.append(f"{len(behind)} pages did not show the whole league (e.g. {behind[0]['finished']}/{total})")
        # Each page's longest wait for a refresh while results came in: from the first refresh
        # that showed it a result to the league's completion; and from the page going live (its
        # first message), which counts the wait for the league's first result too.
        waits = [
            longest_wait(p["refreshes"], bench.completed_at, since=p.get("results_from"))
            for p in pages
            if p["refreshes"]
        ]
        live_waits = [longest_wait(p["refreshes"], bench.completed_at) for p in pages if p["refreshes"]]
        lags = bench.loop_lags()
        lm = {k: v for k, v in watched["processes"].items() if v["role"] == "lm"}
        lm_unwatched = {k: v for k, v in unwatched["processes"].items() if v["role"] == "lm"}
        return {
            "players": self.players,
            "format": watched["format"],
            "rounds": watched["rounds"],
            "spectators": self.spectators,
            "spectator_nice": self.nice,
            "matches": total,
            "lm_server": self.lm_server,
            "lm_workers": self.lm_workers,
            "unwatched_seconds": unwatched["wall_seconds"],
            "watched_seconds": watched["wall_seconds"],
            "watched_over_unwatched": round(watched["wall_seconds"] / unwatched["wall_seconds"], 2),
            "first_page_ms": percentiles([p["page_ms"] for p in pages if p["page_ms"] is not None]),
            "snapshot_ms": percentiles([p["snapshot_ms"] for p in pages if p["snapshot_ms"] is not None]),
            "longest_wait_s": percentiles(waits),
            "longest_wait_max_s": round(max(waits), 3) if waits else None,
            "longest_wait_from_live_s": percentiles(live_waits),
            "longest_wait_from_live_max_s": round(max(live_waits), 3) if live_waits else None,
            "refreshes_per_page": percentiles([len(p["refreshes"]) for p in pages]),
            "resyncs": sum(p["resyncs"] for p in pages),
            # Sockets the LM closed under a page (which opened another), and the last reason.
            "drops": sum(p["drops"] for p in pages),
            "drop_reasons": sorted({p["dropped"] for p in pages if p["dropped"]})[:3],
            "pushed_mib_per_page": percentiles([p["bytes"] / 2**20 for p in pages]),
            "lm_watched": next(iter(lm.values()), {}),
            "lm_unwatched": next(iter(lm_unwatched.values()), {}),
            # The spectators run on the same machine: their CPU is taken from the league's.
            # How late the spectators' own event loops ran (p50/p95/p99 and the worst, seconds): a
            # page's refresh is timed when its process gets to it, so these lags are part of the
            # longest waits above and are the spectators' share of them, not the league's.
            "spectators_loop_lag_s": percentiles(lags),
            "spectators_loop_lag_max_s": round(max(lags, default=0.0), 3),
            "spectators_cpu_seconds": round(
                sum(v["cpu_seconds"] for v in watched["processes"].values() if v["role"] == "spectators"), 2
            ),
            **bench.shared_work(),
            "processes_watched": watched["processes"],
            "errors": errors,
            "valid": not errors,
            "machine": machine_info(),
        }


def longest_wait(refreshes: list[float], until: float, since: float | None = None) -> float:
    """The longest time between a page's refreshes (and from the last one to ``until``),
    counting from its refresh at ``since`` when given (from its first otherwise)."""
    times = [t for t in refreshes if t <= until and (since is None or t >= since)] + [until]
    return round(max(b - a for a, b in zip(times, times[1:], strict=False)) if len(times) > 1 else 0.0, 3)
