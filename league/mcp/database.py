"""``database_job``: how the LM's tools reach the database from the async ``/mcp`` view.

Every tool call writes (at least its exchange, to the Event log), and SQLite has one writer at a
time. Under ASGI each request runs its sync code on a thread of its own, so concurrent calls
would each take the file's write lock in turn by sleeping in SQLite's busy handler, which
backs off in steps of up to 100 ms: at 40 calls a second the LM answered in seconds. On SQLite
the LM's jobs therefore queue on a lock in this process and run one after another (each takes
about a millisecond); PostgreSQL runs them side by side.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable

from asgiref.sync import sync_to_async
from django.db import connection

# One lock per event loop: an asyncio.Lock belongs to the loop it is first used on.
_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()


def _lock() -> asyncio.Lock:
    loop = asyncio.get_running_loop()
    lock = _locks.get(loop)
    if lock is None:
        lock = _locks[loop] = asyncio.Lock()
    return lock


async def database_job[**P, R](function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """``function(*args, **kwargs)`` on the request's thread (``sync_to_async``), one at a time
    in this process on SQLite."""
    if connection.vendor != "sqlite":
        return await sync_to_async(function)(*args, **kwargs)
    async with _lock():
        return await sync_to_async(function)(*args, **kwargs)
