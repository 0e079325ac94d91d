"""``manage.py checkagent URL``: check a player agent before it joins a league (league/checkagent.py).

Prints each message sent, the reply, its latency and a verdict, then the fix for every problem and
the two verdicts (plays a match: pass/fail; takes league notices: pass/warn). Exits 0 when the agent
plays a match (warnings are advice), 1 otherwise. Run on the League Manager, it calls an agent
registered there by its registered id.
"""

from __future__ import annotations

import asyncio
import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from rich.console import Console
from rich.table import Table

from league.checkagent import (
    DEFAULT_REFEREE_ENDPOINT,
    FAIL,
    OK,
    PASS,
    TIMEOUTS,
    WARN,
    Check,
    Report,
    endpoint_refusal,
    find_registration,
    reply_summary,
)
from leagueproto.timeouts import Timeouts
from referee.games import GAMES

STYLE = {OK: "green", PASS: "green", WARN: "yellow", FAIL: "bold red"}


class Command(BaseCommand):
    help = "Check a player agent: a practice match and every league notice, each reply judged."
    requires_system_checks: list[str] = []  # a client: nothing of the site is needed

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("url", help="the agent's /mcp URL, e.g. http://127.0.0.1:8101/mcp")
        parser.add_argument("--game", default="even_odd", choices=sorted(GAMES), help="the practice match's game")
        parser.add_argument(
            "--player-id",
            help="the id to call your agent by (default: its registered id here, else the one it answers with)",
        )
        parser.add_argument(
            "--timeout", type=float, help=f"seconds to wait for each reply (default: {TIMEOUTS.move:g} for a move, "
            f"{TIMEOUTS.default:g} otherwise)"
        )  # fmt: skip
        parser.add_argument("--json", action="store_true", help="print the report as JSON")

    def handle(self, *args, url: str, game: str, player_id: str | None, timeout: float | None, **options) -> None:
        problem = endpoint_refusal(url)
        if problem:
            raise CommandError(f"{url}: {problem} (CHECKAGENT_ALLOWED_NETWORKS sets the networks)")
        timeouts = TIMEOUTS if timeout is None else Timeouts.every(timeout)
        check = Check(
            url,
            game_type=game,
            player_id=player_id,
            timeouts=timeouts,
            registration=find_registration(url),
            referee_endpoint=f"{settings.LM_BASE_URL}/mcp" if settings.LM_BASE_URL else DEFAULT_REFEREE_ENDPOINT,
        )
        report = asyncio.run(check.run())
        if options["json"]:
            self.stdout.write(json.dumps(report.to_dict(), indent=2, default=str))
        else:
            self.print_report(report)
        if not report.passed:
            raise CommandError("the agent failed the check: see the fixes above", returncode=1)

    def print_report(self, report: Report) -> None:
        console = Console(file=self.stdout, width=140, highlight=False)
        title = f"Check of {report.endpoint} ({report.game_type}, as {report.player_id}: {report.id_source})"
        table = Table(title=title)
        for name, justify in (("#", "right"), ("sent", "left"), ("reply", "left"), ("ms", "right"), ("", "left")):
            table.add_column(name, justify=justify)
        for n, step in enumerate(report.steps, 1):
            latency = "" if step.latency_ms is None else f"{step.latency_ms:.0f}"
            verdict = f"[{STYLE[step.verdict]}]{step.verdict}[/]"
            table.add_row(str(n), f"{step.message_type} ({step.method})", reply_summary(step), latency, verdict)
        console.print(table)
        if report.match_result:
            result = report.match_result
            console.print(f"Practice match: {result['status']}, {result['details'].get('reason', '')}")
        if report.id_warning:
            console.print(f"[yellow]{report.id_warning}[/]")
        for n, step in enumerate(report.steps, 1):
            if step.same_as:
                console.print(f"[{STYLE[step.verdict]}]{n}. {step.message_type}: {step.note}: as {step.same_as}.[/]")
            elif step.verdict != OK:
                console.print(f"[{STYLE[step.verdict]}]{n}. {step.message_type}: {step.shown_note}[/]")
                console.print(f"   fix: {step.fix} (see {step.see})")
        for skipped in report.skipped:
            console.print(f"{skipped[0].upper()}{skipped[1:]}.")
        if report.stopped:
            console.print(f"[bold red]Stopped: {report.stopped}.[/]")
        console.print(f"Plays a match: [{STYLE[report.plays_match]}]{report.plays_match}[/]")
        console.print(f"Takes league notices: [{STYLE[report.takes_notices]}]{report.takes_notices}[/]")
        counts = report.counts()
        console.print(
            f"[{STYLE[report.verdict]}]Verdict: {report.verdict}[/] ({counts[OK]} ok, {counts[WARN]} warn, "
            f"{counts[FAIL]} fail) in {report.seconds:g} s; nothing was registered."
        )
