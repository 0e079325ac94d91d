"""Running ASGI apps with uvicorn (uvloop + httptools): in the foreground or in a thread.

uvicorn is chosen over daphne for the agents by measurement (~3× the calls/s on the
development machine); the LM keeps daphne/Channels for its websockets.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Sequence
from typing import Any

import uvicorn


def bind_sockets(host: str, ports: Sequence[int]) -> list[socket.socket]:
    """Bind listening sockets up front, so port 0 gives a known ephemeral port."""
    sockets = []
    for port in ports:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # Named TCP, not left to the default (0): asyncio turns Nagle's algorithm off only on
        # sockets that say they are TCP, and the connections accepted here take this socket's
        # protocol. With it on, each answer on a kept-alive connection (headers and body written
        # one after the other) waited ~40 ms for the caller's delayed ACK (uvloop sets the option
        # itself; a ThreadedServer runs on asyncio's own loop).
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
        sock.set_inheritable(True)
        sockets.append(sock)
    return sockets


def make_server(app: Any, *, lifespan: str = "on", log_level: str = "warning", ws: str = "none") -> uvicorn.Server:
    """A uvicorn server for ``app``. Agents serve POST /mcp only, so by default no websocket
    implementation is loaded (``ws="none"``); pass ``ws="auto"`` for an app with websockets (the
    LM site with its dashboard, as the tests serve it)."""
    config = uvicorn.Config(
        app,
        loop="uvloop",
        http="httptools",
        ws=ws,
        lifespan=lifespan,
        log_level=log_level,
        access_log=False,
        # Agents are reached directly (loopback or a class network), never through a proxy, so
        # no X-Forwarded-* rewriting: the middleware cost a layer of calls on every request.
        proxy_headers=False,
        server_header=False,  # "server: uvicorn" on every reply told callers nothing they use
        timeout_keep_alive=30,
        backlog=2048,
    )
    return uvicorn.Server(config)


class ThreadedServer:
    """An ASGI app served from a background thread with its own event loop (tests, tools)."""

    def __init__(
        self,
        app: Any,
        host: str = "127.0.0.1",
        ports: Sequence[int] = (0,),
        lifespan: str = "on",
        ws: str = "auto",  # tests and tools may serve the whole site, dashboard websockets included
    ) -> None:
        self.sockets = bind_sockets(host, ports)
        self._ports = [s.getsockname()[1] for s in self.sockets]
        self.host = host
        self.server = make_server(app, lifespan=lifespan, ws=ws)
        self._thread = threading.Thread(target=self._run, daemon=True, name="asgi-server")
        self.loop: asyncio.AbstractEventLoop | None = None

    @property
    def ports(self) -> list[int]:
        return list(self._ports)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.ports[0]}/mcp"

    def urls(self) -> list[str]:
        return [f"http://{self.host}:{p}/mcp" for p in self.ports]

    @property
    def running(self) -> bool:
        """Whether the server's thread is still serving (an agent may stop its own server)."""
        return self._thread.is_alive()

    def _run(self) -> None:
        # As asyncio.run does, the runner cancels the tasks still pending when the server stops (a
        # league page's audience whose sockets were cut with the server) and lets them finish
        # before it closes the loop: left pending, each would fail later, when garbage collection
        # finds it, on a closed loop ("Event loop is closed"). The loop's selector and wake-up
        # sockets go now too, not at a collection: a test run starts hundreds of these servers.
        with asyncio.Runner() as runner:
            self.loop = runner.get_loop()
            runner.run(self.server.serve(sockets=self.sockets))

    def start(self, timeout: float = 10.0) -> ThreadedServer:
        self._thread.start()
        deadline = threading.Event()
        for _ in range(int(timeout * 100)):
            if self.server.started:
                return self
            if not self._thread.is_alive():
                break
            deadline.wait(0.01)
        raise RuntimeError("server did not start")

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        self._thread.join(timeout)
        for sock in self.sockets:
            sock.close()

    def __enter__(self) -> ThreadedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
