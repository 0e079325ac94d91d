"""Fixtures for the relay tests: relay players served by a ConnectHost on a thread of its own."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from players.connect import ConnectHost

FAST = {
    "join_timeout": 2.0,
    "move_timeout": 2.0,
    "game_over_timeout": 2.0,
    "report_timeout": 2.0,
    "default_timeout": 2.0,
    "retries": 1,
    "retry_delay": 0.05,
    "match_deadline": 20.0,
}


@dataclass
class RunningHost:
    host: ConnectHost
    thread: threading.Thread
    loop: asyncio.AbstractEventLoop | None = None
    task: asyncio.Task | None = None

    def stop(self) -> None:
        if self.loop is not None and self.task is not None and not self.task.done():
            self.loop.call_soon_threadsafe(self.task.cancel)
        self.thread.join(10)


@pytest.fixture
def run_connect_host() -> Iterator:
    """Start a ConnectHost on its own thread and event loop; stopped at the end of the test."""
    running: list[RunningHost] = []

    def start(host: ConnectHost) -> RunningHost:
        holder = RunningHost(host, threading.Thread(daemon=True, name="connect-host"))

        def run() -> None:
            async def main() -> None:
                holder.loop = asyncio.get_running_loop()
                holder.task = asyncio.current_task()
                try:
                    await host.run()
                except asyncio.CancelledError:
                    pass

            asyncio.run(main())

        holder.thread = threading.Thread(target=run, daemon=True, name="connect-host")
        holder.thread.start()
        running.append(holder)
        return holder

    yield start
    for holder in running:
        holder.stop()
