"""``RequestLimits``: what one HTTP request may cost the LM, as an ASGI middleware (leaguesite/asgi.py
puts it in front of every route).

* A body larger than the limit (``MCP_MAX_BODY_BYTES`` on ``/mcp``, ``SITE_MAX_BODY_BYTES``
  elsewhere) is answered 413, with ``connection: close`` so that the server closes the connection
  instead of reading the rest. A client still sending when the connection closes may lose the
  answer to the reset, so a body at most ``DRAIN_BYTES`` over the limit (an honest client's batch
  a little too large) is first read to its end and dropped, and the client reads its 413; a
  larger one (on its ``Content-Length``, or once that many bytes have come) is answered at once.
* A body not complete ``REQUEST_READ_TIMEOUT`` seconds after the request reached the app (the end
  of its headers) is answered 408.
* It records the request's scope for league/endpoints.py (agent endpoints may not point back at
  the LM).

Only the ASGI specification is used, so any ASGI server runs it. What comes before the app sees a
request (headers arriving slowly, sockets left idle) is the server's part: docs/operations.md
gives the production command and its settings.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from league.endpoints import request_scope
from leagueproto.server import body_too_large

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

_MCP_PATHS = frozenset({"/mcp", "/mcp/"})
# What is read and dropped past the limit before a 413, at most (see the module).
DRAIN_BYTES = 4 * 1024 * 1024


@functools.cache
def _limits() -> tuple[int, int, int]:
    """``(MCP_MAX_BODY_BYTES, SITE_MAX_BODY_BYTES, REQUEST_READ_TIMEOUT)``, read once: a read of
    Django's settings costs as much as the rest of this middleware's work on a call."""
    return settings.MCP_MAX_BODY_BYTES, settings.SITE_MAX_BODY_BYTES, settings.REQUEST_READ_TIMEOUT


@receiver(setting_changed)
def _settings_changed(setting: str, **kwargs: Any) -> None:
    if setting in ("MCP_MAX_BODY_BYTES", "SITE_MAX_BODY_BYTES", "REQUEST_READ_TIMEOUT"):
        _limits.cache_clear()


def body_limit(path: str) -> int:
    """The largest request body accepted on ``path``."""
    mcp, site, _timeout = _limits()
    return mcp if path in _MCP_PATHS else site


def read_timeout() -> int:
    """Seconds a request's body may take to arrive (``REQUEST_READ_TIMEOUT``)."""
    return _limits()[2]


def _plain(status: int, text: str) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    body = text.encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", b"%d" % len(body)),
        (b"connection", b"close"),
    ]
    return status, headers, body


def _too_large(path: str, limit: int) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    if path in _MCP_PATHS:  # the JSON-RPC error /mcp clients expect
        reply = body_too_large(limit)
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in reply.headers]
        extra = [(b"content-length", b"%d" % len(reply.body)), (b"connection", b"close")]
        return reply.status, [*headers, *extra], reply.body
    return _plain(413, f"Request body larger than {limit} bytes\n")


class RequestLimits:
    """ASGI middleware: body size and body read deadline for every HTTP request (see the module)."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        limit = body_limit(path)
        deadline = asyncio.get_running_loop().time() + read_timeout()
        declared = next((v for k, v in scope["headers"] if k == b"content-length"), b"")
        if declared.isdigit() and int(declared) > limit:
            if int(declared) <= limit + DRAIN_BYTES:
                await _drain(receive, deadline, 0, limit + DRAIN_BYTES)
            await _answer(send, *_too_large(path, limit))
            return
        limited = _Limited(receive, send, path, limit, deadline)
        mark = request_scope.set(scope)
        try:
            await self.app(scope, limited.receive, limited.send)
        finally:
            request_scope.reset(mark)


class _Limited:
    """One request's ``receive`` and ``send`` as the app gets them: the body counted against
    ``limit`` and awaited until ``deadline``; once this middleware has answered (408, 413),
    whatever the app sends is dropped. (An object rather than two closures: a relayed call holds
    these while it waits for its agent, and each closure and captured variable is one more object
    for the garbage collector to walk.)"""

    __slots__ = ("_receive", "_send", "path", "limit", "deadline", "received", "body_done", "answered")

    def __init__(self, receive: Receive, send: Send, path: str, limit: int, deadline: float) -> None:
        self._receive = receive
        self._send = send
        self.path = path
        self.limit = limit
        self.deadline = deadline
        self.received = 0
        self.body_done = False
        self.answered = False  # this middleware answered: whatever the app sends after is dropped

    async def receive(self) -> dict[str, Any]:
        if self.body_done or self.answered:
            return await self._receive()
        try:
            async with asyncio.timeout_at(self.deadline):
                event = await self._receive()
        except TimeoutError:
            self.answered = True
            await _answer(self._send, *_plain(408, f"Request body not received within {read_timeout()} s\n"))
            return {"type": "http.disconnect"}
        if event["type"] != "http.request":
            return event
        self.received += len(event.get("body", b""))
        if self.received > self.limit:
            self.answered = True
            if event.get("more_body", False):
                await _drain(self._receive, self.deadline, self.received, self.limit + DRAIN_BYTES)
            await _answer(self._send, *_too_large(self.path, self.limit))
            return {"type": "http.disconnect"}
        self.body_done = not event.get("more_body", False)
        return event

    async def send(self, message: dict[str, Any]) -> None:
        if not self.answered:
            await self._send(message)


async def _drain(receive: Receive, deadline: float, received: int, most: int) -> None:
    """Read and drop the rest of a body until it ends, ``most`` bytes have come in all, the
    deadline passes or the client goes: whichever is first."""
    while received <= most:
        try:
            async with asyncio.timeout_at(deadline):
                event = await receive()
        except TimeoutError:
            return
        if event["type"] != "http.request":
            return
        received += len(event.get("body", b""))
        if not event.get("more_body", False):
            return


async def _answer(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
