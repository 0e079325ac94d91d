"""Limits on what one HTTP request may cost the LM, whichever server runs it.

* ``RequestLimits`` (ASGI middleware, in front of everything in leaguesite/asgi.py): a body larger
  than the limit (``MCP_MAX_BODY_BYTES`` on ``/mcp``, ``SITE_MAX_BODY_BYTES`` elsewhere) is
  answered 413 as soon as its ``Content-Length`` says so or its running count passes the limit,
  without reading the rest; a body not complete ``REQUEST_READ_TIMEOUT`` seconds after the
  request reached the app is answered 408. It also records where the request arrived
  (league/endpoints.py refuses agent endpoints that point back at the LM).
* ``guard_daphne``: daphne (what ``manage.py runserver`` runs) reads a whole request into
  memory before it calls the ASGI app, so no middleware can refuse a 50 MB body in time there.
  The guard subclasses daphne's request class to refuse in daphne itself: on ``Content-Length``,
  on the running count, and when the request line, headers and body are not all in within
  ``REQUEST_READ_TIMEOUT`` seconds (slow clients holding connections open).
"""

from __future__ import annotations

import asyncio
import functools
import sys
import weakref
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


def largest_body() -> int:
    """The largest request body accepted anywhere (what daphne may buffer before the app runs)."""
    mcp, site, _timeout = _limits()
    return max(mcp, site)


def read_timeout() -> int:
    """Seconds a request may take to arrive (``REQUEST_READ_TIMEOUT``)."""
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
        return reply.status, [*headers, (b"content-length", b"%d" % len(reply.body))], reply.body
    return _plain(413, f"Request body larger than {limit} bytes\n")


class _Deadlines:
    """The requests of one event loop waiting for their body, and one task that checks them
    every second and cancels the wait of those past their deadline. A timer per request
    (``asyncio.timeout``) cost a third of a ``/mcp`` call's time on top of it."""

    PERIOD = 1.0

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.waiting: dict[asyncio.Task, float] = {}  # request task -> deadline (loop time)
        self.expired: set[asyncio.Task] = set()  # cancelled by us, not by anyone else
        self._sweeper: asyncio.Task | None = None

    def wait(self, task: asyncio.Task, deadline: float) -> None:
        self.waiting[task] = deadline
        if self._sweeper is None:
            self._sweeper = self.loop.create_task(self._sweep())

    async def _sweep(self) -> None:
        try:
            while self.waiting:
                await asyncio.sleep(self.PERIOD)
                now = self.loop.time()
                for task, deadline in list(self.waiting.items()):
                    if deadline <= now:
                        del self.waiting[task]
                        self.expired.add(task)
                        task.cancel()
        finally:
            self._sweeper = None


_deadlines: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Deadlines] = weakref.WeakKeyDictionary()
_last: list[_Deadlines] = []  # the last one used: a server runs one loop, and a weak lookup costs


def _deadlines_of(loop: asyncio.AbstractEventLoop) -> _Deadlines:
    if _last and _last[0].loop is loop:
        return _last[0]
    found = _deadlines.get(loop)
    if found is None:
        found = _deadlines[loop] = _Deadlines(loop)
    _last[:] = [found]
    return found


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
        declared = next((v for k, v in scope["headers"] if k == b"content-length"), b"")
        if declared.isdigit() and int(declared) > limit:
            await _answer(send, *_too_large(path, limit))
            return
        loop = asyncio.get_running_loop()
        deadlines = _deadlines_of(loop)
        deadline = loop.time() + read_timeout()
        received = 0
        body_done = False
        answered = False  # this middleware answered: whatever the app sends after is dropped

        async def limited_receive() -> dict[str, Any]:
            nonlocal received, body_done, answered
            if body_done or answered:
                return await receive()
            task = asyncio.current_task()
            assert task is not None
            deadlines.wait(task, deadline)
            try:
                event = await receive()
            except asyncio.CancelledError:
                if task not in deadlines.expired:
                    raise
                deadlines.expired.discard(task)
                task.uncancel()
                answered = True
                late = f"Request body not received within {read_timeout()} s\n"
                await _answer(send, *_plain(408, late))
                return {"type": "http.disconnect"}
            finally:
                deadlines.waiting.pop(task, None)
            if event["type"] != "http.request":
                return event
            received += len(event.get("body", b""))
            if received > limit:
                answered = True
                await _answer(send, *_too_large(path, limit))
                return {"type": "http.disconnect"}
            body_done = not event.get("more_body", False)
            return event

        async def guarded_send(message: dict[str, Any]) -> None:
            if not answered:
                await send(message)

        mark = request_scope.set(scope)
        try:
            await self.app(scope, limited_receive, guarded_send)
        finally:
            request_scope.reset(mark)


async def _answer(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# -- daphne ------------------------------------------------------------------------------------
def guard_daphne() -> None:
    """Make daphne refuse oversized and slow requests before it buffers them (see the module).

    Runs when leaguesite/asgi.py is imported: daphne (its CLI and ``runserver``) imports its
    server before the application and builds request objects from ``daphne.http_protocol.
    WebRequest`` when connections arrive, so replacing that class here covers every request.
    Under any other server daphne is not loaded and nothing happens.
    """
    if "daphne.server" not in sys.modules:
        return
    from daphne import http_protocol
    from twisted.internet import reactor

    if getattr(http_protocol.WebRequest, "league_guarded", False):
        return
    base = http_protocol.WebRequest

    class GuardedWebRequest(base):  # type: ignore[misc, valid-type]
        """daphne's request, refusing a body over ``largest_body()`` (413) and a request not
        whole within ``REQUEST_READ_TIMEOUT`` (408) without reading further."""

        league_guarded = True

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            # Twisted makes the request when its first line arrives: the deadline starts there.
            self._refused = False
            self._received = 0
            # Twisted parses form bodies into ``args`` (which daphne never reads) and answers a
            # multipart body it cannot parse with a bare 400 itself: the app sees every body.
            kwargs.setdefault("parsePOSTFormSubmission", False)
            super().__init__(*args, **kwargs)
            self._late = reactor.callLater(read_timeout(), self._too_slow)

        def _refuse(self, status: int, text: str) -> None:
            if self._refused:
                return
            self._refused = True
            self._stop_timer()
            status, headers, body = _plain(status, text)
            reason = {408: b"Request Timeout", 413: b"Payload Too Large"}[status]
            head = b"".join(b"%s: %s\r\n" % pair for pair in headers)
            transport = self.channel.transport
            transport.write(b"HTTP/1.1 %d %s\r\n%s\r\n%s" % (status, reason, head, body))
            transport.loseConnection()

        def _too_slow(self) -> None:
            self._late = None
            self._refuse(408, f"Request not received within {read_timeout()} s\n")

        def _stop_timer(self) -> None:
            if self._late is not None and self._late.active():
                self._late.cancel()
            self._late = None

        def gotLength(self, length: int | None) -> None:
            limit = largest_body()
            if length is not None and length > limit:
                self._refuse(413, f"Request body larger than {limit} bytes\n")
            super().gotLength(0 if self._refused else length)

        def handleContentChunk(self, data: bytes) -> None:
            if self._refused:
                return
            self._received += len(data)
            limit = largest_body()
            if self._received > limit:
                self._refuse(413, f"Request body larger than {limit} bytes\n")
                return
            super().handleContentChunk(data)

        def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
            self._stop_timer()
            if self._refused:
                return
            super().requestReceived(command, path, version)

        def connectionLost(self, reason: Any) -> None:
            self._stop_timer()
            super().connectionLost(reason)

    http_protocol.WebRequest = GuardedWebRequest
