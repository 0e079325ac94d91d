"""``/mcp``: a Django async view over leagueproto's McpServer and the LM's toolset.

Django does what it does for every view first: ALLOWED_HOSTS, the security middleware's
headers, the body limit of leaguesite/limits.py. The server does the rest (JSON-RPC, both
dialects, Origin, the methods, the batch and reply bounds); the tools are in league/mcp/tools.py.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from league.mcp import toolset
from leagueproto.server import HttpResponse as McpResponse
from leagueproto.server import McpServer, body_too_large

_servers: dict[tuple[int, tuple[str, ...], int, int], McpServer] = {}


def get_server() -> McpServer:
    """The server for the current settings (tests may override the limits)."""
    key = (
        settings.MCP_MAX_BODY_BYTES,
        tuple(settings.MCP_ALLOWED_ORIGINS),
        settings.MCP_MAX_BATCH_ITEMS,
        settings.MCP_MAX_REPLY_BYTES,
    )
    server = _servers.get(key)
    if server is None:
        server = _servers[key] = McpServer(
            toolset,
            max_body_bytes=settings.MCP_MAX_BODY_BYTES,
            allowed_origins=settings.MCP_ALLOWED_ORIGINS,
            max_batch_items=settings.MCP_MAX_BATCH_ITEMS,
            max_reply_bytes=settings.MCP_MAX_REPLY_BYTES,
        )
    return server


def _to_django(reply: McpResponse) -> HttpResponse:
    response = HttpResponse(reply.body, status=reply.status)
    for name, value in reply.headers:
        response[name] = value
    return response


# JSON-RPC from agents, authenticated by their tokens: no cookies, so no CSRF to guard against.
@csrf_exempt
async def mcp_view(request: HttpRequest) -> HttpResponse:
    server = get_server()
    declared = request.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > server.max_body_bytes:
        return _to_django(body_too_large(server.max_body_bytes))
    headers = {name.lower(): value for name, value in request.headers.items()}
    body = request.body if request.method == "POST" else b""
    try:
        port = int(request.META.get("SERVER_PORT") or 0) or None
    except ValueError:
        port = None
    reply = await server.handle_http(
        request.method or "", body, headers, client_host=request.META.get("REMOTE_ADDR"), local_port=port
    )
    return _to_django(reply)
