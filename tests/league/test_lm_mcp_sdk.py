"""The official MCP Python SDK talks to the LM's /mcp (Streamable HTTP, stateless server)."""

from __future__ import annotations

import json

from asgiref.sync import sync_to_async
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.league.lm_support import make_league, message, player_meta


async def test_the_sdk_session_lists_tools_and_registers_and_queries(lm_server):
    await sync_to_async(make_league)()
    async with streamable_http_client(lm_server) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        assert init.server_info.name == "league-manager"
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert {"register_player", "league_query", "report_match_result"} <= set(tools)
        assert "player_meta" in tools["register_player"].input_schema["required"]

        request = message("LEAGUE_REGISTER_REQUEST", "player:sdk", player_meta=player_meta(display_name="sdk"))
        registered = await session.call_tool("register_player", request)
        assert registered.is_error is False
        reply = registered.structured_content
        assert reply["status"] == "ACCEPTED" and reply["player_id"] == "P01"
        assert json.loads(registered.content[0].text) == reply

        query = message("LEAGUE_QUERY", "player:P01", auth_token=reply["auth_token"], query_type="GET_STANDINGS")
        answered = await session.call_tool("league_query", query)
        assert answered.is_error is False
        assert answered.structured_content["data"]["standings"][0]["player_id"] == "P01"


async def test_the_high_level_client_probes_then_falls_back_and_works(lm_server):
    await sync_to_async(make_league)()
    async with Client(lm_server) as client:  # mode="auto": server/discover first, then initialize
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "handle_league_query" not in names and "league_query" in names
        request = message("LEAGUE_REGISTER_REQUEST", "player:hl", player_meta=player_meta(display_name="hl"))
        result = await client.call_tool("register_player", request)
        assert result.structured_content["status"] == "ACCEPTED"
        resources = await client.read_resource("league://standings")
        assert json.loads(resources.contents[0].text)["standings"][0]["display_name"] == "hl"
