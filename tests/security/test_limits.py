"""Limits on what one client may cost the LM, each through real HTTP against a running LM:
registration floods, spellings of one endpoint, the endpoint policy (here and when connecting),
request bodies and slow requests (uvicorn and daphne), and the pages' Content-Security-Policy."""

from __future__ import annotations

import select
import socket
import threading
from pathlib import Path

import httpx
import pytest
from asgiref.sync import async_to_sync

from league import actions
from league.endpoints import ConnectPolicy, canonical_endpoint
from league.models import League, Player
from leagueproto.client import AgentClient, CallFailed
from leagueproto.errors import ErrorCode
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


def trickled(port: int, path: str, *, headers_done: bool) -> int:
    """A request that stops arriving: in its body, or in its headers. The server must answer."""
    with _connect(port) as sock:
        if headers_done:
            sock.sendall(_head(path, Content_Length="1000") + b'{"jsonrpc"')
        else:
            sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode())
        return _status(_response(sock))


def test_uvicorn_refuses_large_bodies_before_reading_them_and_slow_ones(lm_server, settings):
    settings.SITE_MAX_BODY_BYTES = 100_000
    settings.REQUEST_READ_TIMEOUT = 1
    port = int(lm_server.split(":")[2].split("/")[0])
    for path in ("/mcp", "/admin/login/", "/api/leagues/"):
        assert declared_too_large(port, path) == 413, path
        assert chunked_too_large(port, path) == 413, path
    assert trickled(port, "/admin/login/", headers_done=True) == 408
    assert trickled(port, "/mcp", headers_done=True) == 408
    # Within the limits all is as before.
    assert httpx.get(lm_server.replace("/mcp", "/admin/login/")).status_code == 200


def _rss_peak_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def _flood(port: int, size: int) -> None:
    """One client posting ``size`` bytes to /mcp, as fast as the server takes them."""
    block = b"x" * MB
    with _connect(port) as sock:
        try:
            sock.sendall(_head("/mcp", Content_Length=str(size)))
            for _ in range(size // MB):
                sock.sendall(block)
        except OSError:
            pass  # refused early: the server closed the connection
        _response(sock)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the LM's memory from /proc")
def test_runserver_daphne_refuses_large_and_slow_requests_without_buffering(agent_env, manage_py, tmp_path):
    """``manage.py runserver`` (daphne), as README tells organisers to run the LM."""
    port = free_port()
    env = {**agent_env, "REQUEST_READ_TIMEOUT": "2"}
    server = Process(
        [*manage_py, "runserver", f"127.0.0.1:{port}", "--noreload", "--skip-checks"], env, str(tmp_path / "lm.log")
    )
    try:
        wait_for_port(port)
        assert httpx.get(f"http://127.0.0.1:{port}/admin/login/", timeout=10).status_code == 200
        before = _rss_peak_kb(server.proc.pid)
        floods = [threading.Thread(target=_flood, args=(port, 50 * MB)) for _ in range(8)]
        for flood in floods:
            flood.start()
        for flood in floods:
            flood.join()
        grown_mb = (_rss_peak_kb(server.proc.pid) - before) / 1024
        # Eight 50 MB bodies buffered would be 400 MB; refused on their length, nearly nothing.
        assert grown_mb < 40, f"the LM grew by {grown_mb:.0f} MB"
        assert declared_too_large(port, "/mcp") == 413
        assert declared_too_large(port, "/admin/login/") == 413
        assert chunked_too_large(port, "/mcp") == 413
        assert trickled(port, "/mcp", headers_done=True) == 408
        assert trickled(port, "/mcp", headers_done=False) == 408
        # And it still serves.
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}
        assert httpx.post(f"http://127.0.0.1:{port}/mcp", json=ping, timeout=10).json()["result"] == {}
    finally:
        server.terminate()


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
