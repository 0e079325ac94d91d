"""The LM's ``/mcp`` endpoint: a thin view over leagueproto's McpServer and the LM toolset.

Transport hygiene lives here (body limit before reading, Origin, methods); everything else is
in leagueproto (JSON-RPC, MCP, dialects) and league/lm.py (tools).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.http.request import split_domain_port, validate_host
from django.views.decorators.csrf import csrf_exempt

from league.dbexec import lm_context
from league.lm import toolset
from leagueproto.asgi import make_asgi_app
from leagueproto.server import HttpResponse as McpResponse
from leagueproto.server import McpServer, body_too_large

_servers: dict[tuple[int, tuple[str, ...]], McpServer] = {}


def get_server() -> McpServer:
    """The server for the current settings (tests may override the limits)."""
    key = (settings.MCP_MAX_BODY_BYTES, tuple(settings.MCP_ALLOWED_ORIGINS))
    server = _servers.get(key)
    if server is None:
        server = _servers[key] = McpServer(
            toolset, max_body_bytes=settings.MCP_MAX_BODY_BYTES, allowed_origins=settings.MCP_ALLOWED_ORIGINS
        )
    return server


def _to_django(reply: McpResponse) -> HttpResponse:
    response = HttpResponse(reply.body, status=reply.status)
    for name, value in reply.headers:
        response[name] = value
    return response


@csrf_exempt
async def mcp_view(request: HttpRequest) -> HttpResponse:
    server = get_server()
    declared = request.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > server.max_body_bytes:
        return _to_django(body_too_large(server.max_body_bytes))
    headers = {k.lower(): v for k, v in request.headers.items()}
    body = request.body if request.method == "POST" else b""
    try:
        port = int(request.META.get("SERVER_PORT") or 0) or None
    except ValueError:
        port = None
    # The call's database work runs on a long-lived thread with a persistent connection.
    async with lm_context():
        reply = await server.handle_http(
            request.method or "", body, headers, client_host=request.META.get("REMOTE_ADDR"), local_port=port
        )
    return _to_django(reply)


# -- the same endpoint without Django's request stack ------------------------------------------
# Django's handler costs a thread, the middleware and the request signals per call, several times
# what the tools themselves cost. The LM's ASGI application sends POST /mcp straight to
# leagueproto's lean ASGI app (body limit, headers, client address) and everything else to Django.
# Requests Django must see first go to Django: a Host not in ALLOWED_HOSTS (it answers 400) and,
# with SECURE_SSL_REDIRECT, plain http (it redirects). The headers SecurityMiddleware and
# XFrameOptionsMiddleware would add are added here.
_MCP_PATHS = frozenset({"/mcp", "/mcp/"})
_lean_app = make_asgi_app(lambda _port: get_server())


def _security_headers() -> list[tuple[bytes, bytes]]:
    return _headers_for(
        settings.X_FRAME_OPTIONS,
        settings.SECURE_CONTENT_TYPE_NOSNIFF,
        settings.SECURE_REFERRER_POLICY,
        getattr(settings, "SECURE_CROSS_ORIGIN_OPENER_POLICY", None),
    )


# Built once per value of the settings (tests override them), not on every call.
@functools.lru_cache(maxsize=16)
def _headers_for(frame: str, nosniff: bool, referrer: Any, opener: str | None) -> list[tuple[bytes, bytes]]:
    headers = [(b"x-frame-options", frame.encode())]
    if nosniff:
        headers.append((b"x-content-type-options", b"nosniff"))
    if referrer:
        headers.append((b"referrer-policy", str(referrer).encode()))
    if opener:
        headers.append((b"cross-origin-opener-policy", opener.encode()))
    return headers


def _host_allowed(scope: dict[str, Any]) -> bool:
    host = next((v for k, v in scope.get("headers", ()) if k == b"host"), b"")
    return _host_in(host, tuple(settings.ALLOWED_HOSTS), settings.DEBUG)


# Django's host validation (a split and a pattern match per entry of ALLOWED_HOSTS) took ~8 µs of
# every call; a league's agents send a handful of Host values. Bounded: the header is the caller's.
@functools.lru_cache(maxsize=256)
def _host_in(host: bytes, allowed: tuple[str, ...], debug: bool) -> bool:
    domain, _port = split_domain_port(host.decode("latin-1"))
    if debug and not allowed:
        allowed = (".localhost", "127.0.0.1", "[::1]")
    return bool(domain) and validate_host(domain, allowed)


def lean_mcp(django_app: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    """ASGI: ``/mcp`` served by the lean app on the LM's DB threads; the rest by ``django_app``."""

    async def app(scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if (
            scope["type"] != "http"
            or scope["path"] not in _MCP_PATHS
            or not _host_allowed(scope)
            or (settings.SECURE_SSL_REDIRECT and scope.get("scheme") != "https")
        ):
            await django_app(scope, receive, send)
            return
        extra = _security_headers()

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        async with lm_context():
            await _lean_app(scope, receive, send_with_headers)

    return app
