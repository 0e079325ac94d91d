"""``/mcp`` as an ASGI application beside Django (leaguesite/asgi.py routes it), over
leagueproto's McpServer and the LM's toolset.

Every agent message comes here: a class registering at once, each referee's reports, the
players' queries. As a Django view each call cost the LM a thread of its own and a hop to it for
every sync middleware hook and request signal, and a new database connection: about twice the
CPU of the call's own work (docs/benchmarks.md, "Why the code is shaped this way"). Django
still judges what it would judge for a view (league/sitechecks.py): a Host it refuses is 400,
and every answer carries the headers of Django's security and clickjacking middleware. The
body's size and read deadline are
``RequestLimits``' (leaguesite/limits.py), in front of every route. The rest (JSON-RPC, both
dialects, Origin, the methods, the batch and reply bounds) is the server's; the tools are in
league/mcp/tools.py and reach the database through ``database_job`` (league/mcp/database.py).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.urls import path

from league.mcp import toolset
from league.sitechecks import Head, head_of, host_answer, send_response
from leagueproto.server import HttpResponse as McpResponse
from leagueproto.server import McpServer

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


class McpEndpoint:
    """``/mcp`` as an ASGI application (the interface Channels' ``URLRouter`` routes to)."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        head = head_of(scope)
        if refused := host_answer(head):
            await send_response(send, head, *refused)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client hung up, or RequestLimits answered it (too large, too slow)
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks) if head.method == "POST" else b""
        server = scope.get("server") or (None, None)
        reply = await get_server().handle_http(
            head.method, body, head.headers(), client_host=head.meta.get("REMOTE_ADDR"), local_port=server[1] or None
        )
        await respond(send, head, reply)


async def respond(send: Any, head: Head, reply: McpResponse) -> None:
    """``reply`` sent with the headers Django's security and clickjacking middleware add."""
    await send_response(send, head, reply.status, reply.body, list(reply.headers))


# Exactly /mcp (and /mcp/), never a redirect: agents POST here.
MCP_PATH = "/mcp"
_endpoint = McpEndpoint()
mcp_urlpatterns = [path("mcp", _endpoint), path("mcp/", _endpoint)]
