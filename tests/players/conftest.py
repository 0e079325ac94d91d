"""Fixtures for the player tests: a scripted League Manager, players served on loopback, and a
scripted referee (an AgentClient calling the player exactly as a referee would)."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from leagueproto.client import AgentClient
from leagueproto.envelope import deadline_in, make_message
from leagueproto.errors import ErrorCode, LeagueError
from leagueproto.messages import LeagueMessage
from leagueproto.serve import ThreadedServer
from leagueproto.server import McpServer
from leagueproto.tools import CallContext, Toolset
from players.agent import Player, PlayerConfig, PlayerHost


@dataclass
class ScriptedLM:
    """A small LM: register_player (P01, P02 …), league_query and report_match_result; records them."""

    url: str = ""
    registrations: list[dict[str, Any]] = field(default_factory=list)
    queries: list[dict[str, Any]] = field(default_factory=list)
    reports: dict[str, dict[str, Any]] = field(default_factory=dict)  # match_id → MATCH_RESULT_REPORT
    tokens: dict[str, str] = field(default_factory=dict)  # player_id → auth token
    lm_tokens: dict[str, str] = field(default_factory=dict)  # player_id → token the LM signs with
    refuse_first: int = 0  # answer E008 (no league open) this many times first
    match_tokens: dict[str, str] = field(default_factory=dict)  # match_id → token of its referee now

    def toolset(self) -> Toolset:
        ts = Toolset(name="scripted-lm", sender="league_manager")
        ids = itertools.count(1)

        @ts.tool("register_player", LeagueMessage, message_types=("LEAGUE_REGISTER_REQUEST",))
        async def register_player(msg: LeagueMessage, ctx: CallContext) -> dict:
            body = msg.model_dump()
            self.registrations.append(body)
            if self.refuse_first > 0:
                self.refuse_first -= 1
                raise LeagueError(ErrorCode.LEAGUE_NOT_FOUND, "no league is open for registration")
            for pid, token in self.tokens.items():
                if msg.auth_token == token:  # a known player re-registering: same id
                    player_id = pid
                    break
            else:
                player_id = f"P{next(ids):02d}"
                self.tokens[player_id] = secrets.token_urlsafe(16)
                self.lm_tokens[player_id] = secrets.token_hex(16)
            return ts.reply(
                msg,
                "LEAGUE_REGISTER_RESPONSE",
                status="ACCEPTED",
                player_id=player_id,
                auth_token=self.tokens[player_id],
                league_manager_token=self.lm_tokens[player_id],
                league_id=msg.model_extra.get("league_id") or "test_league",
                reason=None,
            )

        @ts.tool("report_match_result", LeagueMessage, message_types=("MATCH_RESULT_REPORT",))
        async def report_match_result(msg: LeagueMessage, ctx: CallContext) -> dict:
            body = msg.model_dump()
            self.reports[body["match_id"]] = body
            return ts.reply(msg, "MATCH_RESULT_ACK", match_id=body["match_id"], status="RECORDED")

        @ts.tool("league_query", LeagueMessage, message_types=("LEAGUE_QUERY",))
        async def league_query(msg: LeagueMessage, ctx: CallContext) -> dict:
            self.queries.append(msg.model_dump())
            extra = msg.model_extra or {}
            data: dict[str, Any] = {"standings": []}
            if extra.get("query_type") == "GET_MATCH_ASSIGNMENT":
                token = self.match_tokens.get((extra.get("query_params") or {}).get("match_id"))
                data = {"match_token_sha256": hashlib.sha256(token.encode()).hexdigest() if token else None}
            return ts.reply(msg, "LEAGUE_QUERY_RESPONSE", query_type=extra.get("query_type"), success=True, data=data)

        return ts


@pytest.fixture
def scripted_lm() -> Iterator[ScriptedLM]:
    lm = ScriptedLM()
    server = ThreadedServer(_app(McpServer(lm.toolset()))).start()
    lm.url = server.url
    try:
        yield lm
    finally:
        server.stop()


def _app(server: McpServer) -> Any:
    from leagueproto.asgi import make_asgi_app

    return make_asgi_app(server)


@pytest.fixture
def serve_players() -> Iterator[Callable[..., PlayerHost]]:
    """serve_players(player, …, register=False) → a started PlayerHost (stopped at the end)."""
    started: list[ThreadedServer] = []

    def serve(*players: Player, register: bool = False, stay: bool = True) -> PlayerHost:
        host = PlayerHost(list(players), register=register, stay=stay)
        started.append(host.start_in_thread())
        return host

    yield serve
    for server in started:
        server.stop()


def player(name: str = "Alpha", **config: Any) -> Player:
    strategy = config.pop("strategy_obj", None)
    return Player(PlayerConfig(name=name, **config), strategy=strategy)


class ScriptedReferee:
    """Calls a player as referee REF01 would (dialect A by default; ``dialect="mcp"`` for B)."""

    def __init__(self, client: AgentClient, endpoint: str, player_id: str = "P01", token: str = "match-token-1"):
        self.client = client
        self.endpoint = endpoint
        self.player_id = player_id
        self.token = token
        self.sender = "referee:REF01"

    def message(self, message_type: str, match_id: str = "R1M1", **fields: Any) -> dict[str, Any]:
        return make_message(
            message_type,
            fields.pop("sender", self.sender),
            conversation_id=f"conv-{match_id.lower()}",
            auth_token=fields.pop("auth_token", self.token),
            league_id="test_league",
            round_id=1,
            match_id=match_id,
            player_id=self.player_id,
            **fields,
        )

    async def call(self, method: str, message: dict[str, Any], timeout: float = 2.0):
        """Dialect A through the league's own client (as the real referee calls)."""
        return await self.client.call(self.endpoint, method, message, timeout=timeout)

    async def call_mcp(self, method: str, message: dict[str, Any], timeout: float = 2.0) -> dict[str, Any]:
        """Dialect B (MCP tools/call), raw: returns the JSON-RPC ``result`` object."""
        request = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": method, "arguments": message}}
        async with httpx.AsyncClient() as http:
            response = await http.post(self.endpoint, json=request, timeout=timeout)
        assert response.status_code == 200, response.text
        return response.json()["result"]

    def invitation(self, match_id: str = "R1M1", opponent: str = "P02", game_type: str = "even_odd", **kw: Any):
        return self.message(
            "GAME_INVITATION", match_id, game_type=game_type, role_in_match="PLAYER_A", opponent_id=opponent, **kw
        )

    def parity_call(self, match_id: str = "R1M1", opponent: str = "P02", seconds: float = 30, **kw: Any):
        return self.message(
            "CHOOSE_PARITY_CALL",
            match_id,
            game_type="even_odd",
            context={"opponent_id": opponent, "round_id": 1, "your_standings": {"wins": 0, "losses": 0, "draws": 0}},
            deadline=deadline_in(seconds),
            **kw,
        )

    def game_over(self, match_id: str, mine: str, theirs: str, number: int, opponent: str = "P02", **kw: Any):
        number_parity = "even" if number % 2 == 0 else "odd"
        if mine == theirs:
            status, winner = "DRAW", None
        else:
            status, winner = "WIN", self.player_id if mine == number_parity else opponent
        result = {
            "status": status,
            "winner_player_id": winner,
            "drawn_number": number,
            "number_parity": number_parity,
            "choices": {self.player_id: mine, opponent: theirs},
            "reason": "scripted",
        }
        return self.message("GAME_OVER", match_id, game_type="even_odd", game_result=result, **kw)

    async def play(self, match_id: str, opponent: str, their_choice: str, number: int) -> str:
        """A whole even_odd match from this player's side; returns its choice."""
        await self.call("handle_game_invitation", self.invitation(match_id, opponent))
        reply = (await self.call("choose_parity", self.parity_call(match_id, opponent))).reply
        mine = reply["parity_choice"]
        await self.call("notify_match_result", self.game_over(match_id, mine, their_choice, number, opponent))
        return mine


@pytest.fixture
async def referee_client() -> Any:
    client = AgentClient()
    yield client
    await client.close()
    await asyncio.sleep(0)
