"""Agents that never answer properly, as raw TCP servers on loopback (no HTTP library to be
polite for them): ``mute`` reads a request and never answers nor closes; ``flood`` answers
200 with a body of ``flood_bytes`` (no length given, so the client reads until it gives up)
and never closes either. Each counts the requests it received."""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Literal

Mode = Literal["mute", "flood"]


class SilentAgent:
    def __init__(self, mode: Mode, flood_bytes: int = 10 * 1024 * 1024) -> None:
        self.mode = mode
        self.flood_bytes = flood_bytes
        self.requests = 0
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._held: list[asyncio.StreamWriter] = []

    def start(self) -> SilentAgent:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(5)
        return self

    async def _serve(self) -> None:
        self._server = await asyncio.start_server(self._handle, sock=self._sock)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._held.append(writer)  # never closed by us
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value.strip())
                await reader.readexactly(length)
                self.requests += 1
                if self.mode == "mute":
                    continue  # read on, answer nothing
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n")
                writer.write(b'{"jsonrpc": "2.0", "id": 1, "result": {"padding": "')
                chunk = b"x" * 65536
                for _ in range(self.flood_bytes // len(chunk)):
                    writer.write(chunk)
                    await writer.drain()
                await asyncio.Event().wait()  # and never finish the reply nor close
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            return

    def stop(self) -> None:
        async def close() -> None:
            self._server.close()
            for writer in self._held:
                writer.close()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()  # its descriptors now, not at the next garbage collection
