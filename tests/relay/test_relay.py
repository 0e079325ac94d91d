"""The relay through real HTTP and real WebSockets: the live LM on a port, a WebSocket client
playing the agent, httpx playing the referee that calls the relay endpoint."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

import httpx
import pytest
from asgiref.sync import async_to_sync
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from league.endpoints import ConnectPolicy
from league.models import Player as PlayerRow
from players.connect import connect_url
from tests.league.lm_support import make_league, message, player_meta, register_player
from tests.relay.support import lm_headers

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def league() -> Any:
    return make_league("relay_unit")


def _register(lm_server: str, name: str = "rae", auth_token: str | None = None, **meta: Any) -> dict[str, Any]:
    token = {"auth_token": auth_token} if auth_token else {}
    return register_player(
        lm_server, name, league_id="relay_unit", player_meta=player_meta(display_name=name, **meta), **token
    )


def _relay_player(lm_server: str, name: str = "rae") -> dict[str, Any]:
    reply = _register(lm_server, name, contact_endpoint="connect")
    assert reply["status"] == "ACCEPTED", reply
    return reply


@pytest.fixture(autouse=True)
def _sockets() -> Iterator[None]:
    """Every socket a test opens is closed at its end."""
    with ExitStack() as stack:
        _opened.append(stack)
        yield
        _opened.remove(stack)


_opened: list[ExitStack] = []


def _open(lm_server: str, token: str | None, **kwargs: Any) -> ClientConnection:
    socket = _opened[-1].enter_context(connect(connect_url(lm_server), open_timeout=5, **kwargs))
    if token is not None:
        socket.send(json.dumps({"auth_token": token}))
    return socket


def _welcomed(lm_server: str, token: str, **kwargs: Any) -> ClientConnection:
    socket = _open(lm_server, token, **kwargs)
    welcome = json.loads(socket.recv(5))
    assert welcome["type"] == "welcome", welcome
    return socket


def _closed_with(socket: ClientConnection) -> tuple[int | None, list[Any]]:
    """Read until the LM closes the socket: its close code and what it sent before."""
    seen = []
    try:
        while True:
            seen.append(json.loads(socket.recv(5)))
    except ConnectionClosed as exc:
        return (exc.rcvd.code if exc.rcvd else None), seen


def _call(endpoint: str, request: dict[str, Any], timeout: float = 10) -> httpx.Response:
    """A call as the League Manager makes it (its token for the player)."""
    return httpx.post(endpoint, json=request, headers=lm_headers(endpoint), timeout=timeout)


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(4) as executor:
        yield executor


def test_registering_with_connect_assigns_an_endpoint_on_the_lm(lm_server, league):
    reply = _relay_player(lm_server)
    row = PlayerRow.objects.get(league=league, player_id=reply["player_id"])
    base = lm_server.removesuffix("/mcp")
    assert row.endpoint == f"{base}/relay/relay_unit/{reply['player_id']}/mcp"
    assert row.connection == PlayerRow.Connection.RELAY and row.relay_channel == ""


def test_the_lm_base_url_setting_names_the_relay_endpoint(lm_server, league, settings):
    settings.LM_BASE_URL = "https://league.example.org"
    reply = _relay_player(lm_server)
    row = PlayerRow.objects.get(league=league, player_id=reply["player_id"])
    assert row.endpoint == f"https://league.example.org/relay/relay_unit/{reply['player_id']}/mcp"


def test_re_registering_with_the_token_keeps_a_relay_player_on_the_relay(lm_server, league):
    first = _relay_player(lm_server)
    again = _register(lm_server, "rae", contact_endpoint="connect", auth_token=first["auth_token"])
    assert again["status"] == "ACCEPTED" and again["player_id"] == first["player_id"]
    row = PlayerRow.objects.get(league=league, player_id=first["player_id"])
    assert row.connection == PlayerRow.Connection.RELAY and "/relay/" in row.endpoint


def test_a_call_to_the_relay_endpoint_is_answered_over_the_socket_with_the_callers_id(lm_server, league, pool):
    reply = _relay_player(lm_server)
    endpoint = PlayerRow.objects.get(player_id=reply["player_id"], league=league).endpoint
    with _welcomed(lm_server, reply["auth_token"]) as socket:
        assert PlayerRow.objects.get(player_id=reply["player_id"], league=league).relay_channel
        pending = pool.submit(_call, endpoint, {"jsonrpc": "2.0", "id": "ref-7", "method": "ping", "params": {"x": 1}})
        request = json.loads(socket.recv(5))
        assert request["method"] == "ping" and request["params"] == {"x": 1}
        assert request["id"] != "ref-7"  # the socket's own id: callers' ids may clash
        socket.send(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"pong": True}}))
        answer = pending.result(10)
    assert answer.status_code == 200
    assert answer.json() == {"jsonrpc": "2.0", "id": "ref-7", "result": {"pong": True}}


def test_the_token_may_come_in_an_authorization_header(lm_server, league):
    reply = _relay_player(lm_server)
    socket = _open(lm_server, None, additional_headers={"Authorization": f"Bearer {reply['auth_token']}"})
    assert json.loads(socket.recv(5))["type"] == "welcome"


def test_an_unknown_token_or_a_direct_player_is_refused(lm_server, league):
    code, seen = _closed_with(_open(lm_server, "not-a-token"))
    assert code == 4401 and seen[0]["type"] == "error"
    direct = _register(lm_server, "dee")
    code, seen = _closed_with(_open(lm_server, direct["auth_token"]))
    assert code == 4401 and "contact_endpoint 'connect'" in seen[0]["reason"]


@pytest.mark.parametrize(
    "frame",
    [
        {"jsonrpc": "2.0", "id": 99, "result": {}},  # a reply to nothing that was sent
        {"jsonrpc": "2.0", "id": 1, "method": "register_player", "params": {}},  # a request
    ],
    ids=["unknown-id", "request"],
)
def test_a_socket_that_sends_what_it_was_not_asked_for_is_closed(lm_server, league, frame):
    reply = _relay_player(lm_server)
    socket = _welcomed(lm_server, reply["auth_token"])
    socket.send(json.dumps(frame))
    code, _ = _closed_with(socket)
    assert code == 4400


def test_a_message_over_the_size_limit_closes_the_socket(lm_server, league, settings):
    settings.RELAY_MAX_MESSAGE_BYTES = 1000
    reply = _relay_player(lm_server)
    socket = _welcomed(lm_server, reply["auth_token"])
    socket.send(json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"pad": "x" * 2000}}))
    assert _closed_with(socket)[0] == 1009


def test_a_socket_over_the_frame_rate_is_closed(lm_server, league, settings):
    settings.RELAY_FRAMES_PER_MINUTE = 3
    settings.RELAY_RECONNECT_WAIT = 0  # the calls in flight fail at once instead of awaiting a new socket
    reply = _relay_player(lm_server)
    socket = _welcomed(lm_server, reply["auth_token"])  # the hello is the first frame
    endpoint = PlayerRow.objects.get(player_id=reply["player_id"], league=league).endpoint
    with ThreadPoolExecutor(4) as executor:
        calls = [executor.submit(_call, endpoint, {"jsonrpc": "2.0", "id": n, "method": "ping"}) for n in range(4)]
        try:
            for _ in range(4):
                request = json.loads(socket.recv(5))
                if "id" not in request:
                    break  # the LM's {"type": "error"} before it closes
                socket.send(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {}}))
        except ConnectionClosed:
            pass  # closed after the third frame, perhaps before the fourth call reached us
        code, _ = _closed_with(socket)
        statuses = sorted(c.result(10).status_code for c in calls)
    assert code == 4429
    assert statuses[:2] == [200, 200] and statuses[-1] == 502  # answered, then dropped with the socket


def _call_from(address: str, endpoint: str, request: dict[str, Any]) -> httpx.Response:
    """A call as the League Manager makes it, from another local address (another caller)."""
    with httpx.Client(transport=httpx.HTTPTransport(local_address=address)) as client:
        return client.post(endpoint, json=request, headers=lm_headers(endpoint), timeout=10)


def test_calls_beyond_the_per_agent_concurrency_are_refused_503(lm_server, league, settings, pool):
    settings.RELAY_MAX_IN_FLIGHT = 2  # one caller's share: 1; two callers fill the socket
    reply = _relay_player(lm_server)
    endpoint = PlayerRow.objects.get(player_id=reply["player_id"], league=league).endpoint
    with _welcomed(lm_server, reply["auth_token"]) as socket:
        held = [
            pool.submit(_call_from, address, endpoint, {"jsonrpc": "2.0", "id": n, "method": "ping"})
            for n, address in ((1, "127.0.0.2"), (2, "127.0.0.3"))
        ]
        requests = [json.loads(socket.recv(5)) for _ in held]  # both in flight, unanswered
        third = _call_from("127.0.0.4", endpoint, {"jsonrpc": "2.0", "id": 3, "method": "ping"})
        assert third.status_code == 503 and "2 calls already in flight" in third.text
        for request in requests:
            socket.send(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {}}))
        assert [c.result(10).status_code for c in held] == [200, 200]


def test_a_dropped_socket_fails_its_calls_502_and_the_player_is_unreachable(lm_server, league, settings, pool):
    settings.RELAY_RECONNECT_WAIT = 0
    reply = _relay_player(lm_server)
    endpoint = PlayerRow.objects.get(player_id=reply["player_id"], league=league).endpoint
    socket = _welcomed(lm_server, reply["auth_token"])
    pending = pool.submit(_call, endpoint, {"jsonrpc": "2.0", "id": 1, "method": "ping"})
    socket.recv(5)  # the call reached the agent, which drops the line instead of answering
    socket.close()
    assert pending.result(10).status_code == 502
    assert _call(endpoint, {"jsonrpc": "2.0", "id": 2, "method": "ping"}).status_code == 502
    assert PlayerRow.objects.get(player_id=reply["player_id"], league=league).relay_channel == ""


def test_a_call_waits_for_the_agent_to_reconnect(lm_server, league, settings, pool):
    settings.RELAY_RECONNECT_WAIT = 10
    reply = _relay_player(lm_server)
    endpoint = PlayerRow.objects.get(player_id=reply["player_id"], league=league).endpoint
    pending = pool.submit(_call, endpoint, {"jsonrpc": "2.0", "id": 5, "method": "ping"})
    with _welcomed(lm_server, reply["auth_token"]) as socket:
        request = json.loads(socket.recv(5))
        socket.send(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"late": False}}))
        assert pending.result(10).json()["result"] == {"late": False}


def test_a_newer_socket_of_the_same_player_replaces_the_older(lm_server, league):
    reply = _relay_player(lm_server)
    older = _welcomed(lm_server, reply["auth_token"])
    with _welcomed(lm_server, reply["auth_token"]):
        assert _closed_with(older)[0] == 4409


def test_an_unknown_player_or_a_direct_one_has_no_relay_endpoint(lm_server, league):
    direct = _register(lm_server, "dee")
    base = lm_server.removesuffix("/mcp")
    for player_id in ("P99", direct["player_id"]):
        answer = _call(f"{base}/relay/relay_unit/{player_id}/mcp", {"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert answer.status_code == 404


def test_a_direct_player_cannot_register_a_relay_endpoint(lm_server, league):
    victim = _relay_player(lm_server)
    endpoint = PlayerRow.objects.get(league=league, player_id=victim["player_id"]).endpoint
    reply = _register(lm_server, "mallory", contact_endpoint=endpoint)
    assert reply["status"] == "REJECTED" and "contact_endpoint 'connect'" in reply["reason"]


def test_a_call_in_flight_when_the_socket_drops_is_sent_again_on_the_next_socket(lm_server, league, pool):
    reply = _relay_player(lm_server)
    endpoint = PlayerRow.objects.get(player_id=reply["player_id"], league=league).endpoint
    first = _welcomed(lm_server, reply["auth_token"])
    pending = pool.submit(_call, endpoint, {"jsonrpc": "2.0", "id": "c-1", "method": "choose_parity"})
    assert json.loads(first.recv(5))["method"] == "choose_parity"
    first.close()  # dropped before answering: the agent reconnects
    second = _welcomed(lm_server, reply["auth_token"])
    again = json.loads(second.recv(5))
    assert again["method"] == "choose_parity"
    second.send(json.dumps({"jsonrpc": "2.0", "id": again["id"], "result": {"parity_choice": "even"}}))
    assert pending.result(10).json() == {"jsonrpc": "2.0", "id": "c-1", "result": {"parity_choice": "even"}}


def test_the_conductors_address_check_lets_relay_endpoints_through(lm_server):
    """A public LM's own address is in no league's networks; its relay endpoints pass anyway."""
    make_league("relay_unit", allowed_networks="10.0.0.0/8")
    _relay_player(lm_server)
    port = int(lm_server.split(":")[2].split("/")[0])
    policy = ConnectPolicy()
    assert async_to_sync(policy)("127.0.0.1", port, "127.0.0.1") is None
    assert "outside" in async_to_sync(policy)("127.0.0.1", port + 1, "127.0.0.1")


# -- registering over the socket ----------------------------------------------------------------
def _registration(name: str = "sox", **meta: Any) -> dict[str, Any]:
    """A register_player request as a tokenless socket sends it (no contact_endpoint: the socket is it)."""
    fields = {"display_name": name, "version": "1.0.0", "game_types": ["even_odd"], **meta}
    params = message("LEAGUE_REGISTER_REQUEST", f"player:{name}", league_id="relay_unit", player_meta=fields)
    return {"jsonrpc": "2.0", "id": "reg-1", "method": "register_player", "params": params}


def test_a_player_registers_over_the_socket_and_is_then_called_on_it(lm_server, league, pool):
    socket = _open(lm_server, None)
    socket.send(json.dumps(_registration()))
    reply = json.loads(socket.recv(5))
    assert reply["id"] == "reg-1" and reply["result"]["status"] == "ACCEPTED", reply
    player_id = reply["result"]["player_id"]
    welcome = json.loads(socket.recv(5))
    row = PlayerRow.objects.get(league=league, player_id=player_id)
    assert welcome == {"type": "welcome", "league_id": "relay_unit", "player_id": player_id, "endpoint": row.endpoint}
    assert row.connection == PlayerRow.Connection.RELAY and row.relay_channel
    assert row.endpoint == f"{lm_server.removesuffix('/mcp')}/relay/relay_unit/{player_id}/mcp"
    pending = pool.submit(_call, row.endpoint, {"jsonrpc": "2.0", "id": 3, "method": "ping"})
    request = json.loads(socket.recv(5))
    socket.send(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"pong": True}}))
    assert pending.result(10).json() == {"jsonrpc": "2.0", "id": 3, "result": {"pong": True}}
    # The token in the reply is the player's, as over HTTP: a later socket authenticates with it.
    socket.close()
    assert _welcomed(lm_server, reply["result"]["auth_token"])


def test_a_registration_refused_on_the_socket_is_answered_there_and_the_socket_closed(lm_server, league):
    socket = _open(lm_server, None)
    socket.send(json.dumps(_registration(game_types=["chess"])))
    reply = json.loads(socket.recv(5))
    assert reply["id"] == "reg-1" and reply["result"]["status"] == "REJECTED", reply
    code, seen = _closed_with(socket)
    assert code == 4401 and seen[0]["type"] == "error"
    assert not PlayerRow.objects.filter(league=league).exists()


def test_a_registration_on_the_socket_with_an_endpoint_of_its_own_is_refused(lm_server, league):
    socket = _open(lm_server, None)
    socket.send(json.dumps(_registration(contact_endpoint="http://10.0.0.7:8101/mcp")))
    reply = json.loads(socket.recv(5))
    assert reply["error"]["code"] == -32602 and "connect" in reply["error"]["message"]
    assert _closed_with(socket)[0] == 4401
    assert not PlayerRow.objects.filter(league=league).exists()


def test_a_socket_needs_a_host_of_the_lm(lm_server, league):
    """The socket's Host passes ALLOWED_HOSTS as on /mcp, or the socket is refused as it opens."""
    with pytest.raises(InvalidStatus) as refused:
        _open(lm_server, None, additional_headers={"Host": "evil.example"})
    assert refused.value.response.status_code == 403


# -- the relay endpoint answers as Django would (it is served beside it: leaguesite/asgi.py) ------
def test_the_relay_endpoint_answers_with_djangos_security_headers(lm_server, league, pool):
    reply = _relay_player(lm_server)
    endpoint = PlayerRow.objects.get(player_id=reply["player_id"], league=league).endpoint
    with _welcomed(lm_server, reply["auth_token"]) as socket:
        pending = pool.submit(_call, endpoint, {"jsonrpc": "2.0", "id": 1, "method": "ping"})
        request = json.loads(socket.recv(5))
        socket.send(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {}}))
        answer = pending.result(10)
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    assert answer.headers["x-frame-options"] == "DENY"
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["referrer-policy"] == "same-origin"
    assert answer.headers["cross-origin-opener-policy"] == "same-origin"


def test_the_relay_endpoint_refuses_a_host_not_in_allowed_hosts(lm_server, league):
    reply = _relay_player(lm_server)
    endpoint = PlayerRow.objects.get(player_id=reply["player_id"], league=league).endpoint
    answer = httpx.post(endpoint, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"Host": "evil.example"})
    assert answer.status_code == 400


def test_the_relay_endpoint_takes_only_post(lm_server, league):
    reply = _relay_player(lm_server)
    endpoint = PlayerRow.objects.get(player_id=reply["player_id"], league=league).endpoint
    for method in ("GET", "PUT", "DELETE"):
        answer = httpx.request(method, endpoint, timeout=10)
        assert answer.status_code == 405 and answer.headers["allow"] == "POST", method
        assert answer.headers["x-content-type-options"] == "nosniff"


def test_a_body_over_the_relay_limit_is_refused_413_declared_or_chunked(lm_server, league, settings):
    settings.RELAY_MAX_MESSAGE_BYTES = 1000
    reply = _relay_player(lm_server)
    endpoint = PlayerRow.objects.get(player_id=reply["player_id"], league=league).endpoint
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * 2000}}).encode()
    assert httpx.post(endpoint, content=body, timeout=10).status_code == 413
    chunked = httpx.post(endpoint, content=iter([body[:500], body[500:]]), timeout=10)  # no Content-Length
    assert chunked.status_code == 413


def test_a_caller_that_hangs_up_stops_its_call(lm_server, league, settings):
    """A call waiting for the agent to reconnect is dropped when its caller gives up: the agent,
    back, is not sent a call nobody waits for."""
    settings.RELAY_RECONNECT_WAIT = 30
    reply = _relay_player(lm_server)
    endpoint = PlayerRow.objects.get(player_id=reply["player_id"], league=league).endpoint
    with pytest.raises(httpx.TimeoutException):
        _call(endpoint, {"jsonrpc": "2.0", "id": "gone", "method": "ping"}, timeout=0.5)
    socket = _welcomed(lm_server, reply["auth_token"])
    # A waiting call looks for the socket every 0.1 s (endpoint.RECONNECT_POLL): ten times that.
    with pytest.raises(TimeoutError):
        socket.recv(1)
