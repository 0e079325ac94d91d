"""The spectators of ``bench spectators`` (league/bench/spectators.py), run as
``python -m league.bench.spectator BASE LEAGUE_ID COUNT RAMP NICE OUT.json``: COUNT pages that do
what the league page does (static/league/league.js), arriving over RAMP seconds; each leaves
once its page shows the league completed (or on SIGTERM), and their records go to OUT.json
with the lags of this process's event loop.

Each page receives every frame on its own socket, but the pages of one process decode a frame
and apply a patch once between them (``Frames``): a class's browsers each do that on their own
machine, and done per page here it took more of the two cores than the league it watched (at 100
pages, two thirds of a spectators' process in ``orjson.loads`` alone), which measured the bench's
pages rather than the LM.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
import time
import zlib
from collections import OrderedDict
from pathlib import Path
from typing import Any

import orjson

# What league.js reads of its page: the version it shows and the snapshot it was rendered from.
PAGE_VERSION = re.compile(rb'id="league-page"[^>]*\bdata-at="([^"]+)"')
PAGE_SNAPSHOT = re.compile(rb'<script id="snapshot" type="application/json">(.*?)</script>', re.S)


class Frames:
    """What this process's pages make of the frames they receive, worked out once per frame and
    shared: the message a frame holds, and the state its patch makes. A patch names the version
    it applies to, and pages at one version hold one state (the snapshot at that version, or the
    patches that lead to it: ``league.api.live``'s contract, tests/league/test_live.py); pages
    never change a state in place (``live.apply`` builds a new one). The last ``keep`` of each are
    kept: a process's pages lag behind one another by a few frames at most."""

    def __init__(self, keep: int = 64) -> None:
        self.keep = keep
        self._messages: OrderedDict[bytes | str, dict[str, Any]] = OrderedDict()
        self._states: OrderedDict[bytes | str, Any] = OrderedDict()  # a patch's frame → the state it makes
        self._pages: OrderedDict[bytes, tuple[str | None, Any]] = OrderedDict()  # a page → (version, state)
        self.decoded = self.applied = 0  # frames decoded and patches applied (once each, not per page)

    def message(self, frame: bytes | str) -> dict[str, Any]:
        """The message in ``frame``: a binary frame is a patch compressed as the page asks
        (league.js); a page parses with the browser's native JSON.parse."""
        found = self._messages.get(frame)
        if found is None:
            self.decoded += 1
            found = orjson.loads(zlib.decompress(frame) if isinstance(frame, bytes) else frame)
            self._remember(self._messages, frame, found)
        return found

    def page(self, html: bytes) -> tuple[str | None, Any]:
        """The version a league page shows and its state, as the page's script reads them (its
        ``data-at`` and its embedded snapshot); pages loaded at one version are the same bytes."""
        found = self._pages.get(html)
        if found is None:
            version = PAGE_VERSION.search(html)
            snapshot = PAGE_SNAPSHOT.search(html)
            found = (version[1].decode() if version else None, orjson.loads(snapshot[1]) if snapshot else None)
            self._remember(self._pages, html, found)
        return found

    def apply(self, state: Any, frame: bytes | str) -> Any:
        """``state``, at the version the patch in ``frame`` applies to, with that patch applied."""
        from league.api import live

        found = self._states.get(frame)
        if found is None:
            self.applied += 1
            found = live.apply(state, self.message(frame)["data"])
            self._remember(self._states, frame, found)
        return found

    def _remember(self, kept: OrderedDict, key: Any, value: Any) -> None:
        kept[key] = value
        if len(kept) > self.keep:
            kept.popitem(last=False)


class Spectator:
    """One page: its first load, its websocket, its state and when it was refreshed."""

    def __init__(self, base: str, league_id: str, frames: Frames | None = None) -> None:
        self.base, self.league_id = base, league_id
        self.frames = frames if frames is not None else Frames()
        self.page_ms: float | None = None
        self.snapshot_ms: float | None = None  # from opening the socket to the page live (at the server's version)
        self.synced = False  # whether the socket open now has brought the page live
        self.refreshes: list[float] = []
        # When the page first showed a finished match: from then on results come in, and the
        # page is to be refreshed at least once a second (before it, the league had not moved).
        self.results_from: float | None = None
        self.resyncs = 0
        self.bytes = 0
        self.state: dict[str, Any] | None = None
        self.version: str | None = None
        self.drops = 0  # sockets closed under the page (it opens another)
        self.dropped = ""  # why the last one closed
        self.error = ""

    async def watch(self, client: Any, stop: asyncio.Event) -> None:
        """Load the page, then follow the websocket until the league ends; a dropped socket is
        opened again after a pause and asks for what changed since its version, as the page does."""
        import websockets

        began = time.perf_counter()
        try:
            async with client.get(f"{self.base}/leagues/{self.league_id}/") as response:
                response.raise_for_status()
                html = await response.read()
            self.page_ms = round((time.perf_counter() - began) * 1000, 1)
            self.version, self.state = self.frames.page(html)
            while not stop.is_set() and not self.done():
                try:
                    await self.follow(stop)
                except websockets.ConnectionClosed as exc:
                    self.drops += 1
                    self.dropped = f"{type(exc).__name__}: {exc}"
                    await asyncio.sleep(0.5)
        except Exception as exc:  # reported, and the bench fails on it
            self.error = f"{type(exc).__name__}: {exc}"

    async def follow(self, stop: asyncio.Event) -> None:
        import websockets

        # As the page asks: patches compressed, and what changed since the version it shows.
        url = self.base.replace("http://", "ws://") + f"/ws/leagues/{self.league_id}/?deflate=1"
        if self.version:
            url += f"&at={self.version}"
        opened = time.perf_counter()
        self.synced = False
        # No keepalive pings of the client's own: a browser's page sends none.
        async with websockets.connect(url, origin="http://127.0.0.1", max_size=None, ping_interval=None) as ws:
            while not stop.is_set() and not self.done():
                try:
                    frame = await asyncio.wait_for(ws.recv(), 0.5)
                except TimeoutError:
                    continue
                self.bytes += len(frame)
                message = self.frames.message(frame)
                if message["type"] == "snapshot":
                    self.state, self.version = message["data"], message["version"]
                elif message["type"] == "patch":
                    if message["version"] == self.version:
                        if self.synced:
                            continue  # (a snapshot sent as this patch went out)
                        # The page was current when its socket opened: live as it is.
                    elif message["from"] != self.version or message["data"] is None:
                        self.resyncs += 1
                        await ws.send(json.dumps({"type": "snapshot"}))
                        continue
                    else:
                        self.state = self.frames.apply(self.state, frame)
                        self.version = message["version"]
                else:
                    continue
                if self.snapshot_ms is None:  # the page live: at the server's version
                    self.snapshot_ms = round((time.perf_counter() - opened) * 1000, 1)
                self.synced = True
                self.refreshes.append(time.time())
                if self.results_from is None and ((self.state or {}).get("progress") or {}).get("matches_finished"):
                    self.results_from = self.refreshes[-1]  # the first refresh showing a result

    def done(self) -> bool:
        """Whether the page is live (its socket brought it to the server's version) and shows the
        league completed: a page loaded after the end still opens its socket, as league.js does."""
        return self.synced and bool(self.state) and self.state["league"]["status"] == "COMPLETED"

    def record(self) -> dict[str, Any]:
        progress = (self.state or {}).get("progress") or {}
        return {
            "page_ms": self.page_ms,
            "snapshot_ms": self.snapshot_ms,
            "refreshes": self.refreshes,
            "results_from": self.results_from,
            "resyncs": self.resyncs,
            "drops": self.drops,
            "dropped": self.dropped,
            "bytes": self.bytes,
            "finished": progress.get("matches_finished"),
            "error": self.error,
        }


async def loop_lag(stop: asyncio.Event, lags: list[float], every: float = 0.1) -> None:
    """How late this process's event loop wakes a timer, every ``every`` seconds: a page's
    refresh is timed when this process gets to it, so a spectators' process short of CPU shows
    as long waits that are its own, not the league's."""
    while not stop.is_set():
        asked = time.perf_counter()
        await asyncio.sleep(every)
        lags.append(time.perf_counter() - asked - every)


async def spectate(base: str, league_id: str, count: int, ramp: float) -> dict[str, Any]:
    # aiohttp, not httpx, for the first pages: httpx took ~10 ms of this process's CPU a page
    # (249 KB), aiohttp 0.5, and 500 pages arriving within seconds made httpx's parsing the
    # spectators' own delay (as in leagueproto/client.py).
    import aiohttp

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    frames = Frames()
    spectators = [Spectator(base, league_id, frames) for _ in range(count)]
    connector = aiohttp.TCPConnector(limit=count)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60.0)) as client:

        async def arrive(i: int, spectator: Spectator) -> None:
            await asyncio.sleep(ramp * i / max(1, count))
            await spectator.watch(client, stop)

        lags: list[float] = []
        lagging = asyncio.create_task(loop_lag(stop, lags))
        tasks = [asyncio.create_task(arrive(i, s)) for i, s in enumerate(spectators)]
        await asyncio.gather(*tasks, return_exceptions=True)  # each ends at the league's end or on SIGTERM
        lagging.cancel()
    return {
        "pages": [s.record() for s in spectators],
        "loop_lags": lags,
        "frames_decoded": frames.decoded,
        "patches_applied": frames.applied,
    }


def main(argv: list[str]) -> None:
    base, league_id, count, ramp, nice, out = argv
    # NICE 19: the spectators stand for the class's own laptops and take only the CPU the league
    # leaves idle (they may then lag behind it); 0: they share the cores with the league.
    os.nice(int(nice))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaguesite.settings")
    import django

    django.setup()
    Path(out).write_text(json.dumps(asyncio.run(spectate(base, league_id, int(count), float(ramp)))))


if __name__ == "__main__":
    main(sys.argv[1:])
