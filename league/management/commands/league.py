"""``manage.py league create|open|close|start|pause|resume|cancel|key|status|match|revoke|export|recompute|delete``:
the admin's workflow.

The command parses arguments; the work is done by league/actions/ (the same functions the admin
and the LM use) and league/queries.py.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import IntegrityError

from league import actions, queries
from league.actions.arena import open_arena
from league.api.readmodel import referee_warning
from league.events import announce_leagues
from league.models import League, Player, Referee, game_type_choices, league_id_problem
from leagueproto.timeouts import DEFAULT_TIMEOUTS

TIMEOUT_OPTIONS = {
    "join_timeout": f"GAME_JOIN_ACK timeout, s ({DEFAULT_TIMEOUTS.join:g})",
    "move_timeout": f"parity choice / move timeout, s ({DEFAULT_TIMEOUTS.move:g})",
    "game_over_timeout": f"GAME_OVER delivery timeout, s ({DEFAULT_TIMEOUTS.game_over:g})",
    "report_timeout": f"MATCH_RESULT_REPORT timeout, s ({DEFAULT_TIMEOUTS.report:g})",
    "default_timeout": f"any other call, s ({DEFAULT_TIMEOUTS.default:g})",
    "retry_delay": "seconds between retries of E001/E009 (2)",
    "match_deadline": "reassign a match not reported after this many seconds (300)",
}


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [headers, *[[("" if v is None else str(v)) for v in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


class Command(BaseCommand):
    help = (
        "Create and drive leagues: create, open, close, start, pause, resume, cancel, key, status, match, revoke, "
        "export, recompute, delete."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)

        create = sub.add_parser("create", help="create a league")
        create.add_argument("--name", required=True)
        create.add_argument("--league-id", help="slug, e.g. league_2025_even_odd (default: from the name)")
        create.add_argument("--game", default="even_odd", choices=[name for name, _ in game_type_choices()])
        create.add_argument("--registration-seconds", type=float, default=60.0)
        create.add_argument("--open", action="store_true", help="open registration now")
        create.add_argument("--min-players", type=int, default=2)
        create.add_argument("--max-players", type=int, default=200)
        create.add_argument("--max-referees", type=int, default=50)
        create.add_argument(
            "--schedule",
            choices=[value for value, _ in League.ScheduleFormat.choices],
            default="single",
            help="single or double round-robin, swiss (with --rounds), knockout, or arena (docs/operations.md)",
        )
        create.add_argument("--rounds", type=int, default=0, help="Swiss: rounds to play (1 to players-1)")
        create.add_argument("--retries", type=int, default=3)
        create.add_argument("--max-invalid-moves", type=int, default=3)
        create.add_argument("--embedded-referee", action="store_true", help="run matches in the LM without referees")
        create.add_argument("--allowed-networks", help="comma-separated networks agent endpoints may live in")
        for option, text in TIMEOUT_OPTIONS.items():
            create.add_argument("--" + option.replace("_", "-"), type=float, help=text)

        opener = sub.add_parser("open", help="open registration")
        opener.add_argument("league_id")
        opener.add_argument("--registration-seconds", type=float, default=60.0)
        for name, text in (
            ("close", "close registration now"),
            ("start", "close registration and mark the league READY for the conductor"),
            ("pause", "hold a ready or running league: nothing new is dispatched until it resumes"),
            ("resume", "go on with a paused league"),
            ("key", "generate the league's referee key (shown once; replaces the previous one)"),
            ("status", "print players, referees and standings"),
        ):
            sub.add_parser(name, help=text).add_argument("league_id")
        cancel = sub.add_parser("cancel", help="stop a league for good (cannot be resumed)")
        cancel.add_argument("league_id")
        cancel.add_argument("--yes", action="store_true", help="do it (without it, only say what it would do)")

        match = sub.add_parser("match", help="create one match by hand (optionally assigned to a referee)")
        match.add_argument("league_id")
        match.add_argument("--players", nargs=2, required=True, metavar=("PLAYER_A", "PLAYER_B"))
        match.add_argument("--round", type=int, default=1)
        match.add_argument("--match-id")
        match.add_argument("--referee", help="e.g. REF01: the match is ASSIGNED to it")

        revoke = sub.add_parser("revoke", help="revoke an agent's token at once (the agent is SUSPENDED)")
        revoke.add_argument("league_id")
        revoke.add_argument("agent_id", help="e.g. P07 or REF02")

        export = sub.add_parser("export", help="write the league as JSON (no token hashes)")
        export.add_argument("league_id")
        export.add_argument("--out", help="file to write (default: standard output)")

        recompute = sub.add_parser(
            "recompute", help="recompute standings from the results alone and report any difference"
        )
        recompute.add_argument("league_id")
        recompute.add_argument("--from", dest="from_file", help="an export file to recompute instead of the database")

        delete = sub.add_parser(
            "delete", help="delete a league with all its players, referees, matches, results and events (logged)"
        )
        delete.add_argument("league_id")
        delete.add_argument("--yes", action="store_true", help="do it (without it, only say what would go)")

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        try:
            getattr(self, f"do_{action}")(options)
        except (ValueError, IntegrityError) as exc:
            raise CommandError(str(exc)) from exc

    def _league(self, league_id: str) -> League:
        league = League.objects.filter(league_id=league_id).first()
        if league is None:
            raise CommandError(f"no league {league_id!r}")
        return league

    def do_create(self, options: dict[str, Any]) -> None:
        from django.utils.text import slugify

        given = options["league_id"] is not None
        league_id = options["league_id"] if given else slugify(options["name"]).replace("-", "_")
        problem = league_id_problem(league_id)
        if problem:
            hint = "" if given else " (made from --name: give --league-id)"
            raise CommandError(problem + hint)
        if League.objects.filter(league_id=league_id).exists():
            raise CommandError(f"league {league_id!r} already exists")
        settings: dict[str, Any] = {
            "min_players": options["min_players"],
            "max_players": options["max_players"],
            "max_referees": options["max_referees"],
            "schedule_format": options["schedule"],
            "swiss_rounds": options["rounds"],
            "retries": options["retries"],
            "max_invalid_moves": options["max_invalid_moves"],
            "embedded_referee": options["embedded_referee"],
        }
        if options["allowed_networks"]:
            settings["allowed_networks"] = options["allowed_networks"]
        for option in TIMEOUT_OPTIONS:
            if options.get(option) is not None:
                settings[option] = options[option]
        league = actions.create_league(name=options["name"], league_id=league_id, game_type=options["game"], **settings)
        announce_leagues("league_created", league.league_id)
        self.stdout.write(f"created league {league.league_id} ({league.game_type})")
        if options["open"]:
            self._open(league, options["registration_seconds"])

    def _open(self, league: League, seconds: float) -> None:
        if league.is_arena:  # an arena has no window: open, it plays and takes players until paused
            league = open_arena(league)
            self.stdout.write(f"arena {league.league_id} open: it takes players and plays until paused or cancelled")
            return
        league = actions.open_registration(league, seconds or None)
        until = (
            f"until {league.registration_closes_at:%H:%M:%S} UTC" if league.registration_closes_at else "until closed"
        )
        self.stdout.write(f"registration open for {league.league_id} {until}")

    def do_open(self, options: dict[str, Any]) -> None:
        self._open(self._league(options["league_id"]), options["registration_seconds"])

    def do_close(self, options: dict[str, Any]) -> None:
        league = actions.close_registration(self._league(options["league_id"]))
        self.stdout.write(f"registration closed for {league.league_id}")

    def do_start(self, options: dict[str, Any]) -> None:
        league = actions.start_league(self._league(options["league_id"]))
        self.stdout.write(f"league {league.league_id} is {league.status}: the conductor will schedule and run it")
        self._warn_referees(league)

    def _warn_referees(self, league: League) -> None:
        warning = referee_warning(league)
        if warning:
            self.stdout.write(self.style.WARNING(f"WARNING: {warning}"))

    def do_pause(self, options: dict[str, Any]) -> None:
        league = actions.pause_league(self._league(options["league_id"]))
        self.stdout.write(f"league {league.league_id} is PAUSED: matches in play finish, nothing new starts")

    def do_resume(self, options: dict[str, Any]) -> None:
        league = actions.resume_league(self._league(options["league_id"]))
        self.stdout.write(f"league {league.league_id} is {league.status} again")
        self._warn_referees(league)

    def do_cancel(self, options: dict[str, Any]) -> None:
        league = self._league(options["league_id"])
        if not options["yes"]:
            self.stdout.write(
                f"would cancel {league.league_id} ({league.status}) for good: matches not yet started are "
                "cancelled and it cannot be resumed; add --yes to do it"
            )
            return
        league = actions.cancel_league(league)
        self.stdout.write(f"league {league.league_id} is CANCELLED")

    def do_key(self, options: dict[str, Any]) -> None:
        league = self._league(options["league_id"])
        key = actions.generate_referee_key(league)
        self.stdout.write(f"referee key of {league.league_id} (shown once; it replaces any previous one):\n{key}")
        self.stdout.write(
            "start a referee for it with:\n"
            f"  REFEREE_KEY={key} python manage.py runreferee --port 8001 --league-id {league.league_id} "
            "--league-url http://<this machine>:8000/mcp"
        )

    def do_match(self, options: dict[str, Any]) -> None:
        league = self._league(options["league_id"])
        if league.status != League.Status.RUNNING:
            # A match of a league that is not being played would be run (and scored) outside the
            # league's life: after it completed, before its schedule exists, while it is paused.
            raise CommandError(
                f"league {league.league_id} is {league.status}: matches are added to a running league only"
            )
        players = []
        for player_id in options["players"]:
            player = Player.objects.filter(league=league, player_id=player_id).first()
            if player is None:
                raise CommandError(f"no player {player_id} in {league.league_id}")
            players.append(player)
        referee = None
        if options["referee"]:
            referee = Referee.objects.filter(league=league, referee_id=options["referee"]).first()
            if referee is None:
                raise CommandError(f"no referee {options['referee']} in {league.league_id}")
        match = actions.create_match(
            league, options["round"], players[0], players[1], match_id=options["match_id"], referee=referee
        )
        self.stdout.write(f"match {match.match_id} {match.status}")

    def do_status(self, options: dict[str, Any]) -> None:
        league = self._league(options["league_id"])
        window = ""
        if league.registration_closes_at:
            state = "open" if league.registration_open() else "closed"
            verb = "closes" if league.registration_open() else "closed"
            window = f", registration {state} ({verb} {league.registration_closes_at:%Y-%m-%d %H:%M:%S} UTC)"
        self.stdout.write(f"{league.name} [{league.league_id}] {league.game_type}: {league.status}{window}")
        self._warn_referees(league)
        players = league.players.order_by("id")
        self.stdout.write(f"\nPlayers ({players.count()})")
        self.stdout.write(
            _table(
                ["id", "name", "status", "endpoint"],
                [[p.player_id, p.display_name, p.status, p.endpoint] for p in players],
            )
        )
        referees = league.referees.order_by("id")
        self.stdout.write(f"\nReferees ({referees.count()})")
        self.stdout.write(
            _table(
                ["id", "name", "status", "capacity", "endpoint"],
                [[r.referee_id, r.display_name, r.status, r.max_concurrent_matches, r.endpoint] for r in referees],
            )
        )
        self.stdout.write("\nStandings")
        self.stdout.write(
            _table(
                ["rank", "player", "name", "played", "W", "D", "L", "tech", "points"],
                [
                    [
                        r["rank"],
                        r["player_id"],
                        r["display_name"],
                        r["played"],
                        r["wins"],
                        r["draws"],
                        r["losses"],
                        r["technical_losses"],
                        r["points"],
                    ]
                    for r in queries.standings(league)
                ],
            )
        )

    def do_revoke(self, options: dict[str, Any]) -> None:
        league = self._league(options["league_id"])
        agent_id = options["agent_id"]
        agent: Player | Referee | None = Player.objects.filter(league=league, player_id=agent_id).first()
        if agent is None:
            agent = Referee.objects.filter(league=league, referee_id=agent_id).first()
        if agent is None:
            raise CommandError(f"no player or referee {agent_id} in {league.league_id}")
        actions.revoke_agent(agent)
        self.stdout.write(f"token of {agent_id} revoked; {agent_id} is SUSPENDED in {league.league_id}")

    def do_delete(self, options: dict[str, Any]) -> None:
        league = self._league(options["league_id"])
        counts = ", ".join(f"{n} {kind}" for kind, n in actions.league_records(league).items())
        if not options["yes"]:
            self.stdout.write(f"would delete {league.league_id} ({league.status}) with {counts}; add --yes to do it")
            return
        actions.delete_league(league, by="manage.py league delete")
        self.stdout.write(f"deleted {league.league_id} with {counts}")

    def do_export(self, options: dict[str, Any]) -> None:
        from league.export import dumps, export_league

        league = self._league(options["league_id"])
        text = dumps(export_league(league))
        if options["out"]:
            with open(options["out"], "w", encoding="utf-8") as fh:
                fh.write(text + "\n")
            self.stderr.write(f"exported {league.league_id} to {options['out']}")
        else:
            self.stdout.write(text)

    def do_recompute(self, options: dict[str, Any]) -> None:
        import json

        from league.export import export_league, recompute_standings, result_problems, standings_differences

        league_id = options["league_id"]
        if options["from_file"]:
            with open(options["from_file"], encoding="utf-8") as fh:
                data = json.load(fh)
            if data.get("league", {}).get("league_id") != league_id:
                raise CommandError(
                    f"{options['from_file']} is an export of {data.get('league', {}).get('league_id')!r}"
                )
            comparisons = [(data["standings"], "the export's standings")]
            league = League.objects.filter(league_id=league_id).first()
            if league is not None:
                comparisons.append((queries.standings(league), "the served standings"))
        else:
            league = self._league(league_id)
            data = export_league(league)
            comparisons = [(data["standings"], "the served standings")]
        recomputed = recompute_standings(data)
        problems = result_problems(data)
        for other, label in comparisons:
            problems += standings_differences(recomputed, other, label)
        self.stdout.write(f"Standings of {league_id} recomputed from {len(data['results'])} result(s)")
        self.stdout.write(
            _table(
                ["rank", "player", "played", "W", "D", "L", "tech", "points"],
                [
                    [
                        r["rank"],
                        r["player_id"],
                        r["played"],
                        r["wins"],
                        r["draws"],
                        r["losses"],
                        r["technical_losses"],
                        r["points"],
                    ]
                    for r in recomputed
                ],
            )
        )
        if problems:
            for problem in problems:
                self.stdout.write(f"DIFFERENCE {problem}")
            raise CommandError(f"{len(problems)} difference(s) between the results and the standings")
        labels = " and ".join(label for _, label in comparisons)
        self.stdout.write(f"no difference: the results give exactly {labels}")
