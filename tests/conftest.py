"""Fixtures shared by the whole suite: live servers on loopback and agent processes."""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.servers import live_database_url

ROOT = Path(__file__).resolve().parent.parent


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--fuzz-long", action="store_true", help="run the /mcp fuzz tests with many more cases")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In parallel runs (pytest-xdist), the tests that start agent processes or a browser, the long
    ones, are handed out first: last in the order (tests/test_demo.py), one would run on alone
    while the other workers sit idle. The sort is stable, and every worker sorts alike."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: not any(item.get_closest_marker(name) for name in ("processes", "browser")))


@pytest.fixture(scope="session", autouse=True)
def worker_ports() -> None:
    """Each parallel worker (pytest-xdist) chooses its agents' ports in a part of the range of its
    own (league/bench/processes.py, ``Ports.share``), and so do the benches its tests start
    (``AGENT_PORT_SHARE``, which they inherit)."""
    from league.bench import processes

    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if worker.startswith("gw") and workers > 1:
        os.environ["AGENT_PORT_SHARE"] = f"{worker.removeprefix('gw')}/{workers}"
        processes.PORTS.share = processes.share_from_environment()


@pytest.fixture(scope="session", autouse=True)
def mcp_database_closed(django_db_setup, django_db_blocker) -> Iterator[None]:
    """The LM's database thread (league/mcp/database.py) keeps its connection from one call to the
    next, one test's servers to the next, and so does asgiref's one thread for thread-sensitive
    ``sync_to_async`` calls made outside ``async_to_sync`` (async tests call the ORM so); both are
    closed before the test database is dropped, which PostgreSQL refuses while a connection is
    open. So are the connections left on threads that have ended: each async test's event loop
    has a default executor of its own, where the dashboard's reads run (``database_sync_to_async``
    with ``thread_sensitive=False``), and its threads end with the loop, their connections open."""
    import threading
    import weakref

    from django.db.backends.signals import connection_created

    opened: list[tuple[threading.Thread, weakref.ref]] = []

    def note(sender, connection, **kwargs) -> None:
        opened.append((threading.current_thread(), weakref.ref(connection)))

    connection_created.connect(note, weak=False)
    yield
    connection_created.disconnect(note)
    import asyncio

    from asgiref.sync import async_to_sync, sync_to_async
    from django.db import connections

    from league.mcp.database import close_connection

    with django_db_blocker.unblock():
        async_to_sync(close_connection)()
        # Run from no event loop, a thread-sensitive call runs on asgiref's shared sync thread.
        asyncio.run(sync_to_async(connections.close_all)())
    for thread, ref in opened:
        wrapper = ref()
        if wrapper is not None and wrapper.connection is not None and not thread.is_alive():
            wrapper.connection.close()  # (the driver's own: the wrapper belongs to a thread gone)


@pytest.fixture
def fuzz_examples(request: pytest.FixtureRequest) -> int:
    """How many cases a fuzz test runs: thousands in the suite, ten times that with --fuzz-long."""
    return 10 if request.config.getoption("--fuzz-long") else 1


@pytest.fixture(autouse=True)
def referee_key(monkeypatch: pytest.MonkeyPatch, settings) -> str:
    """The site-wide referee key of the test's run, as an operator sets it: the LM in this process
    (settings) and every referee started from it (REFEREE_KEY, inherited by ``agent_env``) share
    it. Tests of a site without a key clear both."""
    key = secrets.token_urlsafe(16)
    settings.REFEREE_KEY = key
    monkeypatch.setenv("REFEREE_KEY", key)
    return key


@pytest.fixture
def lm_server(transactional_db) -> Iterator[str]:
    """The League Manager's ASGI app (Django + Channels) on an ephemeral loopback port.

    Yields its ``/mcp`` URL. Uses the test database, committed for real (transactional_db),
    so agent processes and other threads see the same rows.
    """
    from leagueproto.serve import ThreadedServer
    from leaguesite.asgi import application

    server = ThreadedServer(application, lifespan="off").start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def agent_env(transactional_db) -> dict[str, str]:
    """Environment for a ``manage.py`` subprocess that shares the test database."""
    env = dict(os.environ)
    env["DATABASE_URL"] = live_database_url()
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("PYTHONPATH", str(ROOT))
    return env


@pytest.fixture
def manage_py() -> list[str]:
    return [sys.executable, str(ROOT / "manage.py")]
