"""Official MCP clients, to the letter, on all three endpoints (League Manager, referee, player).

The ``mcp`` package's own client speaks to each endpoint: the handshake, ``ping`` (whose result
must be ``{}``), ``tools/list`` (every tool with an input and an output schema, both valid JSON
Schema Draft 2020-12) and ``tools/call`` (the client checks ``structuredContent`` against the
tool's ``outputSchema``; an ``isError`` result is checked here against the same schema). The
transport rules come with them: an unsupported MCP-Protocol-Version header is a 400, and a body
that is not JSON gets a JSON-RPC error body whatever its content type.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.compat.conftest import LEAGUE_ID, league_manager
from tests.league.lm_support import message, player_meta

ENDPOINTS = ("lm", "referee", "player")


@pytest.fixture(params=ENDPOINTS)
def endpoint(request, transactional_db) -> tuple[str, str, dict[str, Any]]:
    """(which, its /mcp URL, a tool call it answers normally: name and arguments)."""
    which = request.param
    if which == "lm":
        lm_url = request.getfixturevalue("lm_server")
        league_manager(lm_url, {})
        registration = message("LEAGUE_REGISTER_REQUEST", "player:sdk", player_meta=player_meta(display_name="sdk"))
        return which, lm_url, {"name": "register_player", "arguments": registration}
    if which == "referee":
        agent, _ = request.getfixturevalue("live_referee")
        state = {"match_id": "R9M9"}  # asked without the LM's token: an isError result (E011)
        return which, agent.url, {"name": "get_match_state", "arguments": state}
    agent, player = request.getfixturevalue("live_player")
    call = message(
        "CHOOSE_PARITY_CALL",
        "referee:REF01",
        auth_token="sdk-match-token",
        league_id=LEAGUE_ID,
        round_id=1,
        match_id="R1M1",
        player_id=player.player_id,
        game_type="even_odd",
        context={"opponent_id": "P02"},
    )
    return which, agent.url, {"name": "choose_parity", "arguments": call}


async def test_the_sdk_session_pings_lists_and_calls(endpoint):
    which, url, probe = endpoint
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.send_ping()  # raises unless the result is MCP's empty result
        tools = (await session.list_tools()).tools
        assert "ping" in {tool.name for tool in tools}
        for tool in tools:
            Draft202012Validator.check_schema(tool.input_schema)
            assert tool.output_schema is not None and tool.output_schema["type"] == "object", tool.name
            Draft202012Validator.check_schema(tool.output_schema)
        schemas = {tool.name: tool.output_schema for tool in tools}

        pong = await session.call_tool("ping", {})
        assert pong.is_error is False and pong.structured_content["message_type"] == "PONG"

        result = await session.call_tool(probe["name"], probe["arguments"])
        assert json.loads(result.content[0].text) == result.structured_content
        # The SDK validated a successful result itself; a refusal matches the schema too.
        Draft202012Validator(schemas[probe["name"]]).validate(result.structured_content)
        if which == "referee":
            assert result.is_error is True and result.structured_content["error_code"] == "E011"
        elif which == "lm":
            assert result.is_error is False and result.structured_content["status"] == "ACCEPTED"
        else:
            assert result.is_error is False and result.structured_content["parity_choice"] in ("even", "odd")


async def test_the_high_level_client_connects_and_calls(endpoint):
    """``mcp.Client`` probes with a newer protocol first, then falls back to the handshake."""
    _, url, probe = endpoint
    async with Client(url) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"ping", probe["name"]} <= names
        assert (await client.call_tool("ping", {})).structured_content["status"] == "ok"


def test_jsonrpc_ping_answers_an_empty_result_and_the_ping_tool_a_pong(endpoint):
    _, url, _ = endpoint
    ping = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}).json()
    assert ping == {"jsonrpc": "2.0", "id": 1, "result": {}}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "ping", "arguments": {}}}
    result = httpx.post(url, json=call).json()["result"]
    assert result["isError"] is False and result["structuredContent"]["message_type"] == "PONG"


@pytest.mark.parametrize("version", ["1999-01-01", "2026-07-28", "latest"])
def test_an_unsupported_mcp_protocol_version_header_is_a_400(endpoint, version):
    _, url, _ = endpoint
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    response = httpx.post(url, json=ping, headers={"MCP-Protocol-Version": version})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32600 and version in error["message"]
    assert error["data"]["field"] == "MCP-Protocol-Version" and "2025-11-25" in error["data"]["supported"]
    supported = httpx.post(url, json=ping, headers={"MCP-Protocol-Version": "2025-06-18"})
    assert supported.status_code == 200 and supported.json()["result"] == {}


def test_a_body_that_is_not_json_gets_a_jsonrpc_error_whatever_its_type(endpoint):
    _, url, _ = endpoint
    ping = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    upload = httpx.post(url, files={"request": ("ping.json", ping, "application/json")})
    assert upload.status_code == 400 and upload.headers["content-type"] == "application/json"
    error = upload.json()["error"]
    assert error["code"] == -32700 and "multipart/form-data" in error["message"]
    assert error["data"]["field"] == "body"
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        garbage = httpx.post(url, content=b"player=alpha", headers={"Content-Type": content_type})
        assert garbage.status_code == 400 and garbage.json()["error"]["code"] == -32700, content_type
    # A JSON body is read whatever the header says (curl -d without -H sends a form type).
    for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
        headers = {"Content-Type": content_type} if content_type else {}
        answered = httpx.post(url, content=ping, headers=headers)
        assert answered.status_code == 200 and answered.json()["result"] == {}, content_type
