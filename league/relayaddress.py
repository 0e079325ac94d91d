"""Where a relay player is called: the endpoint the LM assigns to a player that connects out.

A leaf module (Django settings only), so that registration (league/actions/, league/mcp/) can
name relay endpoints without importing the relay (league/relay/), which serves them and itself
registers players through the ``/mcp`` server.

The LM's own address comes from configuration, never from what a request says: ``LM_BASE_URL``
when set, else one of the ``ALLOWED_HOSTS`` entries that names a host (not a pattern) on the port
the server listens on. A request's ``Host`` only picks which configured name is used (the one it
matches, so a class that reaches the LM at ``127.0.0.1`` gets ``127.0.0.1``); a Host that matches
none (``127.0.0.1:9453`` names the right host but its port is not the server's and is not used;
``169.254.169.254`` under ``ALLOWED_HOSTS = ["*"]`` matches no named host) never becomes an
endpoint.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import quote, urlsplit

from django.conf import settings

# What a player sends as contact_endpoint to be reached through the relay.
CONNECT = "connect"

# The path of a relay endpoint (league/relay/endpoint.py serves it).
RELAY_PATH = re.compile(r"^/relay/([A-Za-z0-9_-]{1,64})/([A-Za-z0-9_-]{1,16})/mcp/?$")


def relay_endpoint(base_url: str, league_id: str, player_id: str) -> str:
    """The endpoint the LM assigns to a relay player: on the LM itself."""
    return f"{base_url.rstrip('/')}/relay/{quote(league_id)}/{quote(player_id)}/mcp"


def is_relay_endpoint(endpoint: str) -> bool:
    """Whether ``endpoint`` has a relay endpoint's path (on any host: the LM may have several names)."""
    try:
        return bool(RELAY_PATH.match(urlsplit(endpoint).path))
    except ValueError:
        return False


def named_hosts() -> list[str]:
    """The ``ALLOWED_HOSTS`` entries that name one host: not ``*``, not a ``.domain`` pattern."""
    return [h for h in settings.ALLOWED_HOSTS if h and h != "*" and not h.startswith(".")]


def lm_base_url(headers: Mapping[str, str], server_port: int | None) -> str | None:
    """The LM's own address for relay endpoints, from configuration: ``LM_BASE_URL``, else the
    configured host the request's Host names (``headers``: lower-case names) or, when it names
    none of them, the first configured host, on ``server_port`` (the port the server listens on).
    None when neither is known: registering a relay player is then refused (set LM_BASE_URL)."""
    if settings.LM_BASE_URL:
        return settings.LM_BASE_URL
    hosts = named_hosts()
    if not hosts or not server_port:
        return None
    asked = _hostname(headers.get("host", ""))
    host = next((h for h in hosts if h.lower() == asked), hosts[0])
    # The scheme: https when the site says all its traffic is (SECURE_SSL_REDIRECT) or a proxy it
    # trusts (SECURE_PROXY_SSL_HEADER) says this request came over https.
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    proxied = bool(proxy) and headers.get(proxy[0].removeprefix("HTTP_").replace("_", "-").lower()) == proxy[1]
    scheme = "https" if proxied or settings.SECURE_SSL_REDIRECT else "http"
    return f"{scheme}://{host}:{server_port}"


def _hostname(host: str) -> str:
    """The name of a Host header's value, without its port, in lower case."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else ""
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host
