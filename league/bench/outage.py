"""Database outages on demand, for ``bench chaos``.

- PostgreSQL: :class:`TcpCut`, a TCP proxy the bench runs in front of the server. The processes
  under test reach the database only through it; :meth:`TcpCut.cut` aborts every proxied
  connection and stops listening (new connections are refused), :meth:`TcpCut.restore` listens
  again on the same port. The bench itself talks to the server directly, so it can still read.
- SQLite: :class:`SqliteLock` holds an exclusive lock (``BEGIN EXCLUSIVE``) on the database file.
  The database runs in WAL mode, so readers carry on; every writer waits (``busy_timeout``) and
  fails with "database is locked" once the lock outlives its wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from typing import Protocol
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings

_CHUNK = 64 * 1024


class Outage(Protocol):
    kind: str

    def cut(self) -> None: ...

    def restore(self) -> None: ...

    def close(self) -> None: ...


class SqliteLock:
    """An exclusive lock on a SQLite database, taken by :meth:`cut` and released by :meth:`restore`."""

    kind = "sqlite exclusive lock"

    def __init__(self, path: str) -> None:
        self.path = path
        self._connection: sqlite3.Connection | None = None

    def cut(self) -> None:
        # Waits for a writer already in its transaction (they are short), as long as they wait for us.
        connection = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        connection.execute("BEGIN EXCLUSIVE")
        self._connection = connection

    def restore(self) -> None:
        if self._connection is not None:
            self._connection.execute("ROLLBACK")
            self._connection.close()
            self._connection = None

    def close(self) -> None:
        self.restore()


class TcpCut:
    """A TCP proxy from a loopback port to ``target``, which can be cut and restored."""

    kind = "tcp proxy cut"

    def __init__(self, target_host: str, target_port: int, port: int, listen_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.port = port
        self.listen_host = listen_host
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="db-proxy", daemon=True)
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self._thread.start()
        self._sync(self._listen())

    def _sync(self, coroutine) -> None:  # type: ignore[no-untyped-def]
        asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(30)

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.listen_host, self.port, reuse_address=True)

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection(*self.target)
        except OSError:
            client_writer.transport.abort()
            return
        pair = {client_writer, server_writer}
        self._open |= pair
        try:
            await asyncio.gather(self._pipe(client_reader, server_writer), self._pipe(server_reader, client_writer))
        except asyncio.CancelledError:
            pass  # the proxy is closing: ended quietly (asyncio's stream callback would report it)
        finally:
            self._open -= pair
            for writer in pair:
                writer.transport.abort()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while data := await reader.read(_CHUNK):
                writer.write(data)
                await writer.drain()
        # One side closed: the other goes too (the database protocol has no half-open use).
        writer.transport.abort()

    async def _cut(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._open):
            writer.transport.abort()  # an RST, as a pulled cable or a restarted server looks

    def cut(self) -> None:
        self._sync(self._cut())

    def restore(self) -> None:
        if self._server is None:
            self._sync(self._listen())

    async def _close(self) -> None:
        await self._cut()
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    def close(self) -> None:
        self._sync(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def database_outage(port: int) -> tuple[Outage, str]:
    """The outage for the configured database and the ``DATABASE_URL`` the processes under test
    must use (through the proxy on ``port`` for PostgreSQL; the file itself for SQLite)."""
    config = settings.DATABASES["default"]
    if config["ENGINE"].endswith("sqlite3"):
        return SqliteLock(str(config["NAME"])), f"sqlite:///{config['NAME']}"
    proxy = TcpCut(config.get("HOST") or "127.0.0.1", int(config.get("PORT") or 5432), port)
    user = config.get("USER") or "postgres"
    password = f":{config['PASSWORD']}" if config.get("PASSWORD") else ""
    url = urlunsplit(("postgres", f"{user}{password}@127.0.0.1:{port}", f"/{config['NAME']}", "", ""))
    return proxy, url


def redacted(url: str) -> str:
    """``url`` without its password, for the report."""
    parts = urlsplit(url)
    if parts.password:
        netloc = f"{parts.username}:***@{parts.hostname}:{parts.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return url
