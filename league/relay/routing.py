"""The relay's routes (leaguesite/asgi.py mounts them beside Django's and the dashboard's)."""

from __future__ import annotations

from typing import Any

from channels.routing import URLRouter
from channels.security.websocket import AllowedHostsOriginValidator
from django.urls import path, re_path

from league.relay.consumer import RelayConsumer
from league.relay.endpoint import RelayEndpoint

websocket_urlpatterns = [re_path(r"^agents/connect/?$", RelayConsumer.as_asgi())]
http_urlpatterns = [path("relay/<league_id>/<player_id>/mcp", RelayEndpoint())]

_sockets = URLRouter(websocket_urlpatterns)
_browser_sockets = AllowedHostsOriginValidator(_sockets)


async def agent_sockets(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """``/agents/connect``. Agents are programs and send no Origin; a browser always does, and its
    page must then be one of this site's, as for the dashboard's sockets (Channels'
    AllowedHostsOriginValidator): a page elsewhere cannot open an agent's socket."""
    has_origin = any(name == b"origin" for name, _ in scope.get("headers") or [])
    await (_browser_sockets if has_origin else _sockets)(scope, receive, send)
