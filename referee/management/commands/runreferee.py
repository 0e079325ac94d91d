"""``manage.py runreferee``: serve one referee agent on its own port (uvicorn, lean ASGI app)."""

from __future__ import annotations

import logging
import os
import signal
import sys

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from leagueproto.serve import bind_sockets, make_server
from leagueproto.server import split_hosts
from referee.agent import Referee, RefereeConfig


class Command(BaseCommand):
    help = "Run a referee agent: serve POST /mcp, register with the League Manager, run assigned matches."
    # An agent has no database. Django's model checks open every configured one (a JSONField asks
    # its database what it supports), which on a referee's machine would create an empty
    # db.sqlite3 in the checkout.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8001)
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--league-url", default="http://127.0.0.1:8000/mcp", help="The LM's /mcp URL.")
        parser.add_argument("--name", default=None, help="Display name (default Referee-<port>).")
        parser.add_argument("--max-concurrent", type=int, default=4, help="Matches run at once.")
        parser.add_argument(
            "--no-register",
            action="store_true",
            help="Do not register with the LM: run matches for callers and players on this machine only.",
        )
        parser.add_argument("--league-id", default=None, help="The league to join (default: the one open).")
        parser.add_argument("--state-dir", default=None, help="Keep identity and unsent reports here.")
        parser.add_argument("--advertise-host", default=None, help="Host the LM and players should use.")
        parser.add_argument(
            "--allowed-hosts",
            default="",
            help="Comma-separated Host names /mcp answers besides --host, --advertise-host and localhost "
            "(e.g. a DNS name the LM uses); other Hosts get HTTP 400 ('*': any).",
        )
        parser.add_argument(
            "--max-reply-bytes",
            type=int,
            default=64 * 1024,
            help="A player's reply is read up to this size; a longer one is a technical failure (default 64 KiB).",
        )
        parser.add_argument("--grace", type=float, default=30.0, help="Seconds running matches get at shutdown.")
        parser.add_argument(
            "--key",
            default=os.environ.get("REFEREE_KEY") or None,
            help="The operator's referee key the League Manager asks for (default: $REFEREE_KEY).",
        )
        parser.add_argument("--log-level", default="info")

    def handle(self, *args, **opts) -> None:
        logging.basicConfig(level=opts["log_level"].upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
        config = RefereeConfig(
            name=opts["name"] or "",
            host=opts["host"],
            port=opts["port"],
            league_url=opts["league_url"],
            league_id=opts["league_id"],
            max_concurrent=max(1, opts["max_concurrent"]),
            register=not opts["no_register"],
            state_dir=opts["state_dir"],
            advertise_host=opts["advertise_host"],
            grace_seconds=opts["grace"],
            allowed_hosts=split_hosts(opts["allowed_hosts"]),
            max_reply_bytes=max(1024, opts["max_reply_bytes"]),
            key=opts["key"],
            report_linger=settings.REFEREE_REPORT_LINGER,
        )
        sockets = bind_sockets(config.host, [config.port])
        config.port = sockets[0].getsockname()[1]  # --port 0 picks a free port
        config.name = config.name or f"Referee-{config.port}"
        referee = Referee(config, echo=self._echo)
        self._echo(f"referee {config.name} serving {config.contact_endpoint}")
        if config.register and config.league_url:
            self._echo(f"registering with the League Manager at {config.league_url}")
        # uvicorn turns SIGINT/SIGTERM into a graceful stop (which runs Referee.shutdown()) and
        # then re-raises the signal with the previous handlers back: make that a clean exit.
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, _exit_cleanly)
        server = make_server(referee.asgi_app(), log_level="warning")
        referee.on_refused = lambda _why: setattr(server, "should_exit", True)
        try:
            server.run(sockets=sockets)
        finally:  # also when the signal handler below ends the process
            pending = len(referee.store.pending_reports())
            kept = f"; {pending} report(s) kept in --state-dir for the next start" if pending else ""
            who = referee.referee_id or config.name
            self._echo(f"referee {who} stopped after {referee.matches_run} match(es){kept}")
        if referee.refused:
            self.stderr.write(
                f"runreferee: {referee.refused}. Ask the League Manager's operator for the referee key "
                "and pass it with --key or the environment variable REFEREE_KEY (docs/operations.md)."
            )
            sys.exit(1)

    def _echo(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()


def _exit_cleanly(signum: int, frame: object) -> None:
    sys.exit(0)
