"""Limits on what one client may cost the LM, each through real HTTP against a running LM:
registration floods, spellings of one endpoint, the endpoint policy (here and when connecting),
request bodies and slow requests, the production server under slow and idle sockets, runserver kept
to loopback, and the pages' Content-Security-Policy."""

from __future__ import annotations

import select
import socket
import subprocess

import httpx
import pytest
from asgiref.sync import async_to_sync

from league import actions
from league.bench.server import OVER_LIMIT, ServerBench, production_script
from league.endpoints import ConnectPolicy
from league.models import League, Player
from leagueproto.client import AgentClient, CallFailed
from leagueproto.endpoints import canonical_endpoint
from leagueproto.errors import ErrorCode
from leaguesite.management.commands.runserver import requested_host
from tests.league.lm_support import make_league, message, player_meta, post
from tests.support.servers import Process, free_port, wait_for_port

MB = 1024 * 1024


def _register(url: str, endpoint: str, name: str = "p", league_id: str | None = "test_league") -> httpx.Response:
    fields = {"league_id": league_id} if league_id else {}
    meta = player_meta(endpoint, display_name=name)
    body = message("LEAGUE_REGISTER_REQUEST", f"player:{name}", player_meta=meta, **fields)
    return post(url, {"jsonrpc": "2.0", "id": 1, "method": "register_player", "params": body})


# -- registration floods ------------------------------------------------------------------------
def test_one_address_gets_429_after_its_registrations(lm_server, settings):
    settings.REGISTRATION_RATE_EXEMPT_NETWORKS = []  # the test client is on loopback, like an attacker on the host
    settings.REGISTRATION_RATE_PER_ADDRESS = 5
    make_league(max_players=200, rate_limit_per_minute=100_000)
    statuses = [_register(lm_server, f"http://127.0.0.1:{9600 + n}/mcp", f"p{n}").status_code for n in range(20)]
    assert statuses[:5] == [200] * 5 and set(statuses[5:]) == {429}
    refused = _register(lm_server, "http://127.0.0.1:9700/mcp").json()["result"]
    assert refused["error_code"] == "E017" and refused["retryable"] is True
    assert refused["context"]["per"] == "address" and refused["context"]["limit"] == 5
    assert "too many registrations" in refused["error_description"]
    assert Player.objects.count() == 5


def test_a_league_gets_429_after_its_registrations_whatever_the_address(lm_server, settings):
    settings.REGISTRATION_RATE_EXEMPT_NETWORKS = []
    settings.REGISTRATION_RATE_PER_LEAGUE = 3
    make_league(rate_limit_per_minute=100_000)
    make_league("other_league", rate_limit_per_minute=100_000)
    statuses = [_register(lm_server, f"http://127.0.0.1:{9610 + n}/mcp", f"p{n}").status_code for n in range(5)]
    assert statuses == [200, 200, 200, 429, 429]
    assert _register(lm_server, "http://127.0.0.1:9620/mcp", league_id="other_league").status_code == 200


def test_the_lm_machine_itself_is_not_limited(lm_server, settings):
    settings.REGISTRATION_RATE_PER_ADDRESS = 2  # loopback stays exempt (demo, bench, the organiser's referees)
    make_league(rate_limit_per_minute=100_000)
    replies = [_register(lm_server, f"http://127.0.0.1:{9630 + n}/mcp", f"p{n}").json()["result"] for n in range(6)]
    assert [r["status"] for r in replies] == ["ACCEPTED"] * 6


# -- one seat per endpoint, however it is spelled -----------------------------------------------
SPELLINGS = [
    "http://localhost:9301/mcp",
    "HTTP://LOCALHOST:9301/mcp/",
    "http://[::1]:9301/mcp",
    "http://127.0.0.1:9301/mcp?seat=2",
    "http://127.0.0.1:9301/mcp#seat3",
    "http://127.0.0.1:9301/mcp/",
    "http://127.0.0.2:9301/mcp",
    "http://127.0.0.1:9301/mcp/.",
    "http://127.0.0.1:9301//mcp",
    "http://127.0.0.1:9301/%6dcp",
    "http://127.0.0.1:9301/x/../mcp",
    "http://127.0.0.1:9301/mcp;x",
]


def test_spellings_of_one_endpoint_hold_one_seat(lm_server):
    make_league(rate_limit_per_minute=100_000)
    assert _register(lm_server, "http://127.0.0.1:9301/mcp", "first").json()["result"]["status"] == "ACCEPTED"
    for n, spelling in enumerate(SPELLINGS):
        # From the endpoint's own machine: the same agent again, in the same seat.
        reply = _register(lm_server, spelling, f"copy{n}").json()["result"]
        assert (reply["status"], reply["player_id"]) == ("ACCEPTED", "P01"), spelling
        # From another machine: refused, whatever the spelling.
        reg = actions.register_player(None, player_meta(spelling, display_name="x"), None, client_host="10.9.9.9")
        assert (reg.status, reg.agent_id) == ("REJECTED", "P01"), spelling
        assert reg.reason.startswith("Endpoint already registered"), spelling
    for legacy in ("http://127.1:9301/mcp", "http://0177.0.0.1:9301/mcp", "http://2130706433:9301/mcp"):
        reply = _register(lm_server, legacy, "legacy").json()["result"]
        assert reply["status"] == "REJECTED" and "legacy spelling of 127.0.0.1" in reply["reason"], legacy
    # The default port is the port: :80 and no port are one endpoint.
    assert _register(lm_server, "http://127.0.0.1/mcp", "eighty").json()["result"]["status"] == "ACCEPTED"
    assert _register(lm_server, "http://127.0.0.1:80/mcp/", "again").json()["result"]["player_id"] == "P02"
    assert Player.objects.count() == 2


def _loopback_name() -> str | None:
    """A host name of this machine other than localhost (its own name, when it resolves to loopback)."""
    try:
        infos = socket.getaddrinfo(socket.gethostname(), 80)
    except OSError:
        return None
    return socket.gethostname() if {i[4][0] for i in infos} <= {"127.0.0.1", "::1"} else None


def test_a_host_name_of_this_machine_is_the_seat_of_127_0_0_1(lm_server):
    name = _loopback_name()
    if name is None:
        pytest.skip("this machine's name does not resolve to loopback")
    make_league(rate_limit_per_minute=100_000)
    assert _register(lm_server, "http://127.0.0.1:9302/mcp", "first").json()["result"]["player_id"] == "P01"
    reg = actions.register_player(
        None, player_meta(f"http://{name}:9302/mcp", display_name="x"), None, client_host="10.9.9.9"
    )
    assert (reg.status, reg.agent_id) == ("REJECTED", "P01")
    assert Player.objects.get().canonical_endpoint == "http://127.0.0.1:9302/mcp"


def test_canonical_endpoint_is_one_form_per_endpoint():
    forms = {canonical_endpoint(s) for s in ["http://127.0.0.1:9301/mcp", *SPELLINGS, "http://0x7f.1:9301/mcp"]}
    assert forms == {"http://127.0.0.1:9301/mcp"}
    assert canonical_endpoint("https://Agent.Example.org./mcp") == "https://agent.example.org:443/mcp"


# -- the endpoint policy ------------------------------------------------------------------------
def test_credentials_service_ports_and_the_lms_own_address_are_refused(lm_server, settings):
    make_league(rate_limit_per_minute=100_000)
    port = int(lm_server.split(":")[2].split("/")[0])
    refused = {
        "http://user:secret@127.0.0.1:9401/mcp": "may not carry credentials",
        "http://127.0.0.1:6379/": "Redis port",
        "http://127.0.0.1:5432/mcp": "PostgreSQL port",
        "http://127.0.0.1:22/mcp": "SSH port",
        f"http://127.0.0.1:{port}/admin/": "League Manager's own address",
        f"http://localhost:{port}/mcp": "League Manager's own address",
    }
    for n, (endpoint, why) in enumerate(refused.items()):
        reply = _register(lm_server, endpoint, f"p{n}").json()["result"]
        assert reply["status"] == "REJECTED" and why in reply["reason"], (endpoint, reply)
    assert not Player.objects.exists()
    settings.ENDPOINT_ALLOW_SERVICE_PORTS = True  # an organiser who wants agents there may allow it
    assert _register(lm_server, "http://127.0.0.1:6379/", "redis").json()["result"]["status"] == "ACCEPTED"


def test_the_address_is_checked_again_when_connecting(lm_server):
    """The conductor's client checks each address it connects to, not only what the name
    resolved to at registration: a name now pointing outside every league's networks (DNS
    rebinding), or an address no longer allowed, is not connected to."""
    league = make_league(allowed_networks="10.0.0.0/8", rate_limit_per_minute=100_000)
    policy = ConnectPolicy()
    policy.REFRESH = 0.0  # read the leagues on every check: the test changes them

    async def ping(endpoint: str) -> dict:
        client = AgentClient(address_check=policy)
        try:
            return (await client.call(endpoint, "ping", {}, timeout=5)).reply
        finally:
            await client.close()

    port = lm_server.split(":")[2].split("/")[0]
    for endpoint in (f"http://localhost:{port}/mcp", f"http://127.0.0.1:{port}/mcp"):
        with pytest.raises(CallFailed) as refused:
            async_to_sync(ping)(endpoint)
        assert refused.value.code is ErrorCode.CONNECTION_ERROR and "outside the league's allowed networks" in str(
            refused.value
        )
    League.objects.filter(pk=league.pk).update(allowed_networks="10.0.0.0/8,127.0.0.0/8")
    assert async_to_sync(ping)(f"http://localhost:{port}/mcp") == {}


# -- request bodies and slow requests ----------------------------------------------------------
def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    return sock


def _response(sock: socket.socket) -> bytes:
    """What the server answered, up to the end of its headers (or the close)."""
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    return data


def _status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0


def _head(path: str, **headers: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def declared_too_large(port: int, path: str) -> int:
    """Headers announcing 50 MB and not one byte of body: the answer comes on the headers alone."""
    with _connect(port) as sock:
        sock.sendall(_head(path, Content_Length=str(50 * MB)))
        return _status(_response(sock))


def chunked_too_large(port: int, path: str, total: int = 20 * MB) -> int:
    """A chunked body (no length announced) sent until the server answers."""
    chunk = b"%x\r\n%s\r\n" % (64 * 1024, b"x" * 64 * 1024)
    with _connect(port) as sock:
        sock.sendall(_head(path, Transfer_Encoding="chunked"))
        # poll, not select: a long suite holds descriptors above select's limit of 1024
        answered = select.poll()
        answered.register(sock, select.POLLIN)
        for _ in range(total // (64 * 1024)):
            if answered.poll(0):
                break  # answered: stop sending
            try:
                sock.sendall(chunk)
            except OSError:
                break
        return _status(_response(sock))


def trickled(port: int, path: str) -> int:
    """A request whose body stops arriving after its headers. The server must answer."""
    with _connect(port) as sock:
        sock.sendall(_head(path, Content_Length="1000") + b'{"jsonrpc"')
        return _status(_response(sock))


def test_large_bodies_are_refused_before_they_are_read_and_slow_ones_time_out(lm_server, settings):
    settings.SITE_MAX_BODY_BYTES = 100_000
    settings.REQUEST_READ_TIMEOUT = 1
    port = int(lm_server.split(":")[2].split("/")[0])
    for path in ("/mcp", "/admin/login/", "/api/leagues/"):
        assert declared_too_large(port, path) == 413, path
        assert chunked_too_large(port, path) == 413, path
    assert trickled(port, "/admin/login/") == 408
    assert trickled(port, "/mcp") == 408
    # A client sending a body a little over the limit, as a whole, reads its 413 (not a reset).
    over = httpx.post(lm_server, content=b"[" + b"1," * (settings.MCP_MAX_BODY_BYTES // 2) + b"1]", timeout=30)
    assert over.status_code == 413 and over.json()["error"]["code"] == -32600
    # Within the limits all is as before.
    assert httpx.get(lm_server.replace("/mcp", "/admin/login/")).status_code == 200


# -- the production server (docs/operations.md, "The server") ------------------------------------
def test_the_production_command_refuses_big_bodies_unread_and_answers_beside_slow_and_idle_sockets(agent_env):
    """The command docs/operations.md gives organisers, read from that page and run: with sockets
    that never finish their headers and sockets that send nothing held open, other clients get
    their answers; a /mcp POST announcing 1 GiB gets 413, and one sending its body blindly is cut
    off long before the body is out (``bench server`` does the same with 2,000 + 3,000 sockets)."""
    report = ServerBench(slow=60, idle=90, probes=10, env=agent_env).run()

    assert report["held_by_the_lm"]["sockets"] >= 150
    assert report["under_load"]["statuses"] == {"200": 10}
    big, blind = report["over_limit_post"], report["over_limit_post_sent_blindly"]
    assert big["status"] == 413
    assert big["body_bytes_sent"] < OVER_LIMIT // 10
    assert blind["body_bytes_sent"] < OVER_LIMIT // 10
    assert report["valid"] is True


def test_the_production_command_is_the_documented_one():
    script = production_script("127.0.0.1", 8123)
    assert "uvicorn leaguesite.asgi:application --host 127.0.0.1 --port 8123" in script
    # What the server's settings are chosen for (docs/operations.md says why).
    assert "--h11-max-incomplete-event-size 16384" in script and "--limit-concurrency" not in script


def test_headers_without_end_are_refused_by_the_production_command(agent_env, tmp_path):
    """A header that never ends holds at most the server's 16 KiB before 400 and a close."""
    port = free_port()
    server = Process(["bash", "-c", production_script("127.0.0.1", port)], agent_env, str(tmp_path / "lm.log"))
    try:
        wait_for_port(port)
        with _connect(port) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Long: ")
            try:
                for _ in range(64):
                    sock.sendall(b"a" * 4096)
            except OSError:
                pass  # closed once over the limit
            assert _status(_response(sock)) == 400
    finally:
        server.terminate()


def test_the_production_command_sends_the_pages_pushes_uncompressed(agent_env, tmp_path):
    """A page's websocket offers per-message compression (browsers do); the production server
    declines it, so a patch encoded once for every viewer is not compressed again per viewer."""
    import asyncio

    import websockets

    port = free_port()
    server = Process(["bash", "-c", production_script("127.0.0.1", port)], agent_env, str(tmp_path / "lm.log"))

    async def extensions() -> str | None:
        url = f"ws://127.0.0.1:{port}/ws/leagues/"
        async with websockets.connect(url, origin=f"http://127.0.0.1:{port}", compression="deflate") as ws:
            return ws.response.headers.get("Sec-WebSocket-Extensions")

    try:
        wait_for_port(port)
        assert asyncio.run(extensions()) is None
    finally:
        server.terminate()


@pytest.mark.parametrize("address", ["0.0.0.0:8000", "192.168.1.10:8000", "[::]:8000", "league.lan:8000"])
def test_runserver_refuses_an_address_other_than_loopback(manage_py, address):
    done = subprocess.run(
        [*manage_py, "runserver", address, "--noreload", "--skip-checks"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "serves this machine only" in done.stderr and "uvicorn leaguesite.asgi:application" in done.stderr


def test_runserver_on_loopback_serves_the_pages_the_agents_endpoint_and_the_websockets(agent_env, manage_py, tmp_path):
    """daphne is no app of the site: runserver imports its server itself, and serves all of it."""
    import asyncio

    import websockets

    port = free_port()
    args = [*manage_py, "runserver", f"127.0.0.1:{port}", "--noreload", "--skip-checks"]
    server = Process(args, agent_env, str(tmp_path / "runserver.log"))

    async def handshake() -> int:
        url = f"ws://127.0.0.1:{port}/ws/leagues/"
        async with websockets.connect(url, origin=f"http://127.0.0.1:{port}", open_timeout=30) as ws:
            return ws.response.status_code

    try:
        wait_for_port(port, timeout=60)
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=10).status_code == 200
        ping = httpx.post(
            f"http://127.0.0.1:{port}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=10
        )
        assert ping.json() == {"jsonrpc": "2.0", "id": 1, "result": {}}
        assert asyncio.run(handshake()) == 101
    finally:
        server.terminate()
    assert "Daphne" in (tmp_path / "runserver.log").read_text()


@pytest.mark.parametrize(
    ("addrport", "ipv6", "host"),
    [
        (None, False, "127.0.0.1"),
        ("8001", False, "127.0.0.1"),
        ("8001", True, "::1"),
        ("[::1]:8001", False, "::1"),
        ("localhost:8001", False, "localhost"),
        ("0.0.0.0", False, "0.0.0.0"),
    ],
)
def test_runserver_reads_the_address_it_would_bind(addrport, ipv6, host):
    assert requested_host(addrport, ipv6) == host


# -- Content-Security-Policy ---------------------------------------------------------------------
def test_pages_carry_a_content_security_policy(lm_server):
    base = lm_server.rsplit("/mcp", 1)[0]
    make_league(rate_limit_per_minute=100_000)
    for path in ("/", "/leagues/test_league/", "/admin/login/", "/api/docs/"):
        response = httpx.get(base + path, timeout=10)
        assert response.status_code == 200, path
        policy = dict(
            part.strip().split(" ", 1) for part in response.headers["Content-Security-Policy"].split(";") if part
        )
        assert policy["script-src"] == "'self'" and policy["connect-src"] == "'self'", path
        assert policy["object-src"] == "'none'" and policy["frame-ancestors"] == "'none'", path
        # No page relies on an inline script (the policy would block it).
        assert "<script>" not in response.text, path
