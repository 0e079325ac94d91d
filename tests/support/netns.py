"""Hosts on one machine: network namespaces joined by a bridge, for tests of what crosses a network.

A :class:`Network` is a Linux bridge in the root namespace (the tests' own host, which keeps the
database and can serve the League Manager on the bridge's address) and one namespace per extra
host, each joined to the bridge by a veth pair. Agents started with :meth:`Host.popen` run inside
their host: they reach the others only by the addresses below, as on a real network.

Needs root, ``ip`` (iproute2) and, for :meth:`Host.block_inbound`, ``nft`` (nftables);
:func:`unsupported` says why a machine cannot, so a test can skip with that reason.
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any

_counter = itertools.count(1)


class Unsupported(RuntimeError):
    """This machine (its kernel, its tools or our rights) cannot build what was asked."""


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), check=check, capture_output=True, text=True, timeout=30)


def unsupported() -> str | None:
    """Why network namespaces cannot be used here, or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "the 'ip' command (iproute2) is not installed"
    probe = f"lgprobe{os.getpid()}"
    done = _run("ip", "netns", "add", probe, check=False)
    if done.returncode != 0:
        return f"the kernel refused a network namespace: {done.stderr.strip()}"
    _run("ip", "netns", "del", probe, check=False)
    return None


def netem_unsupported() -> str | None:
    """Why ``tc ... netem`` (delay and loss) cannot be used here, or None when it can."""
    if (reason := unsupported()) is not None:
        return reason
    if shutil.which("tc") is None:
        return "the 'tc' command (iproute2) is not installed"
    # A veth pair, as the network's own links are: some kernels have no dummy links at all.
    probe = f"lgq{os.getpid() % 100000}"
    made = _run("ip", "link", "add", probe, "type", "veth", "peer", "name", f"{probe}p", check=False)
    if made.returncode != 0:
        return f"the kernel refused a veth pair: {made.stderr.strip()}"
    try:
        done = _run("tc", "qdisc", "add", "dev", probe, "root", "netem", "delay", "1ms", check=False)
        if done.returncode != 0:
            return f"the kernel has no netem queueing discipline (CONFIG_NET_SCH_NETEM): {done.stderr.strip()}"
    finally:
        _run("ip", "link", "del", probe, check=False)
    return None


def loss_unsupported() -> str | None:
    """Why :meth:`Host.lose` (random packet loss with nftables) cannot be used here, or None."""
    if (reason := unsupported()) is not None:
        return reason
    if shutil.which("nft") is None:
        return "the 'nft' command (nftables) is not installed"
    probe = f"lgprobe{os.getpid()}"
    _run("ip", "netns", "add", probe, check=False)
    try:
        done = subprocess.run(
            ["ip", "netns", "exec", probe, "nft", "-f", "-"],
            input=_loss_rules(1.0),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if done.returncode != 0:
            return f"nftables refused random packet loss (numgen random): {done.stderr.strip()}"
    finally:
        _run("ip", "netns", "del", probe, check=False)
    return None


def _loss_rules(percent: float) -> str:
    """nftables rules dropping ``percent`` % of a namespace's packets each way, at random
    (``numgen random``: each packet drawn independently, as netem's ``loss`` does); loopback
    traffic inside the host is spared, as it never crosses the link."""
    per_mille = round(percent * 10)
    return (
        "add table inet lg_loss\n"
        "add chain inet lg_loss input { type filter hook input priority -10; policy accept; }\n"
        "add chain inet lg_loss output { type filter hook output priority -10; policy accept; }\n"
        "add rule inet lg_loss input iif lo accept\n"
        "add rule inet lg_loss output oif lo accept\n"
        f"add rule inet lg_loss input numgen random mod 1000 < {per_mille} counter drop\n"
        f"add rule inet lg_loss output numgen random mod 1000 < {per_mille} counter drop\n"
    )


@dataclass
class Host:
    """One machine of the network: a namespace with one address on the bridge."""

    name: str
    namespace: str
    address: str
    outside_link: str  # the veth end on the bridge (root namespace)
    inside_link: str  # the veth end in the namespace
    processes: list[subprocess.Popen] = field(default_factory=list)

    def command(self, args: Sequence[str]) -> list[str]:
        """``args`` as run inside this host."""
        return ["ip", "netns", "exec", self.namespace, *args]

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return _run(*self.command(args), check=check)

    def popen(self, args: Sequence[str], env: dict[str, str], log: IO[Any] | None = None) -> subprocess.Popen:
        """Start a process inside this host (killed by :meth:`Network.close`)."""
        out: Any = log if log is not None else subprocess.DEVNULL
        proc = subprocess.Popen(self.command(args), env=env, stdout=out, stderr=subprocess.STDOUT)
        self.processes.append(proc)
        return proc

    def block_inbound(self) -> None:
        """Refuse every connection opened towards this host (as behind NAT or client isolation):
        its own outgoing connections, and their replies, still pass."""
        if shutil.which("nft") is None:
            raise Unsupported("the 'nft' command (nftables) is not installed")
        rules = (
            "add table inet lg_guard\n"
            "add chain inet lg_guard input { type filter hook input priority 0; policy accept; }\n"
            "add rule inet lg_guard input iif lo accept\n"
            "add rule inet lg_guard input ct state established,related accept\n"
            "add rule inet lg_guard input ct state new drop\n"
        )
        done = subprocess.run(
            self.command(["nft", "-f", "-"]), input=rules, capture_output=True, text=True, timeout=30, check=False
        )
        if done.returncode != 0:
            raise Unsupported(f"nftables refused the rules: {done.stderr.strip()}")

    def lose(self, percent: float) -> None:
        """Drop ``percent`` % of the packets this host sends and receives, at random (nftables:
        works where the kernel has no netem)."""
        if (reason := loss_unsupported()) is not None:
            raise Unsupported(reason)
        done = subprocess.run(
            self.command(["nft", "-f", "-"]),
            input=_loss_rules(percent),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if done.returncode != 0:
            raise Unsupported(f"nftables refused the loss rules: {done.stderr.strip()}")

    def dropped(self) -> int:
        """Packets :meth:`lose` has dropped so far on this host (both ways), from nftables' counters."""
        listed = self.run("nft", "list", "table", "inet", "lg_loss")
        return sum(int(n) for n in re.findall(r"counter packets (\d+)", listed.stdout))

    def impair(self, *, delay_ms: int, jitter_ms: int, loss_percent: float) -> None:
        """Delay and lose packets on this host's link, both ways (``tc netem``)."""
        if (reason := netem_unsupported()) is not None:
            raise Unsupported(reason)
        netem = ["netem", "delay", f"{delay_ms}ms", f"{jitter_ms}ms", "loss", f"{loss_percent}%"]
        _run("tc", "qdisc", "add", "dev", self.outside_link, "root", *netem)
        self.run("tc", "qdisc", "add", "dev", self.inside_link, "root", *netem)


def worker_subnet() -> str:
    """A /24 of its own for each parallel test worker (pytest-xdist's gw0, gw1 …): two bridges on
    one subnet would route each other's packets. 10.213.0.0/24 outside xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return f"10.213.{int(worker.removeprefix('gw')) % 256}.0/24"


def _remove_leftovers(address: str) -> None:
    """Remove a network left by a test run that was killed before it could clean up (its bridge
    still holds this worker's subnet, and would take the packets meant for the new one): the
    bridge with ``address``, and the namespaces and links of its tag."""
    for line in _run("ip", "-o", "-4", "addr", "show").stdout.splitlines():
        fields = line.split()
        if len(fields) > 3 and fields[3].split("/")[0] == address and fields[1].startswith("lg"):
            tag = fields[1].removesuffix("br")
            for namespace in _run("ip", "netns", "list").stdout.split():
                if namespace.startswith(f"{tag}-"):
                    _run("ip", "netns", "delete", namespace, check=False)
            for link in _run("ip", "-o", "link", "show").stdout.splitlines():
                name = link.split(":")[1].strip().split("@")[0] if ":" in link else ""
                if name.startswith(tag):
                    _run("ip", "link", "delete", name, check=False)


class Network:
    """A bridge and its hosts; use as a context manager so everything is removed afterwards.

    The default subnet is the worker's own (:func:`worker_subnet`): a worker builds one network at
    a time, the names of its links carry its process id."""

    def __init__(self, subnet: str | None = None) -> None:
        if (reason := unsupported()) is not None:
            raise Unsupported(reason)
        subnet = subnet or worker_subnet()
        self.tag = f"lg{os.getpid() % 10000}n{next(_counter)}"  # short: link names have 15 characters
        self.subnet = ipaddress.ip_network(subnet)
        self._addresses = self.subnet.hosts()
        self.bridge = f"{self.tag}br"
        self.address = str(next(self._addresses))  # the root namespace's address on the bridge
        self.hosts: list[Host] = []
        self.processes: list[subprocess.Popen] = []  # started in the root namespace
        _remove_leftovers(self.address)
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        _run("ip", "addr", "add", f"{self.address}/{self.subnet.prefixlen}", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")

    def popen(self, args: Sequence[str], env: dict[str, str], log: IO[Any] | None = None) -> subprocess.Popen:
        """Start a process in the root namespace (the host at :attr:`address`), killed by :meth:`close`."""
        out: Any = log if log is not None else subprocess.DEVNULL
        proc = subprocess.Popen(list(args), env=env, stdout=out, stderr=subprocess.STDOUT)
        self.processes.append(proc)
        return proc

    def add_host(self, name: str) -> Host:
        number = len(self.hosts) + 1
        host = Host(
            name=name,
            namespace=f"{self.tag}-{name}",
            address=str(next(self._addresses)),
            outside_link=f"{self.tag}h{number}",
            inside_link="eth0",
        )
        self.hosts.append(host)  # before it is complete: close() removes what was made
        _run("ip", "netns", "add", host.namespace)
        _run("ip", "link", "add", host.outside_link, "type", "veth", "peer", "name", f"{self.tag}p{number}")
        _run("ip", "link", "set", f"{self.tag}p{number}", "netns", host.namespace)
        _run("ip", "link", "set", host.outside_link, "master", self.bridge)
        _run("ip", "link", "set", host.outside_link, "up")
        host.run("ip", "link", "set", f"{self.tag}p{number}", "name", host.inside_link)
        host.run("ip", "addr", "add", f"{host.address}/{self.subnet.prefixlen}", "dev", host.inside_link)
        host.run("ip", "link", "set", host.inside_link, "up")
        host.run("ip", "link", "set", "lo", "up")
        host.run("ip", "route", "add", "default", "via", self.address)
        return host

    def close(self) -> None:
        for proc in [*self.processes, *(p for host in self.hosts for p in host.processes)]:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        for host in self.hosts:
            _run("ip", "link", "del", host.outside_link, check=False)
            _run("ip", "netns", "del", host.namespace, check=False)
        _run("ip", "link", "del", self.bridge, check=False)

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
