"""Calls that cross LM processes through the channel layer: a failed send or read of the layer
fails at most the one call it carried, never the consumer and the agent's socket.

The LM runs in this process (lm_server) with ``RELAY_LOCAL_SHORTCUT`` off, so every call goes
through the layer as from another process: the in-memory layer, and when a Redis server is up
Redis's pub/sub layer (the relay's own with several LM processes: league/relay/layer.py) and
channels_redis's list layer (the site's default, which the relay uses when configured without
its own); each a test layer (tests/support/layers.py) that fails a call when told."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from channels.exceptions import ChannelFull
from channels.layers import get_channel_layer
from redis.exceptions import TimeoutError as RedisTimeout
from websockets.sync.client import ClientConnection, connect

from league.models import Player as PlayerRow
from league.relay import hub
from league.relay.layer import SOCKETS, announce
from league.relay.layer import replies as layer_replies
from leaguesite.settings.base import redis_channel_layer, relay_channel_layer
from players.connect import connect_url
from tests.league.lm_support import make_league, player_meta, register_player
from tests.relay.support import lm_headers
from tests.support.layers import IN_MEMORY, PUBSUB, REDIS, FaultInjection
from tests.support.servers import REDIS_URL, redis_up

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(params=["in-memory", "pubsub", "redis"])
def layer(request: pytest.FixtureRequest, settings: Any) -> FaultInjection:
    """The channel layer the relay uses, every call to a relay socket crossing it."""
    alias = "default"
    if request.param == "in-memory":
        settings.CHANNEL_LAYERS = {"default": {"BACKEND": IN_MEMORY}}
    elif not redis_up():
        pytest.skip("no Redis at 127.0.0.1:6379")
    elif request.param == "pubsub":
        config = relay_channel_layer(REDIS_URL, f"rr-test:{time.time_ns()}:relay:")
        settings.CHANNEL_LAYERS = {"default": {"BACKEND": IN_MEMORY}, "relay": {**config, "BACKEND": PUBSUB}}
        alias = "relay"
    else:
        config = redis_channel_layer(REDIS_URL, f"rr-test:{time.time_ns()}:asgi")
        settings.CHANNEL_LAYERS = {"default": {**config, "BACKEND": REDIS}}
    settings.RELAY_LOCAL_SHORTCUT = False
    # Channels makes its layer anew when CHANNEL_LAYERS changes: the LM's thread gets this one too.
    layer = get_channel_layer(alias)
    assert isinstance(layer, FaultInjection)
    return layer


@pytest.fixture
def player(lm_server: str, layer: Any) -> tuple[str, str]:
    """A relay player's endpoint and auth_token."""
    make_league("relay_layer")
    meta = player_meta(display_name="lay", contact_endpoint="connect")
    reply = register_player(lm_server, "lay", league_id="relay_layer", player_meta=meta)
    assert reply["status"] == "ACCEPTED", reply
    return PlayerRow.objects.get(player_id=reply["player_id"]).endpoint, reply["auth_token"]


@contextmanager
def _welcomed(lm_server: str, token: str) -> Iterator[ClientConnection]:
    with connect(connect_url(lm_server), open_timeout=5) as agent:
        agent.send(json.dumps({"auth_token": token}))
        assert json.loads(agent.recv(5))["type"] == "welcome"
        yield agent


@pytest.fixture
def endpoint_and_socket(lm_server: str, player: tuple[str, str]) -> Iterator[tuple[str, ClientConnection]]:
    """A relay player's endpoint, and its socket (welcomed)."""
    endpoint, token = player
    with _welcomed(lm_server, token) as agent:
        yield endpoint, agent


def _call(endpoint: str, rid: Any, timeout: float = 10) -> httpx.Response:
    request = {"jsonrpc": "2.0", "id": rid, "method": "ping"}
    headers = {"X-Relay-Timeout": f"{timeout:g}", **lm_headers(endpoint)}
    return httpx.post(endpoint, json=request, headers=headers, timeout=timeout + 5)


def _answer(agent: ClientConnection, result: Any = None) -> None:
    request = json.loads(agent.recv(5))
    agent.send(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result or {}}))


def test_a_reply_the_layer_refuses_fails_that_call_and_the_socket_stays(endpoint_and_socket, layer, caplog):
    endpoint, agent = endpoint_and_socket
    refused = layer.fail_once("send", ChannelFull(), when=lambda channel, message: message["type"] == "relay.reply")
    with ThreadPoolExecutor(1) as pool, caplog.at_level(logging.WARNING, "league.relay"):
        lost = pool.submit(_call, endpoint, "lost", 1)
        _answer(agent)
        assert lost.result(10).status_code == 504  # its reply never came: the call timed out
        answered = pool.submit(_call, endpoint, "next")
        _answer(agent, {"pong": True})
        assert answered.result(10).json() == {"jsonrpc": "2.0", "id": "next", "result": {"pong": True}}
    ((channel, _),) = refused
    assert [r.getMessage() for r in caplog.records if "could not be sent" in r.getMessage()] == [
        f"relay: the reply (200) to {channel} could not be sent (ChannelFull())"
    ]


def test_a_failed_read_of_the_sockets_channel_is_tried_again(lm_server, layer, player):
    # The first read: the consumer's, as it starts.
    failed = layer.fail_once("receive", RedisTimeout("Timeout reading from 127.0.0.1:6379"))
    endpoint, token = player
    with _welcomed(lm_server, token) as agent, ThreadPoolExecutor(1) as pool:
        assert failed
        answered = pool.submit(_call, endpoint, 1)
        _answer(agent)
        assert answered.result(10).status_code == 200


@pytest.mark.parametrize("layer", ["pubsub", "redis"], indirect=True)
def test_calls_in_flight_together_all_reach_the_socket_and_back(endpoint_and_socket):
    """The agent answers only once it has both calls: a call must reach the socket, and a reply
    its caller, while the same process waits for others on the same layer."""
    endpoint, agent = endpoint_and_socket
    with ThreadPoolExecutor(2) as pool:
        calls = [pool.submit(_call, endpoint, n, 5) for n in (1, 2)]
        requests = [json.loads(agent.recv(5)) for _ in calls]
        for request in requests:
            agent.send(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {}}))
        assert [c.result(10).status_code for c in calls] == [200, 200]


@pytest.mark.parametrize("layer", ["redis"], indirect=True)
def test_a_socket_idle_past_the_layers_blocking_read_still_gets_calls(endpoint_and_socket, layer):
    endpoint, agent = endpoint_and_socket
    # channels_redis's reads of Redis block this long and begin again when nothing came.
    time.sleep(layer.brpop_timeout + 1)
    with ThreadPoolExecutor(1) as pool:
        answered = pool.submit(_call, endpoint, 1)
        _answer(agent)
        assert answered.result(10).status_code == 200


def test_a_caller_that_hangs_up_gives_its_place_back_across_processes(endpoint_and_socket, settings):
    settings.RELAY_MAX_IN_FLIGHT = 1  # a place the call kept would refuse the next call 503
    endpoint, agent = endpoint_and_socket
    with pytest.raises(httpx.TimeoutException):
        httpx.post(
            endpoint, json={"jsonrpc": "2.0", "id": "gone", "method": "ping"}, headers=lm_headers(endpoint), timeout=1
        )
    assert json.loads(agent.recv(5))["method"] == "ping"  # it reached the agent, which never answers
    with ThreadPoolExecutor(1) as pool:
        answered = pool.submit(_call, endpoint, "next")
        _answer(agent, {"pong": True})
        assert answered.result(10).json() == {"jsonrpc": "2.0", "id": "next", "result": {"pong": True}}


def _hear(layer: Any, words: int, listening: threading.Event) -> list[dict[str, Any]]:
    """As another LM process: the next ``words`` said to the group of the sockets' whereabouts."""

    async def listen() -> list[dict[str, Any]]:
        channel = await layer.new_channel()
        await layer.group_add(SOCKETS, channel)
        listening.set()
        return [await asyncio.wait_for(layer.receive(channel), 10) for _ in range(words)]

    return asyncio.run(listen())


@pytest.mark.parametrize("layer", ["pubsub", "redis"], indirect=True)
def test_every_process_is_told_where_a_socket_opens_and_when_it_closes(lm_server, layer, player):
    """So that another process sends a call to the socket's channel without reading the database
    for each call, and stops the moment the socket closes (league/relay/layer.py)."""
    endpoint, token = player
    listening = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        heard = pool.submit(_hear, layer, 2, listening)
        assert listening.wait(10)
        with _welcomed(lm_server, token):
            channel = PlayerRow.objects.get(endpoint=endpoint).relay_channel
            assert channel
        opened, closed = heard.result(15)
    where = {"type": "relay.socket", "league_id": "relay_layer", "player_id": opened["player_id"], "channel": channel}
    assert opened == {**where, "opened": True}
    assert closed == {**where, "opened": False}
    assert PlayerRow.objects.get(endpoint=endpoint).relay_channel == ""  # recorded before it is said


def test_a_process_trusts_what_it_hears_of_other_processes_sockets(layer):
    """What a process hears (its replies channel is in the group) is what it sends calls to; a
    closing forgets the socket only if it is the one trusted (a newer one may have been heard)."""

    async def hear_and_check() -> None:
        replies = layer_replies(layer)
        await replies.open()
        loop = asyncio.get_running_loop()

        async def trusted(expected: str) -> None:
            for _ in range(200):
                if hub.remote_channel("heard_league", "P01", loop.time()) == expected:
                    return
                await asyncio.sleep(0.01)
            raise AssertionError(f"never trusted {expected!r}")

        await announce(layer, "heard_league", "P01", "specific.old!1", opened=True)
        await trusted("specific.old!1")
        await announce(layer, "heard_league", "P01", "specific.new!2", opened=True)
        await announce(layer, "heard_league", "P01", "specific.old!1", opened=False)  # the older one's closing
        await trusted("specific.new!2")
        await asyncio.sleep(0.1)
        assert hub.remote_channel("heard_league", "P01", loop.time()) == "specific.new!2"
        await announce(layer, "heard_league", "P01", "specific.new!2", opened=False)
        await trusted("")
        replies.close()

    asyncio.run(hear_and_check())
