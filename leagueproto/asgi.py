"""A lean ASGI app serving ``POST /mcp`` for referee and player agents.

Measured ~7× cheaper per request than Django's request stack, which
matters on the referee → player hot path. One app can serve several agents, one per
listening port (``runplayer --count N``): the server is picked by the local port.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from leagueproto.server import HttpResponse, McpServer, body_too_large

log = logging.getLogger(__name__)

ServerResolver = Callable[[int | None], McpServer | None]
Hook = Callable[[], Awaitable[None]]

_NOT_FOUND = b'{"error":"not found: the endpoint is POST /mcp"}'


def make_asgi_app(
    server: McpServer | ServerResolver,
    *,
    path: str = "/mcp",
    on_startup: list[Hook] | None = None,
    on_shutdown: list[Hook] | None = None,
) -> Callable[..., Awaitable[None]]:
    resolve: ServerResolver = (lambda _port: server) if isinstance(server, McpServer) else server
    accepted_paths = {path, path + "/"}

    async def app(scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send, on_startup or [], on_shutdown or [])
            return
        if scope["type"] != "http":
            return
        local = scope.get("server") or (None, None)
        target = resolve(local[1])
        if scope["path"] not in accepted_paths or target is None:
            await _send(send, HttpResponse(404, _NOT_FOUND, [("content-type", "application/json")]))
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        limit = target.max_body_bytes
        declared = headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limit:
            await _send(send, body_too_large(limit))
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            event = await receive()
            if event["type"] == "http.disconnect":
                return
            chunk = event.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _send(send, body_too_large(limit))
                return
            chunks.append(chunk)
            more = event.get("more_body", False)
        client = scope.get("client") or (None, None)
        response = await target.handle_http(
            scope["method"], b"".join(chunks), headers, client_host=client[0], local_port=local[1]
        )
        await _send(send, response)

    return app


_JSON_ONLY = [("content-type", "application/json")]
_JSON_ONLY_RAW = [(b"content-type", b"application/json")]


async def _send(send: Callable, response: HttpResponse) -> None:
    if response.headers == _JSON_ONLY:  # nearly every reply: skip encoding the same header again
        headers = _JSON_ONLY_RAW.copy()
    else:
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers]
    headers.append((b"content-length", b"%d" % len(response.body)))
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": response.body})


async def _lifespan(receive: Callable, send: Callable, startup: list[Hook], shutdown: list[Hook]) -> None:
    while True:
        event = await receive()
        if event["type"] == "lifespan.startup":
            try:
                for hook in startup:
                    await hook()
            except Exception as exc:
                log.exception("startup failed")
                await send({"type": "lifespan.startup.failed", "message": str(exc)})
                return
            await send({"type": "lifespan.startup.complete"})
        elif event["type"] == "lifespan.shutdown":
            for hook in shutdown:
                try:
                    await hook()
                except Exception:
                    log.exception("shutdown hook failed")
            await send({"type": "lifespan.shutdown.complete"})
            return
