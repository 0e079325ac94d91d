"""``manage.py runserver``: daphne's development server (dashboard websockets included), on this
machine only. Its requests are read whole before the site sees them and it has none of the
limits a class network needs, so an address other than loopback is refused with the command to
run instead (docs/operations.md, "The server")."""

from __future__ import annotations

import ipaddress
from typing import Any

from daphne.management.commands.runserver import Command as DaphneRunserver
from django.core.management.base import CommandError

PRODUCTION = 'docs/operations.md, "The server": python -m uvicorn leaguesite.asgi:application …'


def requested_host(addrport: str | None, ipv6: bool) -> str:
    """The address ``runserver [addrport]`` binds: ``addr:port``, ``[ipv6]:port``, ``addr`` or
    ``port``; none given is loopback."""
    if not addrport:
        return "::1" if ipv6 else "127.0.0.1"
    if addrport.startswith("["):
        return addrport[1 : addrport.index("]")]
    host = addrport.rsplit(":", 1)[0] if ":" in addrport else addrport
    if host.isdigit():  # a port alone
        return "::1" if ipv6 else "127.0.0.1"
    return host


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may be any address


class Command(DaphneRunserver):
    help = "Runs the development server on this machine (loopback only); a class network takes uvicorn."

    def handle(self, *args: Any, **options: Any) -> None:
        host = requested_host(options.get("addrport"), bool(options.get("use_ipv6")))
        if not is_loopback(host):
            raise CommandError(
                f"runserver serves this machine only (127.0.0.1, ::1, localhost), not {host}: it has no "
                f"limits for slow or idle clients. On a class network run the production server ({PRODUCTION})."
            )
        super().handle(*args, **options)
