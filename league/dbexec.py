"""Long-lived database threads for the LM's ``/mcp`` calls, with persistent connections.

Django's ASGI handler runs each request's sync code in a thread of its own, so every call used to
open (and close) a new database connection: connect, pragmas, function registration, about a
tenth of the LM's CPU. ``/mcp`` instead runs its sync work (authentication, the tool, the Event
log) on one of a few long-lived threads (one for SQLite, whose writes are serialised anyway;
``LM_DB_THREADS`` for PostgreSQL), each keeping its connection for ``LM_DB_CONN_MAX_AGE`` seconds.

Connection hygiene on those threads is what Django does between requests: before a call, a
connection that saw errors and no longer works is closed (so a database restart costs at most
the calls that were in flight), one past its age is closed, and ``CONN_HEALTH_CHECKS`` checks a
reused connection at most once a second. After a transactional test flushes the database
(``post_migrate``), the threads drop their connections, so nothing outlives a test.

When the caller is sync code that went through ``async_to_sync`` (an in-process test inside a
transaction), the calls stay on that thread as before: see ``lm_context``.
"""

from __future__ import annotations

import itertools
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any

from asgiref.sync import AsyncToSync, ThreadSensitiveContext
from django.conf import settings
from django.db import connections
from django.db.models.signals import post_migrate

HEALTH_CHECK_EVERY = 1.0  # seconds between health checks of a reused connection


class DbThread(ThreadPoolExecutor):
    """One worker thread whose database connections persist between calls."""

    def __init__(self, name: str) -> None:
        super().__init__(max_workers=1, thread_name_prefix=name)
        self._checked_at = 0.0
        self._raw: dict[str, Any] = {}

    def submit(self, fn, /, *args, **kwargs) -> Future:  # noqa: ANN001
        return super().submit(self._run, fn, args, kwargs)

    def _run(self, fn, args, kwargs):  # noqa: ANN001
        self._before()
        try:
            return fn(*args, **kwargs)
        finally:
            self._after()

    def _before(self) -> None:
        now = time.monotonic()
        for conn in connections.all(initialized_only=True):
            if conn.connection is None:
                continue
            if conn.errors_occurred or now - self._checked_at >= HEALTH_CHECK_EVERY or conn.close_at is None:
                conn.close_if_unusable_or_obsolete()
        if now - self._checked_at >= HEALTH_CHECK_EVERY:
            self._checked_at = now

    def _after(self) -> None:
        age = settings.LM_DB_CONN_MAX_AGE
        for conn in connections.all(initialized_only=True):
            raw = conn.connection
            if raw is None or self._raw.get(conn.alias) is raw:
                continue
            # A connection this thread just opened: keep it (Django's own CONN_MAX_AGE stays 0 for
            # the per-request threads of the rest of the site, whose connections would leak).
            self._raw[conn.alias] = raw
            conn.close_at = time.monotonic() + age
            conn.health_check_enabled = bool(conn.settings_dict.get("CONN_HEALTH_CHECKS"))

    def close_connections(self) -> None:
        def close() -> None:
            connections.close_all()
            self._raw.clear()

        ThreadPoolExecutor.submit(self, close).result()


_lock = threading.Lock()
_threads: list[DbThread] = []
_next = itertools.count()


def _pool() -> list[DbThread]:
    if not _threads:
        with _lock:
            if not _threads:
                engine = settings.DATABASES["default"]["ENGINE"]
                count = 1 if engine.endswith("sqlite3") else max(1, settings.LM_DB_THREADS)
                _threads.extend(DbThread(f"lm-db-{n}") for n in range(count))
    return _threads


def db_thread() -> DbThread:
    """The thread the next request's database work runs on (round robin over the pool)."""
    pool = _pool()
    return pool[next(_next) % len(pool)]


def lm_context() -> AbstractAsyncContextManager:
    """Wrap one ``/mcp`` request: its ``sync_to_async`` calls run on a long-lived DB thread.

    Not when an ``async_to_sync`` caller waits on its own thread (in-process tests in a
    transaction): that thread's connection is the one that sees the data.
    """
    if getattr(AsyncToSync.executors, "current", None) is not None:
        return nullcontext()
    return ThreadSensitiveContext(executor=db_thread())


def close_all() -> None:
    """Close the DB threads' connections (they reconnect on their next call)."""
    for thread in list(_threads):
        thread.close_connections()


def _after_flush(sender: Any, **kwargs: Any) -> None:
    close_all()


post_migrate.connect(_after_flush, dispatch_uid="league.dbexec.close_after_flush")
