"""RequestLimits (leaguesite/limits.py) called as an ASGI app: its read deadline, and a cancellation
from outside left to the caller."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from leaguesite.limits import RequestLimits

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


async def test_a_body_over_the_limit_is_refused_on_its_length_and_closes_the_connection(settings):
    settings.MCP_MAX_BODY_BYTES = 100
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await RequestLimits(_reading_app)(_scope(length=101), _never, send)

    assert sent[0]["status"] == 413 and (b"connection", b"close") in sent[0]["headers"]
    assert seen == []  # the app never ran


async def test_a_body_growing_past_the_limit_is_refused_without_reading_on(settings):
    settings.SITE_MAX_BODY_BYTES = 100
    chunks = iter([{"type": "http.request", "body": b"x" * 60, "more_body": True}] * 3)
    reads = 0

    async def receive() -> dict[str, Any]:
        nonlocal reads
        reads += 1
        return next(chunks)

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def app(scope, receive, send) -> None:  # noqa: ANN001 (ASGI)
        while (await receive())["type"] == "http.request":
            pass

    await RequestLimits(app)(_scope("/admin/login/", length=None), receive, send)

    assert sent[0]["status"] == 413 and reads == 2
