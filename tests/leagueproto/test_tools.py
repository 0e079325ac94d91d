"""The Toolset checks a call's arguments knowing where they came from."""

from __future__ import annotations

import asyncio

import httpx
from pydantic import ValidationInfo, field_validator

from leagueproto.asgi import make_asgi_app
from leagueproto.envelope import make_message
from leagueproto.messages import FROM_JSON, JsonObjects, LeagueMessage
from leagueproto.serve import ThreadedServer
from leagueproto.server import McpServer
from leagueproto.tools import CallContext, Toolset

SEEN: list[object] = []


class Table(LeagueMessage):
    rows: JsonObjects = []

    @field_validator("rows", mode="after")
    @classmethod
    def _seen(cls, rows: list, info: ValidationInfo) -> list:
        SEEN.append(info.context)
        return rows


def _toolset() -> Toolset:
    toolset = Toolset(name="t", sender="player:P01", error_message_type="GAME_ERROR")

    @toolset.tool("take_table", Table, message_types=("TABLE",))
    async def take_table(msg: Table, ctx: CallContext) -> dict:
        return toolset.reply(msg, "ACK", rows=len(msg.rows))

    return toolset


def test_only_arguments_parsed_from_a_request_are_checked_as_json():
    toolset = _toolset()
    tool = toolset.find_tool("take_table")
    SEEN.clear()
    arguments = make_message("TABLE", "league_manager", rows=[{"a": 1}])
    with ThreadedServer(make_asgi_app(McpServer(toolset))) as server:  # real HTTP, as an agent calls
        payload = {"jsonrpc": "2.0", "id": 1, "method": "take_table", "params": arguments}
        response = httpx.post(server.url, json=payload)
    assert response.json()["result"]["rows"] == 1
    reply, is_error = asyncio.run(toolset.call(tool, arguments, CallContext(method="take_table", dialect="direct")))
    assert (reply["rows"], is_error) == (1, False)
    assert SEEN == [FROM_JSON, None]
    # In-process arguments are Python objects: a row with a non-str key is refused (E002).
    bad = {**arguments, "rows": [{1: "x"}]}
    reply, is_error = asyncio.run(toolset.call(tool, bad, CallContext(method="take_table", dialect="direct")))
    assert is_error and reply["error_code"] == "E002"
