"""The relay: players that cannot accept inbound connections connect out to the LM and answer
over a WebSocket the JSON-RPC calls the LM and referees make to their relay endpoint.

A player registers with ``contact_endpoint: "connect"``; the LM gives it the endpoint
``<LM>/relay/<league_id>/<player_id>/mcp`` (:func:`relay_endpoint`), which referees and the
conductor call like any other. ``endpoint.py`` (a Channels HTTP consumer) forwards each call to
the consumer holding the player's socket (``consumer.py``: in this process directly, in another
through the channel layer), which sends it down the socket and sends the reply back.
``state.py`` keeps the socket's whereabouts in the database (the dashboard shows them; another
LM process finds the socket's channel there). With Redis, calls and replies cross LM processes
through the channel layer (``redis_channel_layer`` in leaguesite/settings.py).
docs/protocol.md, "Playing from behind NAT", is the agent's side of it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import quote, urlsplit

from django.conf import settings
from django.http.request import split_domain_port, validate_host

# What a player sends as contact_endpoint to be reached through the relay.
CONNECT = "connect"
# Django's own ALLOWED_HOSTS when DEBUG is on and the setting is empty (HttpRequest.get_host).
DEBUG_HOSTS = [".localhost", "127.0.0.1", "[::1]"]


def relay_endpoint(base_url: str, league_id: str, player_id: str) -> str:
    """The endpoint the LM assigns to a relay player: on the LM itself."""
    return f"{base_url.rstrip('/')}/relay/{quote(league_id)}/{quote(player_id)}/mcp"


# The path of a relay endpoint (league/relay/endpoint.py serves it).
RELAY_PATH = re.compile(r"^/relay/([A-Za-z0-9_-]{1,64})/([A-Za-z0-9_-]{1,16})/mcp/?$")


def is_relay_endpoint(endpoint: str) -> bool:
    """Whether ``endpoint`` has a relay endpoint's path (on any host: the LM may have several names)."""
    try:
        return bool(RELAY_PATH.match(urlsplit(endpoint).path))
    except ValueError:
        return False


def lm_base_url(headers: Mapping[str, str]) -> str | None:
    """The LM's own address as agents reach it: ``LM_BASE_URL``, else the scheme and Host of the
    request (``headers``: lower-case names). The Host was already checked against ALLOWED_HOSTS."""
    if settings.LM_BASE_URL:
        return settings.LM_BASE_URL
    host = headers.get("host")
    if not host:
        return None
    proxied = getattr(settings, "SECURE_PROXY_SSL_HEADER", None) and headers.get("x-forwarded-proto") == "https"
    scheme = "https" if proxied or settings.SECURE_SSL_REDIRECT else "http"
    return f"{scheme}://{host}"


def host_allowed(host: str | None) -> bool:
    """Whether ``host`` (a Host header) passes ALLOWED_HOSTS as Django's ``HttpRequest.get_host``
    checks it, with the same default when DEBUG is on and the setting is empty: the relay's
    endpoint and its sockets are served beside Django, and refuse the Hosts it refuses."""
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = DEBUG_HOSTS
    domain, _port = split_domain_port(host or "")
    return bool(domain) and validate_host(domain, allowed)
