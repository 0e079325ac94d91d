"""Which agent endpoints the LM accepts, and when two spellings name the same endpoint.

An endpoint is a URL the LM and the referees will POST to, so it is an instruction to make
requests on someone's behalf. The policy (``endpoint_problem``) refuses, with one sentence each:

* anything but an ``http://`` or ``https://`` URL with a host, and credentials in the URL
  (``user:password@``): agents authenticate with tokens, and such URLs end up in logs and pages;
* an IPv4 address written in a legacy form (``127.1``, ``0177.0.0.1``, ``2130706433``): they
  mean an address other than the one a reader sees, and the LM's HTTP client refuses them;
* the well-known ports of other services (databases, brokers, mail, SSH: ``SERVICE_PORTS``)
  unless ``ENDPOINT_ALLOW_SERVICE_PORTS`` is on, and the LM's own address and port;
* a host that does not resolve, or resolves to a link-local or cloud metadata address (always),
  or outside the league's ``allowed_networks``.

``ConnectPolicy`` re-checks the address a connection actually goes to (the name may resolve
elsewhere by then: DNS rebinding); leagueproto's client calls it for every address it connects to.

The address and port rules themselves live in leagueproto/endpoint_policy.py, shared with the
referees, which apply them when they connect to players; this module adds the LM's settings,
its own address and its leagues' networks.

``seat_endpoint`` is the form registrations compare (``canonical_endpoint`` of leagueproto, and a
host name of this machine as 127.0.0.1), stored once per agent and looked up by index: one agent
cannot hold several seats with spellings of one URL (host case, ``localhost`` / ``127.0.0.1`` /
``[::1]``, the default port, ``/mcp/``, ``//mcp``, ``/%6dcp``, ``/x/../mcp``, ``/mcp;x``, a query
or fragment).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from leagueproto.endpoint_policy import (
    DEFAULT_PORTS,
    IPAddress,
    IPNetwork,
    Verdicts,
    address_problem,
    ip_of,
    is_local_address,
    legacy_ipv4,
    network_names,
    networks,
    port_and_address,
    this_machine,
)
from leagueproto.endpoint_policy import SERVICE_PORTS as SERVICE_PORTS  # league/bench reads it here
from leagueproto.endpoint_policy import port_problem as service_port_problem

# Every address: on the relay address only the metadata and link-local rules apply.
ANYWHERE = networks("0.0.0.0/0,::/0")


# -- where the LM itself serves ------------------------------------------------------------------
@dataclass(frozen=True)
class Serving:
    """How the current request reached the LM: the Host it named and the port it arrived on."""

    host: str  # the Host header's name part, lower case ("" when absent)
    ports: frozenset[int]  # the listening port and the Host header's port (or its scheme's default)


# The ASGI scope of the request being handled (leaguesite/limits.py sets it for every request);
# read only when a registration needs it, so the other calls pay for no parsing.
request_scope: ContextVar[dict[str, Any] | None] = ContextVar("request_scope", default=None)


def serving() -> Serving | None:
    """Where the current request reached the LM, or None outside a request (commands, admin)."""
    scope = request_scope.get()
    return serving_from_scope(scope) if scope is not None else None


def serving_from_scope(scope: dict[str, Any]) -> Serving:
    """The ``Serving`` of an ASGI request."""
    raw = next((v for k, v in scope.get("headers", ()) if k == b"host"), b"").decode("latin-1")
    ports: set[int] = set()
    server = scope.get("server")
    if server and isinstance(server[1], int):
        ports.add(server[1])
    try:
        parts = urlsplit(f"//{raw}")
        host, port = (parts.hostname or ""), parts.port
    except ValueError:
        host, port = "", None
    ports.add(port or DEFAULT_PORTS.get(scope.get("scheme", "http"), 80))
    return Serving(host.rstrip("."), frozenset(ports))


# -- the policy ----------------------------------------------------------------------------------
def port_problem(port: int) -> str | None:
    """The service-port rule with this site's ``ENDPOINT_ALLOW_SERVICE_PORTS``."""
    return service_port_problem(port, settings.ENDPOINT_ALLOW_SERVICE_PORTS)


def endpoint_problem(endpoint: str, allowed_networks: str) -> str | None:
    """Why an agent endpoint is refused, or None. Resolves the host (agents must be reachable)."""
    try:
        parts = urlsplit(endpoint)
        port = parts.port
    except ValueError:
        return "Endpoint is not a valid URL"
    if parts.scheme not in ("http", "https"):
        return "Endpoint must be an http:// or https:// URL"
    if not parts.hostname:
        return "Endpoint has no host"
    if "@" in parts.netloc:
        return "Endpoint may not carry credentials (user:password@): agents authenticate with their token"
    host = parts.hostname
    legacy = legacy_ipv4(host)
    if legacy is not None and str(legacy) != host:
        return f"Endpoint host {host} is a legacy spelling of {legacy}: write {legacy}"
    effective_port = port or DEFAULT_PORTS[parts.scheme]
    problem = port_problem(effective_port)
    if problem:
        return problem
    try:
        infos = socket.getaddrinfo(host, effective_port, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return f"Endpoint host {host} does not resolve"
    allowed = networks(allowed_networks)
    addresses = {ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos}
    for address in sorted(addresses, key=str):
        problem = address_problem(address, allowed)
        if problem:
            return problem
    here = serving()
    if (
        here is not None
        and effective_port in here.ports
        and (host.rstrip(".") == here.host or any(is_local_address(str(a)) for a in addresses))
    ):
        return "Endpoint is the League Manager's own address: give your agent's URL"
    return None


def endpoint_holder(model: Any, league_pk: int, seat: str) -> Any:
    """The agent of ``model`` in the league, not removed, that holds the seat ``seat`` (a
    ``seat_endpoint``), or None: one indexed lookup, whatever the league's size."""
    from league.models import AgentStatus

    holders = model.objects.filter(league_id=league_pk, canonical_endpoint=seat).exclude(status=AgentStatus.REMOVED)
    # Most registrations find none: ask for the key only, and read the row when there is one.
    pk = holders.order_by().values_list("pk", flat=True).first()
    return None if pk is None else model.objects.get(pk=pk)


# -- at connection time --------------------------------------------------------------------------
def _port_and_address(port: int, address: str) -> tuple[IPAddress | None, str]:
    """The first checks of a connection, with this site's ``ENDPOINT_ALLOW_SERVICE_PORTS``."""
    return port_and_address(port, address, settings.ENDPOINT_ALLOW_SERVICE_PORTS)


class ConnectPolicy:
    """The check leagueproto's client runs on every address it is about to connect to (the
    conductor's client: ``AgentClient(address_check=ConnectPolicy())``).

    The league an address belongs to is not known down there, so an address passes when some
    league not finished allows its network (read again every few seconds); metadata and
    link-local addresses and the service ports never pass. The host and port of a relay endpoint
    (league/relay/) pass too: the LM gave it to the player, on its own address, whatever the
    leagues' networks (a public LM for students behind NAT).
    """

    REFRESH = 5.0

    def __init__(self, league_pk: int | None = None) -> None:
        """``league_pk``: that league's networks and relay endpoints pass too, finished or not
        (the end notices of a league just cancelled: league/conductor/farewell.py)."""
        self._league_pk = league_pk
        self._allowed: list[IPNetwork] = []
        self._relay: set[tuple[str, int]] = set()
        self._loaded_at = float("-inf")
        self._reloading: asyncio.Future[None] | None = None
        # Verdicts per (host, port, address), kept until a reload changes the rules: the
        # conductor connects to the same agents thousands of times a league.
        self._verdicts = Verdicts()

    def _leagues(self):  # -> QuerySet[League]: the leagues whose agents may be called
        from django.db.models import Q

        from league.models import League

        live = ~Q(status__in=(League.Status.COMPLETED, League.Status.CANCELLED))
        return League.objects.filter(live | Q(pk=self._league_pk) if self._league_pk is not None else live)

    def _relay_targets(self) -> set[tuple[str, int]]:
        """(host, port) of the relay endpoints the LM assigned in leagues not finished."""
        from league.models import Player

        live = Player.objects.filter(connection=Player.Connection.RELAY, league__in=self._leagues())
        found = set()
        for endpoint in live.order_by().values_list("endpoint", flat=True).distinct():
            try:
                parts = urlsplit(endpoint)
                found.add(((parts.hostname or "").lower(), parts.port or (443 if parts.scheme == "https" else 80)))
            except ValueError:
                continue
        return found

    def _load(self) -> list[IPNetwork]:
        found: dict[str, None] = {}
        for value in self._leagues().values_list("allowed_networks", flat=True):
            found.update(dict.fromkeys(network_names(value)))
        return [ipaddress.ip_network(n) for n in found]

    async def __call__(self, host: str, port: int, address: str) -> str | None:
        """Why ``address`` (what ``host`` resolved to) may not be connected to on ``port``, or None."""
        if time.monotonic() - self._loaded_at > self.REFRESH:
            # One reload at a time, and every call that found the rules stale waits for it: a
            # round's hundreds of calls in flight read the leagues once, not once each.
            reloading = self._reloading
            if reloading is None or reloading.get_loop() is not asyncio.get_running_loop():
                reloading = self._reloading = asyncio.ensure_future(self._reload())
            await asyncio.shield(reloading)
        key = (host, port, address, settings.ENDPOINT_ALLOW_SERVICE_PORTS)
        return self._verdicts.of(key, lambda: self._judge(host, port, address))

    async def _reload(self) -> None:
        from asgiref.sync import sync_to_async

        try:
            allowed = await sync_to_async(self._load)()
            relay = await sync_to_async(self._relay_targets)()
            if allowed != self._allowed or relay != self._relay:
                self._allowed, self._relay, self._verdicts = allowed, relay, Verdicts()
            self._loaded_at = time.monotonic()
        finally:
            if self._reloading is asyncio.current_task():
                self._reloading = None

    def _judge(self, host: str, port: int, address: str) -> str | None:
        parsed, problem = _port_and_address(port, address)
        if parsed is None:
            return problem
        if (host.lower(), port) in self._relay:
            # Outside the leagues' networks the LM's own relay address passes; a metadata or
            # link-local address never does, whatever named it.
            return address_problem(parsed, ANYWHERE)
        return address_problem(parsed, self._allowed)


class NetworksPolicy:
    """The connection-time check for one fixed list of networks (the "Check my agent" page's,
    ``CHECKAGENT_ALLOWED_NETWORKS``): what ``endpoint_problem`` refuses before a call, checked
    again on the address actually connected to (a name may resolve elsewhere by then), including
    this process's own serving address."""

    def __init__(self, allowed_networks: str) -> None:
        self._allowed = networks(allowed_networks)

    async def __call__(self, host: str, port: int, address: str) -> str | None:
        parsed, problem = _port_and_address(port, address)
        if parsed is None:
            return problem
        problem = address_problem(parsed, self._allowed)
        if problem:
            return problem
        here = serving()
        if here is not None and port in here.ports and is_local_address(str(parsed)):
            return "Endpoint is the League Manager's own address: give your agent's URL"
        return None


# -- where a registration comes from -------------------------------------------------------------
def network_of(client_host: str | None) -> str:
    """The network a client address belongs to for seat counting and registration buckets: its
    /24 (IPv4) or /64 (IPv6), as ``10.1.2.0/24``; "" when there is no address or it is no IP.
    Rotating addresses inside one network (IPv6 hands a host a whole /64) stays one network."""
    if not client_host:
        return ""
    address = ip_of(client_host)
    if address is None:
        return ""
    prefix = 24 if address.version == 4 else 64
    return str(ipaddress.ip_network(f"{address}/{prefix}", strict=False))


def same_host(client_host: str | None, seat: str) -> bool:
    """Whether a request from ``client_host`` comes from the machine that serves the seat
    ``seat`` (a ``seat_endpoint``): the client's address is one the endpoint's host resolves to,
    or both are addresses of the LM's own machine. What a registration without a token must show
    to get back the identity of its endpoint (docs/protocol.md, "Registering again")."""
    client = ip_of(client_host) if client_host else None
    if client is None:
        return False
    try:
        parts = urlsplit(seat)
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return False
    literal = ip_of(host)
    if literal is not None:
        addresses = {literal}
    else:
        try:
            infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
        except (OSError, UnicodeError):
            return False
        addresses = {a for a in (ip_of(info[4][0]) for info in infos) if a is not None}
    if client in addresses:
        return True
    local = this_machine(client) or is_local_address(str(client))
    return local and any(this_machine(a) or is_local_address(str(a)) for a in addresses)
