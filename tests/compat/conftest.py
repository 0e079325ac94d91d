"""Live agents for the compatibility corpus: the League Manager with an open league, and a
referee and a player registered with it, all over real HTTP on loopback."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from leagueproto.asgi import make_asgi_app
from leagueproto.serve import ThreadedServer
from leagueproto.server import McpServer
from players.agent import Lifecycle, Player, PlayerConfig, PlayerHost
from tests.league.lm_support import assigned_match, make_league, register_player, register_referee
from tests.players.conftest import ScriptedLM as ScriptedPlayerLM
from tests.referee.conftest import RunningReferee, run_referee
from tests.referee.scripted import ScriptedLM as ScriptedRefereeLM
from tests.referee.scripted import serving
from tests.support.waiting import wait_until

CASES = Path(__file__).resolve().parent / "cases"
LEAGUE_ID = "compat_league"
_ports = itertools.count(9601)
_PLACEHOLDER = re.compile(r"\{(endpoint|self|lm_token|token:[A-Z0-9]+)\}")


def load_cases(agent: str) -> list[dict[str, Any]]:
    """The cases of one agent (tests/compat/cases/<agent>.json): request and the reply we owe."""
    return json.loads((CASES / f"{agent}.json").read_text())


@dataclass
class LiveAgent:
    """An agent's /mcp URL and what a case's placeholders stand for there."""

    url: str
    tokens: dict[str, str] = field(default_factory=dict)  # agent id → its auth_token
    lm_token: str | None = None  # the token the LM signs its calls to this agent with

    def fill(self, value: Any) -> Any:
        """``value`` with ``{endpoint}``, ``{self}``, ``{lm_token}`` and ``{token:P01}`` filled in."""
        if isinstance(value, dict):
            return {k: self.fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.fill(v) for v in value]
        if isinstance(value, str):
            return _PLACEHOLDER.sub(self._one, value)
        return value

    def _one(self, match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "endpoint":
            return f"http://127.0.0.1:{next(_ports)}/mcp"  # a fresh contact endpoint per use
        if name == "self":
            return self.url
        if name == "lm_token":
            assert self.lm_token, "this agent got no league_manager_token"
            return self.lm_token
        return self.tokens[name.partition(":")[2]]


def league_manager(lm_url: str, setup: dict[str, Any]) -> LiveAgent:
    """The LM with its league open, and the players, referees and match a case's setup asks for."""
    league = make_league(LEAGUE_ID)
    agent = LiveAgent(lm_url)
    for name in setup.get("players", ()):
        reply = register_player(lm_url, name)
        agent.tokens[reply["player_id"]] = reply["auth_token"]
    for name in setup.get("referees", ()):
        reply = register_referee(lm_url, name)
        agent.tokens[reply["referee_id"]] = reply["auth_token"]
    if setup.get("match"):
        assigned_match(league)  # R1M1: P01 against P02, assigned to REF01
    return agent


@pytest.fixture(scope="module")
def live_referee() -> Iterator[tuple[LiveAgent, RunningReferee]]:
    """A referee registered with a League Manager (so it checks the LM's token). The LM is a
    scripted one: the referee is under test here, and one referee serves all its cases."""
    lm = ScriptedRefereeLM()
    with (
        serving(lm.app()) as lm_server,
        run_referee(league_url=lm_server.url, league_id=LEAGUE_ID, name="Referee", max_concurrent=32) as running,
    ):
        running.wait_registered()
        yield LiveAgent(running.url, lm_token=running.referee.league_manager_token), running


@pytest.fixture(scope="module")
def live_player() -> Iterator[tuple[LiveAgent, Player]]:
    """Our player (runplayer's agent) registered as P01 with a League Manager that gives it a
    league_manager_token (a scripted one: the player is under test, one serves all its cases)."""
    lm = ScriptedPlayerLM()
    lm_server = ThreadedServer(make_asgi_app(McpServer(lm.toolset()))).start()
    player = Player(PlayerConfig(name="Alpha", league_url=lm_server.url, register_backoff=0.01))
    host = PlayerHost([player], register=True, stay=True)
    server = host.start_in_thread()
    try:
        wait_until(lambda: player.lifecycle == Lifecycle.REGISTERED)
        yield LiveAgent(player.endpoint, lm_token=player.lm_token), player
    finally:
        server.stop()
        lm_server.stop()
