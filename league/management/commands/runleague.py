"""``manage.py runleague``: the conductor worker (see league/conductor/)."""

from __future__ import annotations

import logging

import uvloop
from django.conf import settings
from django.core.management.base import BaseCommand

from league.conductor.worker import Conductor

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class Command(BaseCommand):
    help = "Drive leagues from closed registration to champion (safe to run several; restart any time)."
    # A worker restarted at will: the system checks (which import every URLconf and view, about
    # 1 CPU-s) are the site's job, not something to repeat at each conductor start.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument("--league", dest="league_id", help="Only this league (its league_id slug).")
        parser.add_argument("--once", action="store_true", help="Do one pass over the leagues, then exit.")
        parser.add_argument("--until-done", action="store_true", help="Exit when no league is in progress any more.")
        parser.add_argument(
            "--poll",
            type=float,
            default=None,
            help="Seconds between passes (default: the CONDUCTOR_POLL setting): how soon a round's end is seen.",
        )

    def handle(self, *args, league_id=None, once=False, until_done=False, poll=None, **options) -> None:
        level = logging.DEBUG if options["verbosity"] > 1 else logging.INFO
        logging.basicConfig(level=level, format=LOG_FORMAT)
        # The site's LOGGING (leaguesite/settings/base.py) gives the root logger a handler at WARNING,
        # which leaves basicConfig nothing to do: the conductor's own lines (it started, each
        # league's state changes, a league with no live referee, a database outage) get a
        # handler of their own, at INFO.
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        conductor_log = logging.getLogger("league")
        conductor_log.handlers = [handler]
        conductor_log.setLevel(level)
        conductor_log.propagate = False
        conductor = Conductor(league_id=league_id, poll=settings.CONDUCTOR_POLL if poll is None else poll)
        try:
            # uvloop, as the agents run: its loop and thread wake-ups (every sync_to_async hop
            # returns through one) cost a fraction of asyncio's selector loop.
            uvloop.run(conductor.run(once=once, until_done=until_done))
        except KeyboardInterrupt:
            pass
