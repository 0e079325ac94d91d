"""Which addresses an agent may be reached at: the rules the League Manager and the referees share.

An agent endpoint is an instruction to make requests on someone's behalf, so whoever connects to
one (the LM's conductor, a referee) checks the address it is about to connect to:

* link-local and cloud metadata addresses are never an agent, whatever the networks;
* the address must lie in the league's allowed networks (``DEFAULT_ALLOWED_NETWORKS`` unless the
  league says otherwise);
* the well-known ports of other services (``SERVICE_PORTS``) are refused unless allowed;
* an address is read in any spelling a connection would use it in (IPv4-mapped IPv6 as IPv4).

Pure functions of their arguments (no settings, no clock): the LM's league/endpoints.py adds its
settings and database to them, the referee (referee/agent.py) the networks its START_MATCH
messages carry. :class:`AddressPolicy` is the check ``leagueproto.client.AgentClient`` runs on
every address it connects to (``address_check``), so a name that resolves elsewhere since it was
registered (DNS rebinding) is not followed.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
from collections.abc import Callable, Hashable, Iterable

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Where a league's agents may live unless its organiser says otherwise: loopback and the private
# ranges (a class network).
DEFAULT_ALLOWED_NETWORKS = "127.0.0.0/8,::1/128,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16"
LOOPBACK_NETWORKS = "127.0.0.0/8,::1/128"
# Cloud metadata services: never an agent, whatever network they sit in.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254")
)
LINK_LOCAL = (ipaddress.ip_network("169.254.0.0/16"), ipaddress.ip_network("fe80::/10"))
DEFAULT_PORTS = {"http": 80, "https": 443}
# Ports other services listen on: an endpoint there aims requests at a database, a broker or a
# mail server rather than at an agent. The name goes into the refusal. None is in 8000-9999,
# where agents listen (runplayer, runreferee and the docs' examples use 8001-8199, tests 9101-…).
SERVICE_PORTS: dict[int, str] = {
    21: "FTP",
    22: "SSH",
    23: "Telnet",
    25: "SMTP",
    53: "DNS",
    110: "POP3",
    111: "RPC portmapper",
    135: "MS RPC",
    139: "NetBIOS",
    143: "IMAP",
    389: "LDAP",
    445: "SMB",
    465: "SMTP",
    587: "SMTP",
    993: "IMAP",
    995: "POP3",
    1433: "SQL Server",
    1521: "Oracle",
    1883: "MQTT",
    2049: "NFS",
    2375: "Docker",
    2376: "Docker",
    2379: "etcd",
    3306: "MySQL",
    3389: "RDP",
    4222: "NATS",
    5432: "PostgreSQL",
    5672: "AMQP",
    5984: "CouchDB",
    6379: "Redis",
    6443: "Kubernetes API",
    10250: "Kubelet",
    11211: "Memcached",
    15672: "RabbitMQ management",
    27017: "MongoDB",
}


# -- reading addresses ---------------------------------------------------------------------------
def legacy_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """The address ``host`` means in the BSD ``inet_aton`` notations (``127.1``, ``0x7f.1``,
    ``0177.0.0.1``, ``2130706433``), or None when it is not one of them."""
    parts = host.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    values = []
    for part in parts:
        try:
            if part.lower().startswith("0x"):
                values.append(int(part[2:], 16))
            elif len(part) > 1 and part.startswith("0"):
                values.append(int(part, 8))
            elif part.isdigit():
                values.append(int(part))
            else:
                return None
        except ValueError:
            return None
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (4 - len(head)):
        return None
    number = last
    for index, value in enumerate(head):
        number += value << (8 * (3 - index))
    return ipaddress.IPv4Address(number)


def ip_of(host: str) -> IPAddress | None:
    """The address a host literal names in any spelling (IPv4-mapped IPv6 as IPv4), else None."""
    try:
        address = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return legacy_ipv4(host)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def this_machine(address: IPAddress) -> bool:
    """Loopback or the unspecified address: this machine whatever its interfaces."""
    return address.is_loopback or address.is_unspecified


@functools.lru_cache(maxsize=256)
def is_local_address(address: str) -> bool:
    """Whether ``address`` belongs to this machine: it can be bound to (no list of interfaces to
    read, and it covers every address the kernel would answer on)."""
    parsed = ipaddress.ip_address(address)
    if this_machine(parsed):
        return True
    family = socket.AF_INET6 if parsed.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((address, 0))
    except OSError:
        return False
    return True


def networks(allowed: str | Iterable[str]) -> list[IPNetwork]:
    """The networks of ``allowed``: a league's comma-separated ``allowed_networks``, or a list of
    networks as START_MATCH carries them (entries that do not parse are skipped)."""
    if isinstance(allowed, str):
        return list(_networks_of(allowed))
    items = tuple(allowed)
    if all(type(item) is str for item in items):
        return list(_networks_of_items(items))
    return _parsed(items)


@functools.lru_cache(maxsize=256)
def network_names(allowed: str) -> tuple[str, ...]:
    """The networks of a league's ``allowed_networks`` as START_MATCH carries them (each in its
    canonical text). Kept: every START_MATCH of a league carries the same list (writing an IPv6
    network out is ~10 µs)."""
    return tuple(str(net) for net in _networks_of(allowed))


@functools.lru_cache(maxsize=256)
def _networks_of(allowed: str) -> tuple[IPNetwork, ...]:
    # Kept: every registration checks its endpoint against its league's setting, which is parsed
    # once here instead (parsing it each time was ~4 % of the LM's CPU in a registration burst).
    return tuple(_parsed(allowed.split(",")))


@functools.lru_cache(maxsize=256)
def _networks_of_items(items: tuple[str, ...]) -> tuple[IPNetwork, ...]:
    # Kept: a referee is sent the same list with every START_MATCH of a league.
    return tuple(_parsed(items))


def _parsed(items: Iterable[str]) -> list[IPNetwork]:
    found = []
    for item in items:
        if isinstance(item, str) and item.strip():
            try:
                found.append(ipaddress.ip_network(item.strip(), strict=False))
            except ValueError:
                continue
    return found


# -- the rules -----------------------------------------------------------------------------------
def address_problem(address: IPAddress, allowed: list[IPNetwork]) -> str | None:
    """Why an agent may not be reached at ``address``, or None."""
    if address in METADATA_ADDRESSES or any(address in net for net in LINK_LOCAL):
        return f"Endpoint address {address} is link-local or a metadata service"
    if not any(address.version == net.version and address in net for net in allowed):
        return f"Endpoint address {address} is outside the league's allowed networks"
    return None


def port_problem(port: int, allow_service_ports: bool = False) -> str | None:
    """Why an agent may not be reached on ``port``, or None."""
    if port in SERVICE_PORTS and not allow_service_ports:
        return (
            f"Endpoint port {port} is the {SERVICE_PORTS[port]} port; agents listen on other ports"
            " (the organiser may allow service ports with ENDPOINT_ALLOW_SERVICE_PORTS)"
        )
    return None


def port_and_address(port: int, address: str, allow_service_ports: bool = False) -> tuple[IPAddress | None, str]:
    """The first checks of a connection: the port, and ``address`` as an IP address (None and
    why not, when either fails)."""
    problem = port_problem(port, allow_service_ports)
    if problem:
        return None, problem
    parsed = ip_of(address)
    if parsed is None:
        return None, f"Endpoint address {address} is not an IP address"
    return parsed, ""


class Verdicts:
    """Connection verdicts kept by key (the caller's judgement's inputs), at most ``KEPT`` of them:
    past that, all are forgotten and judged again, so a client sending new names cannot grow it."""

    KEPT = 4096

    def __init__(self) -> None:
        self._kept: dict[Hashable, str | None] = {}

    def of(self, key: Hashable, judge: Callable[[], str | None]) -> str | None:
        """The verdict kept for ``key``, else ``judge()``'s, kept."""
        try:
            return self._kept[key]
        except KeyError:
            pass
        verdict = judge()
        if len(self._kept) >= self.KEPT:
            self._kept.clear()
        self._kept[key] = verdict
        return verdict


class AddressPolicy:
    """The connection-time check for networks known to this process (``AgentClient(address_check=…)``).

    ``allowed``: the networks agents may be reached in; ``allow_service_ports``: whether the
    service ports are let through; ``passes``: (host, port) pairs that skip the network rule (never
    the metadata rule), e.g. the League Manager's own address, where relay endpoints live;
    ``own_port``: this process's own port, refused on an address of this machine (an agent
    aimed at the process calling it). All may be changed while the client is in use.

    A verdict is kept per (host, port, address) until one of those changes: a referee connects to
    the same few players thousands of times a league, and judging an address afresh (parsing it,
    testing it against each network) was ~7 % of a referee's CPU.
    """

    def __init__(
        self,
        allowed: list[IPNetwork],
        *,
        allow_service_ports: bool = False,
        passes: Iterable[tuple[str, int]] = (),
        own_port: int | None = None,
    ) -> None:
        self._verdicts = Verdicts()
        self.allowed = allowed
        self.allow_service_ports = allow_service_ports
        self.passes = {(host.lower(), port) for host, port in passes}
        self.own_port = own_port

    def __setattr__(self, name: str, value: object) -> None:
        # Any change of the rules' inputs makes every kept verdict stale.
        super().__setattr__(name, value)
        if name != "_verdicts":
            super().__setattr__("_verdicts", Verdicts())

    async def __call__(self, host: str, port: int, address: str) -> str | None:
        """Why ``address`` (what ``host`` resolved to) may not be connected to on ``port``, or None."""
        return self._verdicts.of((host, port, address), lambda: self.judge(host, port, address))

    def judge(self, host: str, port: int, address: str) -> str | None:
        """The verdict on one connection, worked out afresh."""
        parsed, problem = port_and_address(port, address, self.allow_service_ports)
        if parsed is None:
            return problem
        if parsed in METADATA_ADDRESSES or any(parsed in net for net in LINK_LOCAL):
            return address_problem(parsed, self.allowed)
        if port == self.own_port and is_local_address(str(parsed)):
            return "Endpoint is this agent's own address: give the player's URL"
        if (host.lower(), port) in self.passes:
            return None
        return address_problem(parsed, self.allowed)
