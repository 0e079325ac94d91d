"""``manage.py runplayer``: run one player (or ``--count N`` players) against a League Manager."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from django.core.management.base import BaseCommand, CommandError, CommandParser

from leagueproto.client import AgentClient, CallFailed
from leagueproto.server import split_hosts
from players.agent import Player, PlayerConfig, PlayerHost
from players.strategies import STRATEGIES

if TYPE_CHECKING:
    from players.connect import ConnectHost

QUERIES = ("GET_STANDINGS", "GET_SCHEDULE", "GET_NEXT_MATCH", "GET_PLAYER_STATS")
# The exit status when the league refused players (registration closed or full, withdrawn before
# the draw…): running the same command again will not get them in, so a supervisor should not.
# 0 is a league played to its end, 1 an error (one that may pass: the LM unreachable), 2 bad arguments.
EXIT_REFUSED = 3


def league_url(value: str) -> str:
    """``--league-url``: an http(s) URL with a host, refused at once otherwise (a URL without
    ``http://`` would fail every attempt to register, for a minute)."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        hint = f"; did you mean http://{value}?" if "://" not in value else ""
        raise argparse.ArgumentTypeError(f"{value!r} is not an http:// or https:// URL with a host{hint}")
    return value


def strategy_mix(value: str) -> list[str]:
    """``--strategy``: one strategy, or a comma-separated mix (``random,always_even``)."""
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in STRATEGIES]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"unknown strategy {', '.join(unknown) or repr(value)}; choose from {', '.join(sorted(STRATEGIES))}"
        )
    return names


class Command(BaseCommand):
    help = (
        "Run an Even/Odd league player agent (POST /mcp) that registers with the League Manager. "
        "Exit status: 0 once the league is over; 1 on an error, including giving up registering "
        "(the LM not answering) or a --league-url / --league-id with no league to join; 2 for bad "
        f"arguments; {EXIT_REFUSED} when the league refused one or more of its players (registration "
        "closed or full, withdrawn before the draw): running it again will not get them in."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8101, help="First port (players use port … port+count-1).")
        parser.add_argument("--host", default="127.0.0.1", help="Address to listen on.")
        parser.add_argument("--advertise-host", help="Host name the LM and referees should use to reach us.")
        parser.add_argument(
            "--allowed-hosts",
            default="",
            help="Comma-separated Host names /mcp answers besides --host, --advertise-host and localhost "
            "(e.g. a DNS name the LM uses); other Hosts get HTTP 400 ('*': any).",
        )
        parser.add_argument("--name", default="Player", help="Display name (Alpha-1, Alpha-2 … with --count).")
        parser.add_argument(
            "--strategy",
            default="random",
            type=strategy_mix,
            help=f"One of {', '.join(sorted(STRATEGIES))}; with --count, a comma-separated mix is dealt out in turn.",
        )
        parser.add_argument(
            "--league-url", default="http://127.0.0.1:8000/mcp", type=league_url, help="The LM's /mcp URL."
        )
        parser.add_argument("--league-id", help="League to join (default: the one open for registration).")
        parser.add_argument("--count", type=int, default=1, help="Host this many independent players.")
        parser.add_argument("--state-dir", type=Path, help="Keep identity and memory here (JSON per player).")
        parser.add_argument("--stay", action="store_true", help="Keep serving after LEAGUE_COMPLETED.")
        parser.add_argument("--no-register", action="store_true", help="Serve only; do not register.")
        parser.add_argument(
            "--connect",
            action="store_true",
            help="Listen on no port: connect out to the LM's relay and answer there (behind NAT, say).",
        )
        parser.add_argument("--query", choices=QUERIES, help="Ask the LM league_query and print the answer.")
        parser.add_argument("--decision-cap", type=float, default=10.0, help="Max seconds a strategy may think.")
        parser.add_argument("--register-attempts", type=int, default=10)
        parser.add_argument("--llm-model", help="Gemini model for --strategy llm (default $GEMINI_MODEL).")
        parser.add_argument("--llm-timeout", type=float, help="Seconds to wait for Gemini (default $GEMINI_TIMEOUT).")
        parser.add_argument("--log-level", default="INFO")

    def handle(self, *args: Any, **options: Any) -> None:
        level = logging.getLevelName(options["log_level"].upper())
        if not isinstance(level, int):
            raise CommandError(f"unknown --log-level {options['log_level']!r}")
        logging.basicConfig(level=level, format="%(asctime)s %(name)s %(message)s")
        self.quiet = level > logging.INFO  # per-match lines only at INFO and below
        if options["count"] < 1:
            raise CommandError("--count must be at least 1")
        mix: list[str] = options["strategy"]
        if len(mix) > 1 and options["count"] < 2:
            raise CommandError("a mix of strategies needs --count 2 or more")
        strategy_options: dict[str, Any] = {}
        if "llm" in mix:
            if options["llm_model"]:
                strategy_options["model"] = options["llm_model"]
            if options["llm_timeout"] is not None:
                strategy_options["timeout"] = options["llm_timeout"]
        config = PlayerConfig(
            name=options["name"],
            strategy="llm" if "llm" in mix else mix[0],  # the one the --llm-* options are for
            league_url=options["league_url"],
            league_id=options["league_id"],
            host=options["host"],
            advertise_host=options["advertise_host"],
            port=options["port"],
            state_dir=options["state_dir"],
            decision_cap=options["decision_cap"],
            register_attempts=options["register_attempts"],
            strategy_options=strategy_options,
            allowed_hosts=split_hosts(options["allowed_hosts"]),
        )
        if options["query"] and options["count"] == 1:
            saved = Player(config)
            if saved.token:  # a known identity: just ask, no need to serve
                self._print(asyncio.run(self._query(saved, options["query"])))
                return
        if options["connect"]:
            self._connect(config, options, mix)
            return
        host = PlayerHost.build(
            config,
            options["count"],
            register=not options["no_register"],
            stay=options["stay"],
            echo=self._echo,
            warn=self._warn,
            strategies=mix,
        )
        if options["query"]:
            self._query_after_registration(host, options["query"])
        self._echo(
            f"serving {len(host.players)} player(s) ({', '.join(mix)}) on {options['host']}:"
            f"{options['port']}{'…' + str(options['port'] + options['count'] - 1) if options['count'] > 1 else ''}"
        )
        host.serve_forever(options["host"])
        self._fail_unless_joined(host)

    def _connect(self, config: PlayerConfig, options: dict[str, Any], mix: list[str]) -> None:
        """--connect: the players answer over the LM's relay (players/connect.py)."""
        from players.connect import ConnectHost, connect_url  # the websockets client: only when asked for

        host = ConnectHost.build(
            config,
            options["count"],
            register=not options["no_register"],
            stay=options["stay"],
            echo=self._echo,
            warn=self._warn,
            strategies=mix,
        )
        if options["query"]:
            self._query_after_registration(host, options["query"])
        self._echo(f"playing {len(host.players)} player(s) ({', '.join(mix)}) through {connect_url(config.league_url)}")
        host.serve_forever()
        self._fail_unless_joined(host)

    @staticmethod
    def _fail_unless_joined(host: PlayerHost | ConnectHost) -> None:
        """Players that could not join are a failure that scripts and supervisors must see in the
        exit status, and tell apart: an error (1) may pass if run again, a refusal (EXIT_REFUSED)
        will not."""
        failed = [p for p in host.players if p.outcome in ("refused", "no_league", "gave_up")]
        if not failed:
            return
        refused = all(p.outcome == "refused" for p in failed)
        raise CommandError(
            f"{len(failed)} of {len(host.players)} player(s) could not join the league"
            + (": the league refused them" if refused else ""),
            returncode=EXIT_REFUSED if refused else 1,
        )

    def _query_after_registration(self, host: PlayerHost | ConnectHost, query_type: str) -> None:
        async def print_query(player: Player) -> None:
            try:
                self._print(await player.query(query_type))
            except CallFailed as exc:
                self.stderr.write(f"query failed: {exc}")

        host.players[0].on_registered = print_query

    async def _query(self, player: Player, query_type: str) -> dict[str, Any]:
        player.client = AgentClient()
        try:
            return await player.query(query_type)
        except CallFailed as exc:
            raise CommandError(f"query failed: {exc}") from exc
        finally:
            await player.client.close()

    def _print(self, reply: dict[str, Any]) -> None:
        self.stdout.write(json.dumps(reply, indent=2))

    def _echo(self, line: str) -> None:
        if getattr(self, "quiet", False):
            return
        self.stdout.write(line)
        self.stdout.flush()

    def _warn(self, line: str) -> None:
        """What went wrong, whatever --log-level says."""
        self.stderr.write(line)
        self.stderr.flush()
