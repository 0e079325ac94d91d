"""The relay answers only the league: the attacks on a relay player, over real HTTP and real
WebSockets against the live LM, each fail to do harm. The socket is the agent's; after every
attack the next frame it receives is the real call that follows (had an attack reached it, that
would have come first), and the real call is answered."""

from __future__ import annotations

import json
import socket as socketlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

import httpx
import pytest
from asgiref.sync import async_to_sync
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection, connect

from league.conductor.common import match_token
from league.endpoints import ConnectPolicy
from league.models import League, Match, Player, Round
from leagueproto.matchtoken import player_token
from players.connect import connect_url
from tests.league.lm_support import make_league, message, player_meta, register_player
from tests.relay.support import lm_headers

pytestmark = pytest.mark.django_db(transaction=True)

LEAGUE = "relay_attacks"


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as opened:
        yield opened


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(8) as executor:
        yield executor


@pytest.fixture
def relay(lm_server: str, stack: ExitStack) -> tuple[str, ClientConnection]:
    """A relay player of a fresh league: its endpoint and its socket (welcomed)."""
    make_league(LEAGUE)
    meta = player_meta(display_name="vic", contact_endpoint="connect")
    reply = register_player(lm_server, "vic", league_id=LEAGUE, player_meta=meta)
    assert reply["status"] == "ACCEPTED", reply
    socket = stack.enter_context(connect(connect_url(lm_server), open_timeout=5))
    socket.send(json.dumps({"auth_token": reply["auth_token"]}))
    assert json.loads(socket.recv(5))["type"] == "welcome"
    return Player.objects.get(player_id=reply["player_id"]).endpoint, socket


def _post(endpoint: str, body: bytes | dict[str, Any], headers: dict[str, str] | None = None, **kw: Any):
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(endpoint, content=content, headers=headers or {}, timeout=10, **kw)


def _ping(rid: Any = 1, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "ping", "params": params}


def _answer_next(socket: ClientConnection, expected_method: str = "ping") -> dict[str, Any]:
    """The next call the agent receives, answered; it must be ``expected_method``."""
    request = json.loads(socket.recv(5))
    assert request["method"] == expected_method, request
    socket.send(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"pong": True}}))
    return request


def _real_call_gets_through(endpoint: str, socket: ClientConnection, pool: ThreadPoolExecutor) -> None:
    """The League Manager's next call is the first thing the agent receives, and it is answered."""
    pending = pool.submit(_post, endpoint, _ping("real", marker="real"), lm_headers(endpoint))
    request = _answer_next(socket)
    assert request["params"] == {"marker": "real"}
    assert pending.result(10).json() == {"jsonrpc": "2.0", "id": "real", "result": {"pong": True}}


def _match_of(endpoint: str, status: str = Match.Status.RUNNING) -> Match:
    """A match of the relay player against another player, as the conductor makes it."""
    player = Player.objects.get(endpoint=endpoint)
    league = League.objects.get(pk=player.league_id)
    other = Player.objects.create(
        league=league, player_id="P90", display_name="opp", endpoint="http://127.0.0.1:9190/mcp", token_hash="x" * 64
    )
    rnd = Round.objects.create(league=league, number=1)
    return Match.objects.create(
        league=league,
        round=rnd,
        match_id="R1M1",
        player_a=player,
        player_b=other,
        game_type="even_odd",
        status=status,
        attempt=1,
    )


# -- finding 4: anonymous calls ---------------------------------------------------------------------
def test_an_anonymous_call_is_refused_and_the_socket_kept(relay, pool):
    endpoint, socket = relay
    # The 33 bytes that answered 202 and dropped the socket, sent by 30 callers at once.
    knocks = [pool.submit(_post, endpoint, b'{"jsonrpc":"1.0","method":"ping"}') for _ in range(30)]
    assert {k.result(10).status_code for k in knocks} == {400}
    assert knocks[0].result().json()["error"]["code"] == -32600
    for headers in ({}, {"Authorization": "Bearer not-a-token"}):
        refused = _post(endpoint, _ping(), headers)
        assert refused.status_code == 403 and refused.json()["error"]["code"] == -32600, refused.text
    refused = _post(endpoint, _ping(auth_token="f" * 64))
    assert refused.status_code == 403
    _real_call_gets_through(endpoint, socket, pool)


def test_the_players_own_token_or_another_players_lm_token_is_no_caller(relay, lm_server, pool):
    endpoint, socket = relay
    other = register_player(
        lm_server, "oth", league_id=LEAGUE, player_meta=player_meta(display_name="oth", contact_endpoint="connect")
    )
    other_endpoint = Player.objects.get(player_id=other["player_id"]).endpoint
    assert _post(endpoint, _ping(), lm_headers(other_endpoint)).status_code == 403
    assert _post(endpoint, _ping(), {"Authorization": f"Bearer {other['auth_token']}"}).status_code == 403
    _real_call_gets_through(endpoint, socket, pool)


def _referees_token(match: Match, player: str = "P01", attempt: int | None = None) -> str:
    """What the referee of ``match`` calls ``player`` with: that player's own token for the match."""
    return player_token(match_token(LEAGUE, match.match_id, attempt or match.attempt), player)


def test_the_referee_of_a_match_of_the_player_may_call_with_its_match_token(relay, pool):
    endpoint, socket = relay
    match = _match_of(endpoint)
    token = _referees_token(match, match.player_a.player_id)
    # As the referee sends it: in the message (dialect A), or in a tools/call's arguments.
    pending = pool.submit(_post, endpoint, _ping("ref", auth_token=token, match_id="R1M1"))
    _answer_next(socket)
    assert pending.result(10).status_code == 200
    mcp = {"jsonrpc": "2.0", "id": "m", "method": "tools/call", "params": {"name": "ping", "arguments": {}}}
    mcp["params"]["arguments"]["auth_token"] = token
    pending = pool.submit(_post, endpoint, mcp)
    _answer_next(socket, "tools/call")
    assert pending.result(10).status_code == 200
    # The bare match token, the opponent's own token, another attempt's token, or a match no
    # longer played, is no caller.
    assert _post(endpoint, _ping(auth_token=match_token(LEAGUE, "R1M1", match.attempt))).status_code == 403
    assert _post(endpoint, _ping(auth_token=_referees_token(match, "P90"))).status_code == 403
    assert _post(endpoint, _ping(auth_token=_referees_token(match, match.player_a.player_id, 2))).status_code == 403
    Match.objects.filter(pk=match.pk).update(status=Match.Status.CANCELLED)
    other_match = player_token(match_token(LEAGUE, "R1M2", 1), match.player_a.player_id)
    assert _post(endpoint, _ping(auth_token=other_match)).status_code == 403


# -- finding 4: malformed calls ---------------------------------------------------------------------
def _nested(depth: int) -> bytes:
    return b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":' + b"[" * depth + b"]" * depth + b"}}"


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"\xff\xfe",
        b"not json",
        b"[]",
        b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]',
        b'"ping"',
        b"null",
        b"1e999",
        b'{"jsonrpc":"2.0","id":1}',
        b'{"jsonrpc":"2.0","id":1,"method":7}',
        b'{"jsonrpc":"2.0","id":{},"method":"ping"}',
        b'{"jsonrpc":"2.0","id":true,"method":"ping"}',
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":3}',
        _nested(254),
        _nested(5000),
    ],
    ids=lambda b: repr(b[:24]) + f"({len(b)})",
)
def test_a_malformed_call_gets_a_json_rpc_error_and_frees_its_place(relay, settings, pool, body):
    settings.RELAY_MAX_IN_FLIGHT = 1  # a place the malformed call kept would refuse the real one 503
    endpoint, socket = relay
    answer = _post(endpoint, body, lm_headers(endpoint))
    assert answer.status_code == 400 and answer.headers["content-type"] == "application/json", answer.text
    assert answer.json()["error"]["code"] in (-32700, -32600)
    _real_call_gets_through(endpoint, socket, pool)


def test_an_agents_error_answer_with_no_id_does_not_drop_its_socket(relay, pool):
    endpoint, socket = relay
    notification = {"jsonrpc": "2.0", "method": "ping"}
    assert _post(endpoint, notification, lm_headers(endpoint)).status_code == 202
    assert json.loads(socket.recv(5)) == notification
    socket.send(json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid Request"}}))
    _real_call_gets_through(endpoint, socket, pool)


# -- finding 4: one caller's share ------------------------------------------------------------------
def _post_from(address: str, endpoint: str, body: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
    with httpx.Client(transport=httpx.HTTPTransport(local_address=address)) as client:
        return client.post(endpoint, json=body, headers=headers, timeout=10)


def test_one_caller_cannot_take_every_place(relay, settings, pool):
    settings.RELAY_MAX_IN_FLIGHT = 8  # a caller's share: 2
    endpoint, socket = relay
    match = _match_of(endpoint)
    referee = {"Authorization": f"Bearer {_referees_token(match, match.player_a.player_id)}"}
    hog = lm_headers(endpoint)
    held = [pool.submit(_post_from, "127.0.0.2", endpoint, _ping(n), hog) for n in (1, 2)]
    waiting = [json.loads(socket.recv(5)) for _ in held]  # both in flight, unanswered
    for n in range(3, 12):
        refused = _post_from("127.0.0.2", endpoint, _ping(n), hog)
        assert refused.status_code == 503 and "this caller already has 2 calls" in refused.text
    # The referee still reaches the player, and so do the hog's calls once answered.
    answered = pool.submit(_post_from, "127.0.0.3", endpoint, _ping("ref"), referee)
    _answer_next(socket)
    assert answered.result(10).status_code == 200
    for request in waiting:
        socket.send(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {}}))
    assert [h.result(10).status_code for h in held] == [200, 200]


def test_a_caller_that_hangs_up_gives_its_place_back(relay, settings, pool):
    settings.RELAY_MAX_IN_FLIGHT = 1
    endpoint, socket = relay
    with pytest.raises(httpx.TimeoutException):
        httpx.post(endpoint, json=_ping("gone"), headers={**lm_headers(endpoint), "X-Relay-Timeout": "600"}, timeout=1)
    assert json.loads(socket.recv(5))["method"] == "ping"  # it reached the agent, which never answers
    _real_call_gets_through(endpoint, socket, pool)


# -- finding 4: Origin ---------------------------------------------------------------------------
def test_a_page_of_another_site_can_open_no_agent_socket(relay, lm_server, stack):
    with pytest.raises(InvalidStatus) as refused:
        connect(connect_url(lm_server), open_timeout=5, origin="http://evil.example")
    assert refused.value.response.status_code == 403
    base = lm_server.removesuffix("/mcp")
    same_site = stack.enter_context(connect(connect_url(lm_server), open_timeout=5, origin=base))
    same_site.send(json.dumps({"auth_token": "not-a-token"}))
    assert json.loads(same_site.recv(5))["type"] == "error"  # opened, then refused for its token


def test_a_page_of_another_site_cannot_call_the_relay_endpoint(relay, pool):
    endpoint, socket = relay
    headers = {**lm_headers(endpoint), "Origin": "http://evil.example"}
    refused = _post(endpoint, _ping(), headers)
    assert refused.status_code == 403 and "Origin" in refused.json()["error"]["message"]
    _real_call_gets_through(endpoint, socket, pool)


# -- finding 5: the endpoint comes from configuration ----------------------------------------------
def _register_relay(lm_server: str, name: str, host: str) -> dict[str, Any]:
    params = message(
        "LEAGUE_REGISTER_REQUEST",
        f"player:{name}",
        league_id=LEAGUE,
        player_meta=player_meta(display_name=name, contact_endpoint="connect"),
    )
    body = {"jsonrpc": "2.0", "id": 1, "method": "register_player", "params": params}
    return httpx.post(lm_server, json=body, headers={"Host": host}, timeout=10).json()["result"]


def test_the_host_header_does_not_make_the_relay_endpoint(lm_server, settings):
    make_league(LEAGUE, allowed_networks="10.99.0.0/16")
    port = lm_server.split(":")[2].split("/")[0]
    reply = _register_relay(lm_server, "hosty", "127.0.0.1:9453")
    assert reply["status"] == "ACCEPTED", reply
    endpoint = Player.objects.get(player_id=reply["player_id"]).endpoint
    assert endpoint == f"http://127.0.0.1:{port}/relay/{LEAGUE}/{reply['player_id']}/mcp"
    # Any Host passes ALLOWED_HOSTS ("*"): no configured host name, no relay endpoint but LM_BASE_URL's.
    settings.ALLOWED_HOSTS = ["*"]
    refused = _register_relay(lm_server, "meta", "169.254.169.254")
    assert refused["status"] == "REJECTED" and "LM_BASE_URL" in refused["reason"]
    settings.LM_BASE_URL = "https://league.example.org"
    reply = _register_relay(lm_server, "meta", "169.254.169.254")
    endpoint = Player.objects.get(player_id=reply["player_id"]).endpoint
    assert endpoint == f"https://league.example.org/relay/{LEAGUE}/{reply['player_id']}/mcp"


def test_a_socket_registration_gets_the_configured_endpoint_whatever_its_host(lm_server, stack):
    make_league(LEAGUE)
    port = lm_server.split(":")[2].split("/")[0]
    # Connected to the LM, its Host naming another port.
    line = stack.enter_context(socketlib.create_connection(("127.0.0.1", int(port)), timeout=5))
    socket = stack.enter_context(connect("ws://127.0.0.1:9453/agents/connect", sock=line, open_timeout=5))
    params = message(
        "LEAGUE_REGISTER_REQUEST", "player:sox", league_id=LEAGUE, player_meta=player_meta(display_name="sox")
    )
    params["player_meta"].pop("contact_endpoint", None)
    socket.send(json.dumps({"jsonrpc": "2.0", "id": "r", "method": "register_player", "params": params}))
    reply = json.loads(socket.recv(5))["result"]
    assert reply["status"] == "ACCEPTED", reply
    welcome = json.loads(socket.recv(5))
    assert welcome["endpoint"] == f"http://127.0.0.1:{port}/relay/{LEAGUE}/{reply['player_id']}/mcp"


def test_the_conductors_check_refuses_a_metadata_address_even_for_a_relay_endpoint(lm_server):
    league = make_league(LEAGUE)
    Player.objects.create(
        league=league,
        player_id="P77",
        display_name="planted",
        endpoint=f"http://169.254.169.254/relay/{LEAGUE}/P77/mcp",
        connection=Player.Connection.RELAY,
        token_hash="y" * 64,
    )
    policy = ConnectPolicy()
    problem = async_to_sync(policy)("169.254.169.254", 80, "169.254.169.254")
    assert problem is not None and "metadata" in problem


def test_a_call_larger_than_an_agent_takes_is_refused_at_once_and_the_socket_kept(relay, pool):
    """A player's server refuses a body over 64 KiB (leagueproto/server.py) with an answer that
    carries no id, which the relay could not match to the call: so the relay refuses it itself,
    at once, under its own larger limit, and the socket carries the next call as before."""
    endpoint, socket = relay
    call = _ping("big", display_name="x" * 100_000)
    refused = _post(endpoint, call, lm_headers(endpoint))
    assert refused.status_code == 413 and refused.json()["error"]["code"] == -32600
    assert "65536 bytes" in refused.json()["error"]["message"]
    _real_call_gets_through(endpoint, socket, pool)
