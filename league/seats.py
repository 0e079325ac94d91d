"""The seat an agent's endpoint holds in a league: ``canonical_endpoint`` (leagueproto/endpoints.py),
and a host name of this machine as 127.0.0.1. Kept apart from league/endpoints.py so that the
models, which store the seat, import no policy module that reads them back."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from leagueproto.endpoint_policy import ip_of, this_machine
from leagueproto.endpoints import THIS_MACHINE, canonical_endpoint


def seat_endpoint(endpoint: str) -> str:
    """The form a seat is held in (``Agent.canonical_endpoint``): ``canonical_endpoint``, and a
    host name that resolves only to addresses of this machine written as ``127.0.0.1`` (a name
    for the loopback is one more spelling of it). Other names stay names: two agents behind one
    address may be told apart by name (virtual hosts)."""
    canonical = canonical_endpoint(endpoint)
    try:
        parts = urlsplit(canonical)
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return canonical
    if not host or host == THIS_MACHINE or ip_of(host) is not None:
        return canonical
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return canonical
    addresses = {ip_of(info[4][0]) for info in infos}
    if addresses and all(a is not None and this_machine(a) for a in addresses):
        return canonical.replace(f"://{host}:", f"://{THIS_MACHINE}:", 1)
    return canonical
