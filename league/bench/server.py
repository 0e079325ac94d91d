"""``bench server``: the production command of docs/operations.md against hostile connections.

The LM is started with the command docs/operations.md gives organisers (read from that page, so
what is measured is what is documented), on loopback. Then, through real sockets:

* **slow headers**: connections that send a request line and the start of a header, then one more
  byte every ``TRICKLE`` seconds, never finishing their headers;
* **idle sockets**: connections that send nothing;
* while all of them are open, **ordinary clients** (a ``/mcp`` ping and the league list page, each
  on a new connection) must get their answers;
* **an over-limit body**: a ``/mcp`` POST announcing ``OVER_LIMIT`` bytes that sends its body until
  the LM answers: the answer must be 413, with the body's bytes sent by then a small part of it;
  and one that sends its body without looking for an answer: the LM must close the connection
  long before the body is out (it does not read it to its end).
"""

from __future__ import annotations

import asyncio
import re
import resource
import select
import shlex
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from django.conf import settings

from league.bench.machine import machine_info, percentiles
from league.bench.processes import Child, Cluster, free_port, read_usage, wait_for_port

OVER_LIMIT = 1024**3  # what the big POST announces: 1 GiB
TRICKLE = 2.0  # seconds between the bytes of a slow-header connection
PING = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}'


def production_script(host: str, port: int, docs: Path | None = None) -> str:
    """The shell lines of the production command in docs/operations.md (the ```bash block running
    ``uvicorn leaguesite.asgi:application``), bound to ``host``:``port``, with this Python, the
    server ``exec``'d so that the process started is the server itself."""
    text = (docs or Path(settings.BASE_DIR) / "docs" / "operations.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    block = next(b for b in blocks if "uvicorn leaguesite.asgi:application" in b)
    script = block.replace(".venv/bin/python -m uvicorn", f"exec {shlex.quote(sys.executable)} -m uvicorn")
    script = re.sub(r"--host \S+", f"--host {host}", script)
    return re.sub(r"--port \d+", f"--port {port}", script)


def _head(path: str, length: int) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def over_limit_post(port: int, declared: int = OVER_LIMIT, *, wait: bool = True) -> dict[str, Any]:
    """A ``/mcp`` POST announcing ``declared`` bytes, its body sent in 64 KiB blocks: with
    ``wait``, until the LM answers (its status is returned); without, blindly until the LM closes
    the connection (or the whole body is out). Also how many body bytes got out by then."""
    block = b"x" * 65536
    sent = 0
    answer = b""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(_head("/mcp", declared))
        answered = select.poll()
        answered.register(sock, select.POLLIN)
        while sent < declared and not (wait and answered.poll(0)):
            try:
                sent += sock.send(block)
            except OSError:
                break  # closed by the LM
        try:
            while b"\r\n" not in answer:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                answer += chunk
        except OSError:
            pass  # reset: a blind sender may lose the answer with the connection
    status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else None
    return {"status": status, "declared_bytes": declared, "body_bytes_sent": sent}


@dataclass
class ServerBench:
    slow: int = 2000
    idle: int = 3000
    probes: int = 200
    env: dict[str, str] | None = None
    log_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="server-bench-")))
    out: Any = None

    def say(self, line: str) -> None:
        if self.out is not None:
            self.out.write(line)

    def run(self) -> dict[str, Any]:
        _room_for_sockets(self.slow + self.idle + 100)
        port = free_port()
        cluster = Cluster(self.log_dir, env=self.env)
        script = production_script("127.0.0.1", port)
        lm = cluster.spawn("lm", "lm", ["bash", "-c", script])
        try:
            wait_for_port(port, 60)
            return asyncio.run(self._measure(port, lm)) | {"command": script.strip(), "machine": machine_info()}
        finally:
            cluster.stop()

    async def _measure(self, port: int, lm: Child) -> dict[str, Any]:
        baseline = await self._probe(port, 20)
        before = read_usage(lm.proc.pid)
        self.say(f"opening {self.slow} slow-header connections and {self.idle} idle sockets")
        slow = await _open(port, self.slow)
        idle = await _open(port, self.idle)
        for _reader, writer in slow:
            writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        trickle = asyncio.create_task(_trickle([w for _r, w in slow]))
        try:
            await asyncio.sleep(TRICKLE)  # the LM has accepted them all and read their first bytes
            held = read_usage(lm.proc.pid)
            self.say(f"{self.probes} ordinary requests while they are open")
            loaded = await self._probe(port, self.probes)
            big = await asyncio.to_thread(over_limit_post, port)
            blind = await asyncio.to_thread(over_limit_post, port, wait=False)
            still_open = sum(1 for _r, w in slow + idle if not w.is_closing() and not _r.at_eof())
            after = read_usage(lm.proc.pid)
        finally:
            trickle.cancel()
            for _reader, writer in slow + idle:
                writer.close()
        hostile = self.slow + self.idle
        report = {
            "slow_header_connections": self.slow,
            "idle_sockets": self.idle,
            "held_by_the_lm": {"sockets": held.sockets if held else None, "still_open_at_end": still_open},
            "baseline": baseline,
            "under_load": loaded,
            "over_limit_post": big,
            "over_limit_post_sent_blindly": blind,
            "lm": {
                "rss_mib_before": before.rss_mib if before else None,
                "rss_mib_with_sockets": after.rss_mib if after else None,
                "peak_rss_mib": after.peak_rss_mib if after else None,
            },
        }
        report["valid"] = (
            loaded["answered_200"] == loaded["requests"]
            and big["status"] == 413
            and big["body_bytes_sent"] < big["declared_bytes"] // 10
            and blind["body_bytes_sent"] < blind["declared_bytes"] // 10
            and held is not None
            and held.sockets >= hostile
            and still_open >= hostile * 0.99
        )
        return report

    async def _probe(self, port: int, count: int) -> dict[str, Any]:
        """``count`` requests, alternately a /mcp ping and the league list, each on a new
        connection (a client arriving while the sockets are open), one after another."""
        statuses: dict[str, int] = {}
        times: list[float] = []
        limits = httpx.Limits(max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", limits=limits, timeout=30) as client:
            for n in range(count):
                started = time.perf_counter()
                try:
                    if n % 2:
                        response = await client.get("/")
                    else:
                        headers = {"content-type": "application/json"}
                        response = await client.post("/mcp", content=PING, headers=headers)
                    status = str(response.status_code)
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                times.append((time.perf_counter() - started) * 1000)
                statuses[status] = statuses.get(status, 0) + 1
        timing = percentiles(times)
        return {
            "requests": count,
            "answered_200": statuses.get("200", 0),
            "statuses": statuses,
            "p50_ms": round(timing["p50"], 1),
            "p95_ms": round(timing["p95"], 1),
            "max_ms": round(max(times), 1),
        }


async def _open(port: int, count: int) -> list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """``count`` connections to the LM, opened 200 at a time (the listen backlog's pace)."""
    opened: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    while len(opened) < count:
        batch = min(200, count - len(opened))
        opened += await asyncio.gather(*(asyncio.open_connection("127.0.0.1", port) for _ in range(batch)))
    return opened


async def _trickle(writers: list[asyncio.StreamWriter]) -> None:
    """One more byte of header on each slow connection every ``TRICKLE`` seconds."""
    while True:
        await asyncio.sleep(TRICKLE)
        for writer in writers:
            if not writer.is_closing():
                writer.write(b"a")


def _room_for_sockets(needed: int) -> None:
    """Raise this process's open-file limit (up to its hard limit) to hold ``needed`` sockets."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = needed + 1024
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))
