"""A tiny agent served over real HTTP, to exercise the protocol package end to end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from leagueproto.asgi import make_asgi_app
from leagueproto.messages import LeagueMessage
from leagueproto.serve import ThreadedServer
from leagueproto.server import McpServer
from leagueproto.tools import Toolset


class ChooseParity(LeagueMessage):
    match_id: str
    player_id: str


def build_toolset() -> Toolset:
    toolset = Toolset(name="test-player", sender="player:P01", error_message_type="GAME_ERROR")

    @toolset.tool("choose_parity", ChooseParity, message_types=("CHOOSE_PARITY_CALL",), aliases=("pick",))
    async def choose_parity(msg: ChooseParity, ctx) -> dict:
        """Choose even or odd."""
        return toolset.reply(msg, "CHOOSE_PARITY_RESPONSE", match_id=msg.match_id, parity_choice="even")

    @toolset.tool("explode", envelope=False)
    async def explode(msg, ctx) -> dict:
        raise RuntimeError("a bug")

    @toolset.resource("league://standings", name="Standings")
    async def standings(uri: str, params: dict) -> dict:
        return {"standings": []}

    @toolset.resource("game://state/{match_id}", name="Match state")
    async def state(uri: str, params: dict) -> dict:
        if params["match_id"] != "R1M1":
            raise LookupError(params["match_id"])
        return {"match_id": "R1M1", "state": "FINISHED"}

    return toolset


@pytest.fixture(scope="module")
def agent_url() -> Iterator[str]:
    server = ThreadedServer(make_asgi_app(McpServer(build_toolset(), max_body_bytes=4096))).start()
    yield server.url
    server.stop()
