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

``GroupCommit``: calls of one kind that arrive together (reports, registrations) go to that
thread as one job, one transaction for them all, each caller with its own answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Self

from asgiref.sync import sync_to_async
from django.db import DatabaseError, InterfaceError, OperationalError, connection

_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-database")
# The public pages' reads (league/pages/views.py ``league_detail``), and the relay's look-ups of
# the socket that serves a player (league/relay/endpoint.py): threads of their own, so that
# a class opening a league page together never queues before the referees' reports, each with
# its connection kept from one page to the next (a Django view under ASGI runs on a thread of
# its own per request, which opens a connection each time: `bench pages` served 145–151 pages a
# second on SQLite that way, 185–200 this way; docs/benchmarks.md). Two: one may render a page
# while the other serves the page as it is to everyone else.
PAGE_READERS = 2
_page_reads = ThreadPoolExecutor(max_workers=PAGE_READERS, thread_name_prefix="page-reads")


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


async def page_read[**P, R](function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """``function(*args, **kwargs)`` on one of the pages' reading threads."""
    return await sync_to_async(_healing, thread_sensitive=False, executor=_page_reads)(
        lambda: function(*args, **kwargs)
    )


async def close_connection() -> None:
    """Close the connections of the database thread and the pages' reading threads (a server
    stopping; a test's database about to be dropped, which PostgreSQL refuses while a connection
    is open)."""
    await database_job(lambda: connection.close())  # the thread's connection: looked up there
    # One job on each reading thread: each waits until the other has started.
    both = threading.Barrier(PAGE_READERS)

    def close_own() -> None:
        both.wait(10)
        connection.close()

    await asyncio.gather(*(page_read(close_own) for _ in range(PAGE_READERS)))


class GroupCommit[T, R]:
    """Group commit: the calls that arrive while a batch is running go together in the next
    one, one database job (and one transaction) for them all.

    ``job`` answers a batch in order, one outcome per call: its answer, or the exception that is
    its own. The first call to find the queue idle takes everything queued and runs it; the
    others wait on the lock and find their answer ready (or lead the next batch). One queue per
    event loop and subclass (``current``)."""

    def __init__(self, job: Callable[[list[T]], list[R | BaseException]]) -> None:
        self._job = job
        self._pending: list[tuple[T, asyncio.Future]] = []
        self._lock = asyncio.Lock()

    @classmethod
    def current(cls) -> Self:
        """This event loop's queue of this class (a subclass that knows its job)."""
        queues = _queues.setdefault(asyncio.get_running_loop(), {})
        queue = queues.get(cls)
        if queue is None:
            queue = queues[cls] = cls()  # type: ignore[call-arg]
        return queue

    async def submit(self, item: T) -> R:
        entry = (item, asyncio.get_running_loop().create_future())
        self._pending.append(entry)
        try:
            # One turn of the loop first: the other calls of the same JSON-RPC batch, started
            # together, are queued by then and go in this call's transaction.
            await asyncio.sleep(0)
            async with self._lock:
                if not entry[1].done():
                    batch, self._pending = self._pending, []
                    job = asyncio.ensure_future(database_job(self._job, [x for x, _ in batch]))
                    job.add_done_callback(lambda done: _settle(batch, done))
                    # Waited for, not awaited: were this caller to go away, the batch would still run
                    # and answer the others; its outcome (or error) is read from the future below.
                    await asyncio.wait({job})
        except asyncio.CancelledError:
            if entry in self._pending:
                self._pending.remove(entry)  # not taken by a batch: it will never run
            # Taken by a batch that runs on: no one will read this call's answer (or error).
            entry[1].cancel()
            raise
        return entry[1].result()


def each_on_its_own_if_need_be[T, R](job: Callable[[list[T]], list[R]], batch: list[T]) -> list[R | Exception]:
    """``job(batch)``. Should the batch fail as a whole (a database error), each of its items is
    run again on its own, so that one item's failure is its own (and its caller's only)."""
    try:
        return list(job(batch))
    except Exception:
        if len(batch) == 1:
            raise
    outcomes: list[R | Exception] = []
    for item in batch:
        try:
            outcomes.extend(job([item]))
        except Exception as exc:  # this item's own failure: its caller gets a -32603
            outcomes.append(exc)
    return outcomes


_queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[type, Any]] = weakref.WeakKeyDictionary()


def _settle(batch: list[tuple[Any, asyncio.Future]], job: asyncio.Future) -> None:
    """Hand each call of a finished batch its answer (or the batch's exception)."""
    error = None if job.cancelled() else job.exception()
    for n, (_, future) in enumerate(batch):
        if future.done():
            continue
        if job.cancelled():
            future.cancel()
        elif error is not None:
            future.set_exception(error)
        elif isinstance(job.result()[n], BaseException):
            future.set_exception(job.result()[n])
        else:
            future.set_result(job.result()[n])
