"""Headless Chromium (Debian's) driven by Playwright, against the LM site served on loopback."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@dataclass
class Site:
    """The LM's ASGI app (Django + Channels, websockets included) in a thread."""

    base: str
    loop: asyncio.AbstractEventLoop

    def broadcast(self, league_id: str, event: str, data: dict[str, Any]) -> None:
        """Send on the server's own loop: the in-memory layer's queues belong to it."""
        self.send(f"league_{league_id}", event, data)

    def send(self, group: str, event: str, data: dict[str, Any]) -> None:
        """``broadcast`` to any group (``leagues``: the league list's)."""
        from channels.layers import get_channel_layer

        message = {"type": "league.events", "events": [{"event": event, "data": data}]}
        coro = get_channel_layer().group_send(group, message)
        asyncio.run_coroutine_threadsafe(coro, self.loop).result(5)


@pytest.fixture
def site(transactional_db) -> Iterator[Site]:
    from channels.layers import get_channel_layer

    from leagueproto.serve import ThreadedServer
    from leaguesite.asgi import application

    server = ThreadedServer(application, lifespan="off").start()
    # The in-memory layer lives as long as the process: empty it of the channels of the servers of
    # earlier tests (their sockets were cut with the server, so their groups still name them and
    # a send to one would reach a closed event loop). ``flush`` is the layer's own way to do so.
    asyncio.run_coroutine_threadsafe(get_channel_layer().flush(), server.loop).result(5)
    try:
        yield Site(base=server.url.rsplit("/mcp", 1)[0], loop=server.loop)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser():
    """One Chromium per test module (each test gets a context of its own: a fresh profile). Not
    one per session: sync Playwright keeps an event loop running in the main thread while it is
    open, and the tests after the browser ones call asyncio.run() there."""
    from playwright.sync_api import sync_playwright

    # Sync Playwright runs an event loop in the test's thread, so Django would refuse the test's
    # own ORM calls (the documented Playwright + Django set-up; the server thread is unaffected).
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()
            if previous is None:
                os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
            else:
                os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(10_000)  # (a CI machine busy with the rest of the suite)
    yield page
    context.close()
