"""``python manage.py bench …``: measured performance figures (docs/benchmarks.md).

- ``bench ceiling``: minimal JSON-RPC calls on the agents' own stack (the physical reference).
- ``bench league``: one whole league through real processes on loopback, checked, measured.
- ``bench api``: the LM's /mcp under a steady mixed load from a separate process.
- ``bench scale``: matches/s by league size (and a chart), plus a burst of registrations.
- ``bench soak``: consecutive leagues with fault players; leaks and lost results.
- ``bench chaos``: leagues while processes are killed and the database is cut; every league checked.
- ``bench server``: the production server (docs/operations.md) under slow-header and idle sockets.
- ``bench spectators``: a league unwatched, then the same league watched by N live pages.
- ``bench pages``: the first pages of a played league served by the LM alone: pages/s, CPU a page.
- ``bench arena``: a practice arena played by real processes; matches/s, each match rated once,
  a new agent's time to its first rated match.
- ``bench fuzz``: invalid requests over the LM, a referee, a player and a relay endpoint; no 5xx,
  no dropped socket, no state change.

Every figure is measured, never asserted; each command checks its own results and exits
non-zero when they do not add up.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from league.bench.database import configured_database, scratch_database
from league.bench.machine import machine_info
from leagueproto.envelope import GAME_TYPES


def add_league_format_arguments(parser: CommandParser) -> None:
    """The options of the league a bench plays (``bench league``, ``bench spectators``): its
    format, its Swiss rounds and the runplayer processes that host its players."""
    parser.add_argument(
        "--format",
        default="single",
        choices=("single", "double", "swiss", "knockout"),
        help="the league's schedule: round-robin, Swiss (with --rounds) or knockout",
    )
    parser.add_argument("--rounds", type=int, default=0, help="Swiss: rounds to play (1 to players-1)")
    parser.add_argument(
        "--player-hosts",
        type=int,
        default=1,
        help="runplayer processes sharing the players (each deals out the strategy mix in turn)",
    )


class Command(BaseCommand):
    help = "Benchmarks: ceiling, league, api, scale, soak, chaos, server, spectators, pages, fuzz, arena."

    def get_check_kwargs(self, options: dict[str, Any]) -> dict[str, Any]:
        """The model checks without a database: the bench chooses its own in ``handle`` (a new
        SQLite file on the embedded default, league/bench/database.py). Django's default checks
        every configured database, which would open, and create where there is none, the site's
        db.sqlite3 first."""
        return {**super().get_check_kwargs(options), "databases": []}

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="what", required=True)
        ceiling = sub.add_parser("ceiling", help="minimal JSON-RPC calls on the agents' stack")
        ceiling.add_argument("--calls", type=int, default=70_000)
        ceiling.add_argument("--concurrency", type=int, default=32)
        ceiling.add_argument("--quick", action="store_true", help="a few thousand calls, for the suite")
        ceiling.add_argument("--json", dest="json_path", help="also write the report to this file")

        league = sub.add_parser("league", help="one whole league with real processes")
        league.add_argument("--players", type=int, default=100)
        league.add_argument("--referees", type=int, default=2)
        league.add_argument("--game", default="even_odd", choices=GAME_TYPES)
        add_league_format_arguments(league)
        league.add_argument("--max-concurrent", type=int, default=None, help="per referee (default: a round)")
        league.add_argument("--lm-server", default="uvicorn", choices=("uvicorn", "daphne"))
        league.add_argument("--lm-workers", type=int, default=1, help="uvicorn worker processes for the LM")
        league.add_argument(
            "--poll", type=float, default=None, help="the conductor's poll interval (default: CONDUCTOR_POLL)"
        )
        league.add_argument("--timeout", type=float, default=900.0)
        league.add_argument("--with-ceiling", action="store_true", help="also run the ceiling with the same calls")
        league.add_argument(
            "--ceiling-runs", type=int, default=3, help="ceiling runs after the league; the ratio uses their median"
        )
        league.add_argument("--quick", action="store_true", help="small and short, for the suite")
        league.add_argument(
            "--connect",
            action="store_true",
            help="play the league twice, direct then with every player connecting out to the relay; report both",
        )
        league.add_argument("--json", dest="json_path")

        api = sub.add_parser("api", help="the LM /mcp under a steady mixed load")
        api.add_argument("--rate", type=float, default=200.0, help="requests per second")
        api.add_argument("--seconds", type=float, default=30.0)
        api.add_argument(
            "--players", type=int, default=100, help="players in the queried league (newcomers join a second one)"
        )
        api.add_argument("--lm-server", default="uvicorn", choices=("uvicorn", "daphne"))
        api.add_argument("--quick", action="store_true")
        api.add_argument("--json", dest="json_path")

        scale = sub.add_parser("scale", help="matches/s by league size, and a registration burst")
        scale.add_argument(
            "--sizes", default="10,25,50,100", help="league sizes, comma-separated ('' : the registration burst alone)"
        )
        scale.add_argument("--big", action="store_true", help="also 200 players")
        scale.add_argument("--referees", type=int, default=2)
        scale.add_argument("--registrations", type=int, default=1000)
        scale.add_argument("--chart", default="docs/benchmarks-scale.svg")
        scale.add_argument("--quick", action="store_true")
        scale.add_argument("--json", dest="json_path")

        arena = sub.add_parser("arena", help="a practice arena with real processes: matches/s, ratings")
        arena.add_argument("--agents", type=int, default=20)
        arena.add_argument("--referees", type=int, default=2)
        arena.add_argument("--max-concurrent", type=int, default=16, help="matches per referee at once")
        arena.add_argument("--seconds", type=float, default=60.0)
        arena.add_argument("--quick", action="store_true", help="6 agents for 10 s, for the suite")
        arena.add_argument("--keep-db", action="store_true", help="keep the scratch database")
        arena.add_argument("--json", dest="json_path")

        soak = sub.add_parser("soak", help="consecutive leagues with fault players: leaks, lost results")
        soak.add_argument("--minutes", type=float, default=10.0)
        soak.add_argument("--players", type=int, default=16)
        soak.add_argument("--referees", type=int, default=2)
        soak.add_argument("--max-leagues", type=int, default=1000)
        soak.add_argument("--json", dest="json_path")

        chaos = sub.add_parser("chaos", help="leagues while processes are killed and the database is cut")
        chaos.add_argument("--minutes", type=float, default=10.0)
        chaos.add_argument("--players", type=int, default=8)
        chaos.add_argument("--referees", type=int, default=2)
        chaos.add_argument("--game", default="even_odd", choices=GAME_TYPES)
        chaos.add_argument("--player-hosts", type=int, default=2, help="runplayer processes sharing the players")
        chaos.add_argument("--kill-every", type=float, nargs=2, default=(2.0, 5.0), metavar=("MIN", "MAX"))
        chaos.add_argument("--outage-every", type=float, nargs=2, default=(15.0, 30.0), metavar=("MIN", "MAX"))
        chaos.add_argument("--outage-for", type=float, nargs=2, default=(2.0, 6.0), metavar=("MIN", "MAX"))
        chaos.add_argument(
            "--bound", type=float, default=90.0, help="seconds each league must finish in (docs/operations.md)"
        )
        chaos.add_argument(
            "--settle", type=float, default=3.0, help="seconds a process serves before it may be killed again"
        )
        chaos.add_argument("--max-leagues", type=int, default=1000)
        chaos.add_argument("--seed", type=int, default=None, help="for the choice of victims and times")
        chaos.add_argument("--json", dest="json_path")
        server = sub.add_parser("server", help="the production server under slow-header and idle sockets")
        server.add_argument("--slow", type=int, default=2000, help="connections that never finish their headers")
        server.add_argument("--idle", type=int, default=3000, help="connections that send nothing")
        server.add_argument("--probes", type=int, default=200, help="ordinary requests made while they are open")
        server.add_argument("--quick", action="store_true", help="small numbers, for the suite")
        server.add_argument("--json", dest="json_path")
        watch = sub.add_parser("spectators", help="a league unwatched, then watched by N live pages")
        watch.add_argument("--players", type=int, default=40)
        watch.add_argument("--spectators", type=int, default=100)
        watch.add_argument("--referees", type=int, default=2)
        add_league_format_arguments(watch)
        watch.add_argument("--lm-server", default="uvicorn", choices=("uvicorn", "daphne"))
        watch.add_argument(
            "--lm-workers", type=int, default=1, help="uvicorn worker processes for the LM (needs REDIS_URL)"
        )
        watch.add_argument("--spectator-procs", type=int, default=2, help="processes hosting the spectators")
        watch.add_argument("--ramp", type=float, default=2.0, help="seconds over which the spectators arrive")
        watch.add_argument(
            "--spectator-nice",
            type=int,
            default=0,
            help="CPU niceness of the spectators' processes (19: they take only what the league leaves idle)",
        )
        watch.add_argument("--timeout", type=float, default=900.0)
        watch.add_argument("--quick", action="store_true", help="small and short, for the suite")
        watch.add_argument("--json", dest="json_path")
        pages = sub.add_parser("pages", help="a played league's first page served by the LM alone")
        pages.add_argument("--players", type=int, default=100)
        pages.add_argument("--referees", type=int, default=2)
        pages.add_argument("--pages", type=int, default=500, help="page loads")
        pages.add_argument("--concurrency", type=int, default=50, help="loads at a time")
        pages.add_argument("--lm-server", default="uvicorn", choices=("uvicorn", "daphne"))
        pages.add_argument(
            "--lm-workers", type=int, default=1, help="uvicorn worker processes for the LM (needs REDIS_URL)"
        )
        pages.add_argument("--quick", action="store_true", help="small and short, for the suite")
        pages.add_argument("--json", dest="json_path")
        fuzz = sub.add_parser("fuzz", help="invalid requests over every kind of endpoint: no 5xx, no state change")
        fuzz.add_argument("--requests", type=int, default=100_000)
        fuzz.add_argument("--concurrency", type=int, default=16)
        fuzz.add_argument("--seed", type=int, default=0)
        fuzz.add_argument("--targets", default="lm,referee,player,relay", help="endpoints that get requests")
        fuzz.add_argument("--json", dest="json_path")
        for played in (league, api, scale, soak, chaos, server, watch, pages, fuzz):
            played.add_argument(
                "--keep-db",
                action="store_true",
                help="keep the bench's own SQLite database (made when DATABASE_URL is unset) and report its path",
            )

    def handle(self, *args: Any, **options: Any) -> None:
        what = options["what"]
        if options.get("lm_workers", 1) > 1 and not settings.REDIS_URL:
            # Each process's in-memory layer reaches only its own sockets: pages and relayed
            # players held by one worker would never hear of what another did.
            raise CommandError("--lm-workers above 1 needs REDIS_URL: the LM's processes share one channel layer")
        scratch = None
        if what != "ceiling":
            scratch = scratch_database()
            call_command("migrate", interactive=False, verbosity=0)
        report: dict[str, Any] | None = None
        try:
            report = self.run(what, options)
        finally:
            # A failed bench keeps its database, for a look at what happened.
            bad = report is None or report.get("valid") is False or bool(report.get("errors"))
            keep = bool(options.get("keep_db")) or bad
            if scratch is not None and not keep:
                scratch.remove()
            elif scratch is not None:
                self.stderr.write(f"the bench's database is kept: {scratch.path}")
        if what != "ceiling":
            report["database"] = scratch.describe(kept=keep) if scratch is not None else configured_database()
        self._emit(report, options.get("json_path"))
        if bad:
            raise CommandError(f"bench {what}: the results do not add up (see the report)")

    def run(self, what: str, options: dict[str, Any]) -> dict[str, Any]:
        if what == "ceiling":
            from league.bench.ceiling import run_ceiling

            calls = 2_000 if options["quick"] else options["calls"]
            report: dict[str, Any] = run_ceiling(calls, options["concurrency"])
            report["machine"] = machine_info()
        elif what == "league":
            report = self.league(options)
        elif what == "api":
            from league.bench.api import ApiBench

            bench = ApiBench(
                rate=options["rate"],
                seconds=5.0 if options["quick"] else options["seconds"],
                players=5 if options["quick"] else options["players"],
                lm_server=options["lm_server"],
            )
            report = bench.run()
        elif what == "scale":
            from league.bench.scale import ScaleBench

            sizes = [int(s) for s in options["sizes"].split(",") if s.strip()]
            if options["big"]:
                sizes.append(200)
            bench = ScaleBench(
                sizes=[4, 6] if options["quick"] else sizes,
                referees=options["referees"],
                registrations=50 if options["quick"] else options["registrations"],
                chart=options["chart"],
                out=self.stderr,
            )
            report = bench.run()
        elif what == "server":
            from league.bench.server import ServerBench

            quick = options["quick"]
            report = ServerBench(
                slow=50 if quick else options["slow"],
                idle=50 if quick else options["idle"],
                probes=10 if quick else options["probes"],
                out=self.stderr,
            ).run()
        elif what == "pages":
            from league.bench.league_run import BenchFailed
            from league.bench.pages import PagesBench

            quick = options["quick"]
            try:
                report = PagesBench(
                    players=6 if quick else options["players"],
                    referees=options["referees"],
                    pages=20 if quick else options["pages"],
                    concurrency=5 if quick else options["concurrency"],
                    lm_server=options["lm_server"],
                    lm_workers=options["lm_workers"],
                    timeout=120.0 if quick else 900.0,
                    out=self.stderr,
                ).run()
            except BenchFailed as exc:
                raise CommandError(f"bench pages failed: {exc}") from exc
        elif what == "fuzz":
            from league.bench.fuzz import FuzzBench

            targets = tuple(t.strip() for t in options["targets"].split(",") if t.strip())
            report = FuzzBench(
                requests=options["requests"],
                concurrency=options["concurrency"],
                seed=options["seed"],
                targets=targets,
                out=self.stderr,
            ).run()
        elif what == "chaos":
            from league.bench.chaos import ChaosBench

            report = ChaosBench(
                minutes=options["minutes"],
                players=options["players"],
                referees=options["referees"],
                game=options["game"],
                player_hosts=options["player_hosts"],
                kill_every=tuple(options["kill_every"]),
                outage_every=tuple(options["outage_every"]),
                outage_for=tuple(options["outage_for"]),
                bound=options["bound"],
                settle=options["settle"],
                max_leagues=options["max_leagues"],
                seed=options["seed"],
                out=self.stderr,
            ).run()
        elif what == "arena":
            from league.bench.arena import ArenaBench

            quick = options["quick"]
            report = ArenaBench(
                agents=6 if quick else options["agents"],
                referees=options["referees"],
                max_concurrent=options["max_concurrent"],
                seconds=10.0 if quick else options["seconds"],
                warmup=3.0 if quick else 10.0,
                out=self.stderr,
            ).run()
        elif what == "spectators":
            from league.bench.league_run import BenchFailed
            from league.bench.spectators import SpectatorsBench

            try:
                report = SpectatorsBench(
                    players=6 if options["quick"] else options["players"],
                    spectators=5 if options["quick"] else options["spectators"],
                    referees=options["referees"],
                    schedule_format=options["format"],
                    rounds=options["rounds"],
                    player_hosts=options["player_hosts"],
                    lm_server=options["lm_server"],
                    lm_workers=options["lm_workers"],
                    spectator_procs=1 if options["quick"] else options["spectator_procs"],
                    ramp=options["ramp"],
                    nice=options["spectator_nice"],
                    timeout=120.0 if options["quick"] else options["timeout"],
                    out=self.stderr,
                ).run()
            except BenchFailed as exc:
                raise CommandError(f"bench spectators failed: {exc}") from exc
        else:
            from league.bench.soak import SoakBench

            report = SoakBench(
                minutes=options["minutes"],
                players=options["players"],
                referees=options["referees"],
                max_leagues=options["max_leagues"],
                out=self.stderr,
            ).run()
        return report

    def league(self, options: dict[str, Any]) -> dict[str, Any]:
        from league.bench.league_run import BenchFailed, LeagueBench

        def make(connect: bool = False) -> LeagueBench:
            return LeagueBench(
                players=6 if options["quick"] else options["players"],
                referees=options["referees"],
                game=options["game"],
                schedule_format=options["format"],
                rounds=options["rounds"],
                max_concurrent=options["max_concurrent"],
                player_hosts=options["player_hosts"],
                lm_server=options["lm_server"],
                lm_workers=options["lm_workers"],
                poll=settings.CONDUCTOR_POLL if options["poll"] is None else options["poll"],
                timeout=120.0 if options["quick"] else options["timeout"],
                out=self.stderr,
                connect=connect,
            )

        try:
            bench = make()
            if options["connect"]:
                from league.bench.relay import compare

                return compare(make)
            report = bench.run()
        except BenchFailed as exc:
            raise CommandError(f"bench league failed: {exc}") from exc
        if options["with_ceiling"]:
            from league.bench.ceiling import median_ceiling, run_ceiling

            runs = max(1, options["ceiling_runs"])
            ceiling = median_ceiling([run_ceiling(report["calls"], bench.concurrency) for _ in range(runs)])
            report["ceiling"] = ceiling
            report["ceiling_calls_per_second"] = ceiling["calls_per_second"]
            reference = ceiling["calls_per_second"]
            report["ratio_to_ceiling"] = round(report["calls_per_second"] / reference, 3) if reference else None
        return report

    def _emit(self, report: dict[str, Any], json_path: str | None) -> None:
        text = json.dumps(report, indent=2)
        if json_path:
            Path(json_path).write_text(text + "\n")
        self.stdout.write(text)
