"""The outgoing client against real servers on loopback: retries, failures, dialect fallback."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import pytest

from leagueproto.asgi import make_asgi_app
from leagueproto.client import AgentClient, CallFailed, RetryPolicy
from leagueproto.envelope import make_message
from leagueproto.errors import ErrorCode
from leagueproto.serve import ThreadedServer
from leagueproto.server import McpServer
from tests.leagueproto.conftest import build_toolset

FAST = RetryPolicy(retries=3, delay=0.01)


def scripted_app(behaviour: dict):
    """A raw ASGI app whose answer is scripted: status, body, delay; counts the calls it got."""

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        behaviour["calls"] = behaviour.get("calls", 0) + 1
        if behaviour.get("delay"):
            await asyncio.sleep(behaviour["delay"])
        body = behaviour.get("body", b"{}")
        await send(
            {
                "type": "http.response.start",
                "status": behaviour.get("status", 200),
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return app


@pytest.fixture
def scripted() -> Iterator[tuple[str, dict]]:
    behaviour: dict = {}
    server = ThreadedServer(scripted_app(behaviour), lifespan="off").start()
    yield server.url, behaviour
    server.stop()


def msg() -> dict:
    return make_message("CHOOSE_PARITY_CALL", "referee:REF01", match_id="R1M1", player_id="P01")


async def test_it_reads_a_direct_reply(agent_url):
    client = AgentClient()
    try:
        result = await client.call(agent_url, "choose_parity", msg(), timeout=2)
    finally:
        await client.close()
    assert result.reply["parity_choice"] == "even"
    assert result.is_error is False
    assert result.attempts == 1
    assert result.dialect == "direct"


async def test_a_timeout_is_E001_and_retried(scripted):
    url, behaviour = scripted
    behaviour["delay"] = 0.3
    client = AgentClient()
    with pytest.raises(CallFailed) as failed:
        await client.call(url, "choose_parity", msg(), timeout=0.05, policy=FAST)
    await client.close()
    assert failed.value.code == ErrorCode.TIMEOUT_ERROR
    assert failed.value.attempts == 4  # the first try and 3 retries
    assert failed.value.maybe_delivered  # the server got the request: it may act on it


async def test_a_call_that_got_through_once_may_have_been_delivered_though_its_last_try_was_refused():
    behaviour: dict = {"delay": 2.0}
    server = ThreadedServer(scripted_app(behaviour), lifespan="off").start()
    client = AgentClient()
    try:
        call = client.call(server.url, "choose_parity", msg(), timeout=0.3, policy=RetryPolicy(retries=1, delay=0.5))
        task = asyncio.create_task(call)
        while not behaviour.get("calls"):
            await asyncio.sleep(0.01)
        # The first try reached the server (no answer in time); the second finds nothing listening.
        await asyncio.to_thread(server.stop)
        with pytest.raises(CallFailed) as failed:
            await task
    finally:
        await client.close()
    assert failed.value.code == ErrorCode.CONNECTION_ERROR and failed.value.attempts == 2
    assert failed.value.maybe_delivered


async def test_a_refused_connection_is_E009_and_retried():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = AgentClient()
    with pytest.raises(CallFailed) as failed:
        await client.call(f"http://127.0.0.1:{port}/mcp", "ping", {}, timeout=1, policy=FAST)
    await client.close()
    assert failed.value.code == ErrorCode.CONNECTION_ERROR
    assert failed.value.attempts == 4
    assert not failed.value.maybe_delivered  # no try got as far as a connection


@pytest.mark.parametrize(
    "status,body,code",
    [
        (500, b"Internal Server Error", ErrorCode.INTERNAL_SERVER_ERROR),
        (200, b"{not json", ErrorCode.INVALID_MESSAGE_FORMAT),
        (200, b'{"jsonrpc":"2.0","id":1}', ErrorCode.INVALID_MESSAGE_FORMAT),
        (200, b'{"jsonrpc":"2.0","id":1,"result":"even"}', ErrorCode.INVALID_MESSAGE_FORMAT),
        (200, b'{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad"}}', ErrorCode.INVALID_MESSAGE_FORMAT),
    ],
)
async def test_bad_replies_fail_at_once_without_retry(scripted, status, body, code):
    url, behaviour = scripted
    behaviour.update(status=status, body=body)
    client = AgentClient()
    with pytest.raises(CallFailed) as failed:
        await client.call(url, "choose_parity", msg(), timeout=1, policy=FAST)
    await client.close()
    assert failed.value.code == code
    assert behaviour["calls"] == 1


async def test_an_oversized_reply_is_refused(scripted):
    url, behaviour = scripted
    behaviour["body"] = b'{"jsonrpc":"2.0","id":1,"result":{"pad":"' + b"x" * 5000 + b'"}}'
    client = AgentClient(max_response_bytes=1024)
    with pytest.raises(CallFailed) as failed:
        await client.call(url, "choose_parity", msg(), timeout=1)
    await client.close()
    assert "too large" in failed.value.detail


@pytest.mark.parametrize(
    "result",
    [
        b'{"parity_choice":"odd"}',
        b'{"structuredContent":{"parity_choice":"odd"},"content":[]}',
        b'{"content":[{"type":"text","text":"{\\"parity_choice\\":\\"odd\\"}"}]}',
        b'{"response":{"parity_choice":"odd"}}',
    ],
)
async def test_it_reads_replies_in_every_shape_students_send(scripted, result):
    url, behaviour = scripted
    behaviour["body"] = b'{"jsonrpc":"2.0","id":1,"result":' + result + b"}"
    client = AgentClient()
    reply = await client.call(url, "choose_parity", msg(), timeout=1)
    await client.close()
    assert reply.reply == {"parity_choice": "odd"}


class OnlyMcp(McpServer):
    """An agent that speaks only the MCP form: direct methods are unknown to it."""

    async def _direct(self, method, params, ctx):
        from leagueproto.jsonrpc import METHOD_NOT_FOUND, JsonRpcError

        raise JsonRpcError(METHOD_NOT_FOUND)


async def test_it_falls_back_to_tools_call_and_remembers():
    server = ThreadedServer(make_asgi_app(OnlyMcp(build_toolset()))).start()
    client = AgentClient()
    try:
        first = await client.call(server.url, "choose_parity", msg(), timeout=2)
        second = await client.call(server.url, "choose_parity", msg(), timeout=2)
    finally:
        await client.close()
        server.stop()
    assert first.reply["parity_choice"] == "even"
    assert first.dialect == second.dialect == "mcp"
    assert client.dialect_of(server.url) == "mcp"


async def test_it_plays_with_a_player_written_with_the_official_mcp_sdk():
    """A student's player built on the MCP SDK (stateful sessions, SSE replies) still works."""
    from mcp.server.mcpserver import MCPServer

    sdk = MCPServer("sdk-player")

    @sdk.tool()
    def choose_parity(match_id: str, player_id: str) -> dict:
        return {"message_type": "CHOOSE_PARITY_RESPONSE", "match_id": match_id, "parity_choice": "odd"}

    server = ThreadedServer(sdk.streamable_http_app(), lifespan="on").start()
    client = AgentClient()
    try:
        result = await client.call(server.url, "choose_parity", {"match_id": "R1M1", "player_id": "P01"}, timeout=5)
    finally:
        await client.close()
        server.stop()
    assert result.reply["parity_choice"] == "odd"
    assert result.dialect == "mcp"


async def test_a_batch_is_one_post_with_one_outcome_per_call(agent_url):
    client = AgentClient()
    try:
        outcomes = await client.call_batch(
            agent_url, [("choose_parity", msg()), ("fly", {}), ("choose_parity", {"match_id": "R1M1"})], timeout=5
        )
    finally:
        await client.close()
    first, unknown, invalid = outcomes
    assert first.reply["parity_choice"] == "even" and not first.is_error
    assert isinstance(unknown, CallFailed) and "no method" in unknown.detail
    assert invalid.is_error and invalid.reply["error_code"] == "E003"  # a league error is a reply


async def test_a_batch_whose_post_fails_fails_whole(scripted):
    url, behaviour = scripted
    behaviour.update(status=503, body=b"oops")
    client = AgentClient()
    try:
        with pytest.raises(CallFailed) as failed:
            await client.call_batch(url, [("choose_parity", msg()), ("choose_parity", msg())], timeout=5)
    finally:
        await client.close()
    assert failed.value.code == ErrorCode.INTERNAL_SERVER_ERROR
    assert behaviour["calls"] == 1
