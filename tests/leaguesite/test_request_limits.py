"""RequestLimits (leaguesite/limits.py) called as an ASGI app: its read deadline, and a cancellation
from outside left to the caller."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from leaguesite.limits import DRAIN_BYTES, RequestLimits

seen: list[dict[str, Any]] = []  # what the app behind the middleware received


def _scope(path: str = "/mcp", length: int | None = 10) -> dict[str, Any]:
    headers = [(b"content-length", b"%d" % length)] if length is not None else []
    return {"type": "http", "method": "POST", "path": path, "headers": headers}


async def _never() -> dict[str, Any]:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


async def _reading_app(scope, receive, send) -> None:  # noqa: ANN001 (ASGI)
    seen.append(await receive())


@pytest.fixture(autouse=True)
def clean() -> None:
    seen.clear()


async def test_a_body_that_does_not_arrive_gets_408_and_the_app_a_disconnect(settings):
    settings.REQUEST_READ_TIMEOUT = 1
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await RequestLimits(_reading_app)(_scope(), _never, send)

    assert sent[0]["status"] == 408 and (b"connection", b"close") in sent[0]["headers"]
    assert seen == [{"type": "http.disconnect"}]


async def test_a_cancellation_from_outside_is_the_callers(settings):
    """The server cancels a request's task when its client goes: that must not become a 408."""
    settings.REQUEST_READ_TIMEOUT = 30
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    task = asyncio.create_task(RequestLimits(_reading_app)(_scope(), _never, send))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sent == [] and seen == []


class Body:
    """A client's body in ``chunk``-byte pieces, ``total`` bytes in all; counts what was read."""

    def __init__(self, total: int, chunk: int = 64 * 1024) -> None:
        self.left, self.chunk, self.read = total, chunk, 0

    async def __call__(self) -> dict[str, Any]:
        piece = min(self.chunk, self.left)
        self.left -= piece
        self.read += piece
        return {"type": "http.request", "body": b"x" * piece, "more_body": self.left > 0}


async def _refused(path: str, declared: int | None, body: Body) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def app(scope, receive, send) -> None:  # noqa: ANN001 (ASGI: reads the whole body)
        while (await receive()).get("more_body"):
            pass

    await RequestLimits(app)(_scope(path, length=declared), body, send)
    return sent


async def test_a_body_far_over_the_limit_is_refused_on_its_length_unread(settings):
    settings.MCP_MAX_BODY_BYTES = 100
    body = Body(DRAIN_BYTES + 1000)
    sent = await _refused("/mcp", DRAIN_BYTES + 1000, body)

    assert sent[0]["status"] == 413 and (b"connection", b"close") in sent[0]["headers"]
    assert body.read == 0


async def test_a_body_a_little_over_the_limit_is_read_and_dropped_so_the_client_reads_its_413(settings):
    settings.MCP_MAX_BODY_BYTES = 100
    body = Body(100_000)
    sent = await _refused("/mcp", 100_000, body)

    assert sent[0]["status"] == 413 and body.left == 0


async def test_a_body_growing_far_past_the_limit_is_refused_without_reading_it_to_its_end(settings):
    settings.SITE_MAX_BODY_BYTES = 100
    body = Body(1024**3)  # no Content-Length: chunked
    sent = await _refused("/admin/login/", None, body)

    assert sent[0]["status"] == 413
    assert body.read <= 100 + DRAIN_BYTES + body.chunk
