"""Security tests start with empty rate-limit buckets (in this process, or in Redis)."""

from __future__ import annotations

import asyncio

import pytest

from league.ratelimit import limiter


@pytest.fixture(autouse=True)
def fresh_rate_limits():
    asyncio.run(limiter.reset())
    yield
    asyncio.run(limiter.reset())
