"""Starting a league's agents as real processes on loopback, and watching what they cost.

Shared by ``manage.py demo`` and ``manage.py bench``: the LM site (uvicorn or daphne serving
``leaguesite.asgi:application``), the conductor (``runleague``), referees (``runreferee``) and
player hosts (``runplayer --count``). Per-process CPU seconds, RSS, file descriptors and sockets
are read from ``/proc`` (Linux), so no extra dependency is needed.
"""

from __future__ import annotations

import itertools
import os
import random
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError

from league.endpoints import SERVICE_PORTS

STRATEGY_MIX = ("random", "adaptive", "always_even", "always_odd", "alternate")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def wait_for_port(port: int, timeout: float, host: str = "127.0.0.1") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            sock.settimeout(0.2)
            if sock.connect_ex((host, port)) == 0:
                return
        time.sleep(0.05)
    raise CommandError(f"nothing listens on {host}:{port} after {timeout:g} s")


# Agents' ports come from below the kernel's ephemeral range (ip_local_port_range), which it hands
# to outgoing connections: with a league's hundreds of keep-alive connections, one took a
# referee's port between the bench choosing it and the referee binding it ("Address already in
# use", in a bench scale run on 2026-11-26). Above the range when there is no room below it.
_LOWEST_PORT = 10_000


def ephemeral_range() -> tuple[int, int]:
    try:
        low, high = (int(n) for n in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        return 32_768, 60_999  # Linux's default
    return low, high


class Ports:
    """Loopback ports for agents, none handed out twice by the same ``Ports``.

    ``share`` (index, parts): which part of the ports its runs come from. Processes that choose
    ports at the same moment (the test suite's parallel workers) each take their own part: the
    record of ports handed out is per process, so two could choose the same free port before
    either's agent binds it ("Address already in use"). ``rng`` picks where a run starts;
    ``ephemeral`` is the kernel's ephemeral range (read from /proc when not given).
    """

    def __init__(
        self,
        share: tuple[int, int] = (0, 1),
        rng: Any = None,
        ephemeral: tuple[int, int] | None = None,
    ) -> None:
        self.share = share
        self.rng = rng if rng is not None else random.Random()
        self.ephemeral = ephemeral
        # A port is only reserved once its agent binds it, and agents start a moment later:
        # without this record a second run of ports could overlap the first (seen: both
        # referees failed with "Address already in use" inside the players' run).
        self.handed_out: set[int] = set()

    def first_ports(self, count: int) -> tuple[int, int]:
        """The range (inclusive) a run of ``count`` ports may start in, outside the ephemeral
        range, within this ``share``."""
        low, high = self.ephemeral or ephemeral_range()
        if low - count >= _LOWEST_PORT:
            first, end = _LOWEST_PORT, low  # ports first .. end - 1
        else:
            first, end = high + 1, 65_536
        index, parts = self.share
        size = (end - first) // parts
        first += index * size
        return first, first + size - count

    def free_port(self) -> int:
        """A free loopback port not handed out before."""
        try:
            return self.free_port_run(1)
        except CommandError:
            raise CommandError("no free port") from None

    def free_port_run(self, count: int) -> int:
        """The first of ``count`` consecutive free loopback ports, none handed out before."""
        first, last = self.first_ports(count)
        if last >= first:
            for _ in range(200):
                base = self.rng.randint(first, last)
                ports = range(base, base + count)
                # Not a service's well-known port either: the LM refuses those as agents'
                # endpoints (league/endpoints.py), so a player host given 11211 never registered.
                if all(port not in SERVICE_PORTS and self._bindable(port) for port in ports):
                    self.handed_out.update(ports)
                    return base
        raise CommandError(f"no run of {count} free ports")

    def _bindable(self, port: int) -> bool:
        if port in self.handed_out:
            return False
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                return False
        return True


def share_from_environment() -> tuple[int, int]:
    """``AGENT_PORT_SHARE`` ("index/parts", e.g. "1/4"): the part of the ports this process and the
    benches it starts take, when several choose ports at once on one machine (the test suite's
    parallel workers, and the bench processes their tests start). Unset: all of them."""
    index, _, parts = os.environ.get("AGENT_PORT_SHARE", "").partition("/")
    if index.isdigit() and parts.isdigit() and int(index) < int(parts):
        return int(index), int(parts)
    return 0, 1


PORTS = Ports(share_from_environment())  # this process's ports: every launcher takes its agents' ports from here


def free_port() -> int:
    """A free loopback port that this process has not handed out before."""
    return PORTS.free_port()


def free_port_run(count: int) -> int:
    """The first of ``count`` consecutive free loopback ports, none handed out before by this process."""
    return PORTS.free_port_run(count)


def busy_ports(wanted: dict[int, str], host: str = "127.0.0.1") -> list[str]:
    """Which of ``wanted`` (port → what it is for) cannot be listened on now, each as a phrase
    naming the port and its use. Bound as the servers bind (SO_REUSEADDR), so a port with only
    closing connections is not reported; one with a listener is."""
    busy = []
    for port, purpose in wanted.items():
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError as exc:
                busy.append(f"port {port} ({purpose}): {exc.strerror or exc}")
    return busy


def strategy_groups(players: int, mix: tuple[str, ...] = STRATEGY_MIX) -> list[tuple[str, int]]:
    """``players`` spread over the strategy mix: [(strategy, count), …]."""
    counts: dict[str, int] = {}
    for _, strategy in zip(range(players), itertools.cycle(mix), strict=False):
        counts[strategy] = counts.get(strategy, 0) + 1
    return list(counts.items())


def split(total: int, parts: int) -> list[int]:
    """``total`` spread as evenly as possible over ``parts`` (no zeros)."""
    parts = max(1, min(parts, total))
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


@dataclass
class Usage:
    """What one process cost, sampled from /proc (the last sample before it exited)."""

    cpu_seconds: float = 0.0
    rss_mib: float = 0.0
    peak_rss_mib: float = 0.0
    fds: int = 0
    sockets: int = 0


def read_usage(pid: int) -> Usage | None:
    """CPU (user + system), current and peak RSS, open fds and sockets of ``pid`` and of the
    processes it started that are still running (``uvicorn --workers``: the LM's worker
    processes), summed; None if ``pid`` is gone."""
    own = _usage_of(pid)
    if own is None:
        return None
    for child in _children(pid):
        theirs = read_usage(child)
        if theirs is not None:
            own = Usage(
                round(own.cpu_seconds + theirs.cpu_seconds, 2),
                round(own.rss_mib + theirs.rss_mib, 1),
                round(own.peak_rss_mib + theirs.peak_rss_mib, 1),
                own.fds + theirs.fds,
                own.sockets + theirs.sockets,
            )
    return own


def _children(pid: int) -> list[int]:
    """The running child processes of ``pid`` (``/proc/<pid>/task/<tid>/children``)."""
    found: list[int] = []
    try:
        for task in os.scandir(f"/proc/{pid}/task"):
            try:
                found += [int(child) for child in Path(task.path, "children").read_text().split()]
            except (OSError, ValueError):
                continue
    except OSError:
        pass
    return found


def _usage_of(pid: int) -> Usage | None:
    proc = Path(f"/proc/{pid}")
    try:
        stat = (proc / "stat").read_text()
        status = (proc / "status").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime
    memory = {}
    for line in status.splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            key, value = line.split(":", 1)
            memory[key] = int(value.split()[0]) / 1024
    fds = sockets = 0
    try:
        for entry in os.scandir(proc / "fd"):
            fds += 1
            try:
                if os.readlink(entry.path).startswith("socket:"):
                    sockets += 1
            except OSError:
                continue
    except OSError:
        pass
    return Usage(round(cpu, 2), round(memory.get("VmRSS", 0.0), 1), round(memory.get("VmHWM", 0.0), 1), fds, sockets)


def machine_cpu_times() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, all cores (/proc/stat); (0, 0)
    where there is no /proc. Busy is everything but idle and iowait."""
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
    except OSError:
        return 0.0, 0.0
    ticks = [int(v) for v in first[1:]]
    total = sum(ticks[:8])  # user nice system idle iowait irq softirq steal (guest is in user)
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return (total - idle) / CLOCK_TICKS, total / CLOCK_TICKS


def busy_share(before: tuple[float, float], after: tuple[float, float]) -> float:
    """The share of all cores' time that was busy between two ``machine_cpu_times`` readings."""
    total = after[1] - before[1]
    return round((after[0] - before[0]) / total, 3) if total > 0 else 0.0


@dataclass
class Child:
    name: str
    role: str  # lm, conductor, referee, players
    proc: subprocess.Popen
    usage: Usage = field(default_factory=Usage)
    cpu_at_mark: float | None = None  # CPU seconds when ``Cluster.mark`` was called
    env: dict[str, str] | None = None  # what it was started with (bench chaos starts it again)

    def sample(self) -> None:
        found = read_usage(self.proc.pid)
        if found is not None:
            self.usage = found


@dataclass
class Cluster:
    """The processes of one league run. ``stop()`` ends every one of them (and only them)."""

    log_dir: Path
    env: dict[str, str] | None = None
    children: list[Child] = field(default_factory=list)

    def spawn(self, name: str, role: str, args: list[str], extra_env: dict[str, str] | None = None) -> Child:
        log = open(self.log_dir / f"{name}.log", "w")  # noqa: SIM115 (closed with the process)
        env = {**(self.env if self.env is not None else os.environ), **extra_env} if extra_env else self.env
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        child = Child(name, role, proc, env=env)
        self.children.append(child)
        return child

    @staticmethod
    def manage(*args: str) -> list[str]:
        return [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), *args]

    def start_site(self, port: int, server: str = "uvicorn", workers: int = 1) -> Child:
        """The LM site: uvicorn (httptools, uvloop) or daphne, both serving the full ASGI app.

        ``workers`` > 1 (uvicorn only) starts worker processes behind one socket; their CPU and
        memory are counted as this child's (``read_usage``).
        """
        if server == "daphne":
            args = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "leaguesite.asgi:application"]
        else:
            args = [
                sys.executable,
                "-m",
                "uvicorn",
                "leaguesite.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--log-level",
                "warning",
                "--no-access-log",
                "--loop",
                "uvloop",
                "--http",
                "httptools",
                # As docs/operations.md's command: a page's patch is not compressed again per viewer.
                "--ws-per-message-deflate",
                "false",
            ]
            if workers > 1:
                args += ["--workers", str(workers)]
        child = self.spawn("lm", "lm", args)
        wait_for_port(port, 30)
        return child

    def start_conductor(self, league_id: str | None, poll: float = 0.1) -> Child:
        """A conductor for one league, or for every league in progress when ``league_id`` is None."""
        only = ["--league", league_id] if league_id else []
        return self.spawn("conductor", "conductor", self.manage("runleague", *only, "--poll", str(poll)))

    def start_referees(
        self,
        lm_url: str,
        league_id: str,
        count: int,
        base_port: int,
        max_concurrent: int = 4,
        state_dir: Path | None = None,
        *,
        referee_key: str,
    ) -> list[Child]:
        """``count`` referees of ``league_id``; ``referee_key`` reaches them in their environment
        (REFEREE_KEY), not on their command line, which any user of the machine can read. With
        ``state_dir``, each keeps its identity and unsent reports in a folder of its own there (so
        that it can be restarted)."""
        started = []
        for i in range(count):
            args = self.manage(
                "runreferee",
                "--port",
                str(base_port + i),
                "--league-url",
                lm_url,
                "--league-id",
                league_id,
                "--max-concurrent",
                str(max_concurrent),
                "--log-level",
                "warning",
            )
            if state_dir is not None:
                args += ["--state-dir", str(state_dir / f"referee{i + 1}")]
            started.append(self.spawn(f"referee{i + 1}", "referee", args, {"REFEREE_KEY": referee_key}))
        return started

    def start_players(
        self,
        lm_url: str,
        league_id: str,
        groups: list[tuple[str, int]],
        base_port: int,
        *,
        hosts_per_group: int = 1,
        stay: bool = False,
        names: dict[str, str] | None = None,
        connect: bool = False,
        state_dir: Path | None = None,
    ) -> list[Child]:
        """One ``runplayer --count`` process per (strategy, count) group (or ``hosts_per_group``);
        a group's strategy may be a comma-separated mix, dealt out in turn by ``runplayer``.
        ``connect``: the players listen on no port and answer over the LM's relay. With
        ``state_dir``, each host keeps its players' identities in a folder of its own there."""
        started = []
        port = base_port
        for strategy, count in groups:
            for part, size in enumerate(split(count, hosts_per_group)):
                label = (names or {}).get(strategy) or strategy.replace("_", "-").title()
                args = self.manage(
                    "runplayer",
                    "--port",
                    str(port),
                    "--count",
                    str(size),
                    "--strategy",
                    strategy,
                    "--name",
                    label if hosts_per_group == 1 else f"{label}{part + 1}",
                    "--league-url",
                    lm_url,
                    "--league-id",
                    league_id,
                    "--log-level",
                    "WARNING",
                )
                if stay:
                    args.append("--stay")
                if connect:
                    args.append("--connect")
                suffix = "" if hosts_per_group == 1 else f"-{part + 1}"
                if state_dir is not None:
                    args += ["--state-dir", str(state_dir / f"players-{label.lower()}{suffix}")]
                started.append(self.spawn(f"players-{label.lower()}{suffix}", "players", args))
                port += size
        return started

    def sample(self) -> None:
        for child in self.children:
            if child.proc.poll() is None:
                child.sample()

    def mark(self) -> None:
        """Remember each process's CPU now (a league's start), so that ``usage`` can tell what
        the league itself cost apart from start-up and registration."""
        self.sample()
        for child in self.children:
            child.cpu_at_mark = child.usage.cpu_seconds

    def check(self, roles: tuple[str, ...] = ("lm", "conductor")) -> None:
        """Raise if a process that must stay up (the site, the conductor) has exited."""
        for child in self.children:
            if child.role in roles and child.proc.poll() is not None:
                raise CommandError(f"{child.name} exited ({child.proc.returncode}); logs in {self.log_dir}")

    def usage(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for c in self.children:
            out[c.name] = {"role": c.role, "cpu_seconds": c.usage.cpu_seconds, "peak_rss_mib": c.usage.peak_rss_mib}
            if c.cpu_at_mark is not None:
                out[c.name]["cpu_seconds_since_mark"] = round(c.usage.cpu_seconds - c.cpu_at_mark, 2)
        return out

    def stop(self) -> None:
        for child in reversed(self.children):
            if child.proc.poll() is None:
                child.proc.terminate()
        for child in reversed(self.children):
            try:
                child.proc.wait(10)
            except subprocess.TimeoutExpired:
                child.proc.kill()
                child.proc.wait(10)
