"""``database_job``: how the LM's tools reach the database from ``/mcp`` (league/mcp/endpoint.py).

Every call to ``/mcp`` has work in the database (at least its exchange, for the Event log), a
millisecond or so each. It runs on one thread of this module's, which keeps its connection from
one job to the next: opening one per call (what a Django view under ASGI does, a thread of its
own each time) cost about as much as the call's own queries. One thread also suits SQLite, which
has one writer at a time: calls that each took the file's write lock in turn from threads of
their own would sleep in SQLite's busy handler, which backs off in steps of up to 100 ms (at 40
calls a second the LM answered in seconds). On PostgreSQL several LM processes
(``runleague --lm-workers``) give parallel work, a thread each.

A job that fails on the connection itself (``OperationalError``, ``InterfaceError``: the database
went away, a network cut, a restart) closes it, so that the next job opens a new one; the call is
refused as an outage by the toolset (league/mcp/toolset.py) and its agent sends it again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import sync_to_async
from django.db import DatabaseError, InterfaceError, OperationalError, connection

_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-database")


def _healing[R](function: Callable[[], R]) -> R:
    try:
        return function()
    except (OperationalError, InterfaceError):
        with contextlib.suppress(DatabaseError):
            connection.close()
        raise


async def database_job[**P, R](function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """``function(*args, **kwargs)`` on the LM's database thread, after the jobs before it."""
    return await sync_to_async(_healing, thread_sensitive=False, executor=_executor)(lambda: function(*args, **kwargs))


async def close_connection() -> None:
    """Close the database thread's connection (a server stopping; a test's database about to be
    dropped, which PostgreSQL refuses while a connection is open)."""
    await database_job(lambda: connection.close())  # the thread's connection: looked up there
