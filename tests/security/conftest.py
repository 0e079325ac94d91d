"""Security tests start with empty rate-limit buckets (in this process, or in Redis)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from league.ratelimit import limiter


@pytest.fixture(scope="session")
def reset_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """One event loop for every reset: with Redis the limiter keeps a client (and its connection)
    for each loop it has run on, so a new loop per reset held a socket per test to the end."""
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(autouse=True)
def fresh_rate_limits(reset_loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    reset_loop.run_until_complete(limiter.reset())
    yield
    reset_loop.run_until_complete(limiter.reset())
