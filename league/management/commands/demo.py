"""``manage.py demo``: a whole league, live, with real processes on loopback.

Starts the LM site (uvicorn serving ``leaguesite.asgi:application``), the conductor
(``runleague``), ``--referees`` referees (``runreferee``) and ``--players`` players
(``runplayer``, a mix of strategies), creates and opens a league, starts it once everyone has
registered, shows a live progress bar, prints the final standings and the champion, then keeps
the site up for browsing until Ctrl-C (or exits with ``--exit``).
"""

from __future__ import annotations

import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser, OutputWrapper

from league import actions
from league.actions import FINAL, cancel_league, delete_league
from league.api import readmodel
from league.bench.processes import Cluster, busy_ports, strategy_groups
from league.models import AgentStatus, League
from league.standings import standings
from leagueproto.envelope import AGENT_PROTOCOL_VERSION, GAME_TYPES

FAST = {
    "join_timeout": 1.0,
    "move_timeout": 2.0,
    "game_over_timeout": 1.0,
    "report_timeout": 2.0,
    "default_timeout": 2.0,
    "retries": 1,
    "retry_delay": 0.2,
    "match_deadline": 60.0,
}


@dataclass
class Demo:
    players: int = 8
    referees: int = 2
    game: str = "even_odd"
    port: int = 8000
    referee_port: int = 8001
    player_port: int = 8101
    silent: int = 0
    fast: bool = False
    round_pause: float = 0.0
    timeout: float = 600.0
    log_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="league-demo-")))
    out: Any = sys.stdout
    cluster: Cluster = field(init=False)

    def __post_init__(self) -> None:
        self.cluster = Cluster(self.log_dir)

    @property
    def lm_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def retire_old_demos(self) -> None:
        """Cancel earlier demo leagues left unfinished (Ctrl-C), so the conductor ignores them."""
        stale = League.objects.filter(league_id__startswith="demo_").exclude(
            status__in=(League.Status.COMPLETED, League.Status.CANCELLED)
        )
        for league in stale:
            cancel_league(league)

    def create_league(self) -> League:
        self.retire_old_demos()
        league_id = f"demo_{time.strftime('%Y%m%d_%H%M%S')}"
        extra = dict(FAST) if self.fast else {}
        league = actions.create_league(
            name=f"Demo league ({self.game})",
            league_id=league_id,
            game_type=self.game,
            min_players=min(2, self.players + self.silent),
            max_players=self.players + self.silent,
            max_referees=max(1, self.referees),
            round_pause=self.round_pause,
            **extra,
        )
        return actions.open_registration(league, 120.0)

    def ports(self) -> dict[int, str]:
        """Every port the demo's processes will listen on, and what for."""
        wanted = {self.port: "the League Manager site, --port"}
        for i in range(self.referees):
            wanted[self.referee_port + i] = f"referee {i + 1}, --referee-port"
        for i in range(self.players):
            wanted[self.player_port + i] = f"player {i + 1}, --player-port"
        return wanted

    def check_ports(self) -> None:
        """Refuse to start (before anything is created) when a port the demo needs is taken."""
        wanted = self.ports()
        if len(wanted) < 1 + self.referees + self.players:
            raise CommandError(
                "the LM, referee and player ports overlap: choose --port, --referee-port, --player-port apart"
            )
        busy = busy_ports(wanted)
        if busy:
            raise CommandError(
                "cannot start the demo, in use: " + "; ".join(busy) + ". Stop what listens there or choose other ports."
            )

    def start_site(self) -> None:
        self.cluster.start_site(self.port)
        self.check_children()  # up, and listening itself (not something else on the port)

    def log_tail(self, name: str, lines: int = 12) -> str:
        try:
            text = (self.log_dir / f"{name}.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.rstrip().splitlines()[-lines:])

    def failed_children(self) -> str:
        """What the processes that died said last (their logs' tails), to show with an error."""
        parts = []
        for child in self.cluster.children:
            if child.proc.poll() not in (None, 0) and child.role in ("lm", "conductor", "referee"):
                tail = self.log_tail(child.name)
                parts.append(f"--- {child.name} exited ({child.proc.returncode}); its log ends:\n{tail}")
        return "\n".join(parts)

    def abandon(self, league: League | None) -> None:
        """After a failure: stop every process, then delete the league it had created."""
        self.stop()
        if league is None:
            return
        league = League.objects.filter(pk=league.pk).first()
        if league is None:
            return
        if league.status not in FINAL and league.status != League.Status.INITIALIZING:
            league = cancel_league(league)
        delete_league(league, by="manage.py demo (failed)")

    def start_agents(self, league: League) -> None:
        # The conductor serves every league, so a second league created in the admin runs too.
        self.cluster.start_conductor(None, poll=0.1)
        # The demo's referees get a key of the demo league's own (generated here, never shown).
        key = actions.generate_referee_key(league)
        self.cluster.start_referees(
            self.lm_url, league.league_id, self.referees, self.referee_port, max_concurrent=4, referee_key=key
        )
        self.cluster.start_players(self.lm_url, league.league_id, strategy_groups(self.players), self.player_port)
        for i in range(self.silent):
            self.register_silent(league, i)

    def register_silent(self, league: League, index: int) -> None:
        """A player that registers and then never answers (its endpoint has no server)."""
        from leagueproto.envelope import make_message

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        message = make_message(
            "LEAGUE_REGISTER_REQUEST",
            f"player:silent{index + 1}",
            league_id=league.league_id,
            player_meta={
                "display_name": f"Silent-{index + 1}",
                "version": "1.0.0",
                "protocol_version": AGENT_PROTOCOL_VERSION,
                "game_types": [self.game],
                "contact_endpoint": f"http://127.0.0.1:{port}/mcp",
            },
        )
        import httpx

        payload = {"jsonrpc": "2.0", "id": 1, "method": "register_player", "params": message}
        reply = httpx.post(self.lm_url, json=payload, timeout=10).json().get("result", {})
        if reply.get("status") != "ACCEPTED":
            raise CommandError(f"the silent player was not registered: {reply}")

    def wait_for_registrations(self, league: League, timeout: float = 60.0) -> League:
        deadline = time.monotonic() + timeout
        want_players = self.players + self.silent
        while time.monotonic() < deadline:
            self.check_children()
            players = league.players.exclude(status=AgentStatus.REMOVED).count()
            referees = league.referees.exclude(status=AgentStatus.REMOVED).count()
            if players >= want_players and referees >= self.referees:
                return actions.start_league(league)
            time.sleep(0.1)
        raise CommandError(f"registration incomplete after {timeout:g} s (logs in {self.log_dir})")

    def check_children(self) -> None:
        self.cluster.check()  # the site and the conductor must stay up

    def follow(self, league: League) -> League:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        console = Console(file=self.out)
        deadline = time.monotonic() + self.timeout
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=console, transient=False) as bar:
            task = bar.add_task("starting", total=None)
            while True:
                league.refresh_from_db()
                state = readmodel.progress(league)
                table = standings(league) if state["matches_finished"] else []
                leader = table[0] if table else None
                lead = (
                    f" · leader {leader['player_id']} {leader['display_name']} ({leader['points']} pts)"
                    if leader
                    else ""
                )
                bar.update(
                    task,
                    total=state["matches_total"] or None,
                    completed=state["matches_finished"],
                    description=f"round {state['current_round']}/{state['rounds_total']}{lead}",
                )
                if league.status in (League.Status.COMPLETED, League.Status.CANCELLED):
                    return league
                if time.monotonic() > deadline:
                    raise CommandError(f"the league did not finish in {self.timeout:g} s (logs in {self.log_dir})")
                self.check_children()
                time.sleep(0.2)

    def print_standings(self, league: League) -> None:
        from rich.console import Console
        from rich.table import Table

        console = Console(file=self.out)
        table = Table(title=f"Final standings · {league.name}")
        for column in ("rank", "player", "name", "played", "W", "D", "L", "tech. L", "points"):
            table.add_column(column, justify="left" if column in ("player", "name") else "right")
        for row in standings(league):
            table.add_row(
                *(
                    str(row[k])
                    for k in (
                        "rank",
                        "player_id",
                        "display_name",
                        "played",
                        "wins",
                        "draws",
                        "losses",
                        "technical_losses",
                        "points",
                    )
                )
            )
        console.print(table)
        champion = league.champion
        if champion is not None:
            console.print(f"Champion: {champion.player_id} {champion.display_name}")

    def stop(self) -> None:
        self.cluster.stop()


class WholeWrites:
    """The command's stdout as the stream rich draws on: rich writes partial lines (the progress
    bar redraws one), and Django's ``OutputWrapper`` ends every write with a newline unless told
    ``ending=""``."""

    def __init__(self, wrapper: OutputWrapper) -> None:
        self.wrapper = wrapper

    def write(self, text: str) -> int:
        self.wrapper.write(text, ending="")
        return len(text)

    def flush(self) -> None:
        self.wrapper.flush()

    def isatty(self) -> bool:
        return self.wrapper.isatty()


class Command(BaseCommand):
    help = "Play a whole league live: LM site, conductor, referees and players as real processes."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--players", type=int, default=8)
        parser.add_argument("--referees", type=int, default=2)
        parser.add_argument("--game", default="even_odd", choices=GAME_TYPES)
        parser.add_argument("--port", type=int, default=8000, help="The LM site's port.")
        parser.add_argument("--referee-port", type=int, default=8001, help="First referee port.")
        parser.add_argument("--player-port", type=int, default=8101, help="First player port.")
        parser.add_argument(
            "--silent",
            type=int,
            default=0,
            help="Also register this many players that never answer (withdrawn before the schedule is drawn).",
        )
        parser.add_argument("--fast", action="store_true", help="Short timeouts (1-2 s) instead of the spec's.")
        parser.add_argument("--timeout", type=float, default=600.0, help="Give up after this many seconds.")
        parser.add_argument("--exit", action="store_true", help="Exit when the league is over.")
        parser.add_argument(
            "--round-pause",
            type=float,
            default=None,
            help="Seconds between rounds, so people can watch (default 3 s, or 0 with --exit).",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["players"] + opts["silent"] < 2:
            raise CommandError("a league needs at least 2 players")
        call_command("migrate", interactive=False, verbosity=0)
        demo = Demo(
            players=opts["players"],
            referees=opts["referees"],
            game=opts["game"],
            port=opts["port"],
            referee_port=opts["referee_port"],
            player_port=opts["player_port"],
            silent=opts["silent"],
            fast=opts["fast"],
            round_pause=opts["round_pause"] if opts["round_pause"] is not None else (0.0 if opts["exit"] else 3.0),
            timeout=opts["timeout"],
            out=WholeWrites(self.stdout),
        )
        demo.check_ports()  # before anything is created: a busy port leaves nothing behind
        league = None
        try:
            league = demo.create_league()
            self.stdout.write(f"League {league.league_id}; agent logs in {demo.log_dir}")
            demo.start_site()
            self.stdout.write(f"League Manager at http://127.0.0.1:{demo.port}/ (MCP: {demo.lm_url})")
            self.stdout.write(f"Watch it live: http://127.0.0.1:{demo.port}/leagues/{league.league_id}/")
            demo.start_agents(league)
            league = demo.wait_for_registrations(league)
            league = demo.follow(league)
            demo.print_standings(league)
            if league.status != League.Status.COMPLETED:
                raise CommandError(f"league ended {league.status}")
        except CommandError as exc:
            told = demo.failed_children()
            demo.abandon(league)
            where = f" The league was deleted; agent logs in {demo.log_dir}." if league is not None else ""
            raise CommandError(f"{exc}{where}" + (f"\n{told}" if told else "")) from exc
        except KeyboardInterrupt:  # Ctrl-C while it plays: stop; the next demo cancels the league
            demo.stop()
            return
        except BaseException:
            demo.stop()
            raise
        try:
            if not opts["exit"]:
                self.stdout.write(f"Site still up at http://127.0.0.1:{demo.port}/ - Ctrl-C to stop.")
                signal.signal(signal.SIGTERM, _interrupt)
                while demo.cluster.children[0].proc.poll() is None:
                    time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            demo.stop()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
