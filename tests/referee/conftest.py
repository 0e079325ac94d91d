"""Fixtures for the referee's tests: a scripted LM, a referee in-process, scripted players."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import httpx
import pytest

from leagueproto.client import RetryPolicy
from leagueproto.envelope import make_message
from leagueproto.serve import ThreadedServer
from referee.agent import Referee, RefereeConfig
from tests.referee.scripted import ScriptedLM, ScriptedPlayer, serving
from tests.support.waiting import wait_until

FAST_TIMEOUTS = {"join": 0.3, "move": 0.3, "game_over": 0.3, "report": 1.0, "default": 0.3}
FAST_RETRY = {"retries": 1, "delay": 0.05}
# For a test about what a match leaves behind, not about a slow player: every reply in time even
# on a loaded machine (a technical loss there is not what the test checks).
ROOMY_TIMEOUTS = {"join": 10.0, "move": 10.0, "game_over": 10.0, "report": 10.0, "default": 10.0}


def rpc(url: str, method: str, params: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
    """One dialect-A call; returns the JSON-RPC ``result``."""
    response = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, timeout=timeout)
    payload = response.json()
    assert "result" in payload, payload
    return payload["result"]


def start_match_message(
    player_a: str, player_b: str, *, match_id: str = "R1M1", game_type: str = "even_odd", **overrides: Any
) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "league_id": "league_test",
        "round_id": 1,
        "match_id": match_id,
        "game_type": game_type,
        "player_A_id": "P01",
        "player_B_id": "P02",
        "player_A_endpoint": player_a,
        "player_B_endpoint": player_b,
        "match_token": "match-token-R1M1",
        "timeouts": FAST_TIMEOUTS,
        "retry": FAST_RETRY,
        "max_invalid_moves": 3,
    }
    fields.update(overrides)
    return make_message("START_MATCH", "league_manager", auth_token=ScriptedLM.LM_TOKEN, **fields)


class RunningReferee:
    def __init__(self, referee: Referee, server: ThreadedServer) -> None:
        self.referee = referee
        self.server = server
        self.url = server.url

    def wait_registered(self, timeout: float = 5.0) -> None:
        wait_until(lambda: self.referee.referee_id is not None, timeout, "the referee registered", 0.01)

    def wait_told(self, what: str = "its matches told") -> None:
        """Wait until no match is left unfinished here: a match's players are told its result
        after the LM acknowledged the report, so an acknowledgement alone does not end it."""
        wait_until(lambda: self.referee.unfinished_matches == 0, what=what)


@contextmanager
def run_referee(**config: Any) -> Iterator[RunningReferee]:
    """A Referee served in a thread on an ephemeral port."""
    config.setdefault("report_retry", RetryPolicy(retries=0, delay=0.05))
    config.setdefault("backoff_initial", 0.05)
    config.setdefault("backoff_max", 0.2)
    config.setdefault("grace_seconds", 2.0)
    cfg = RefereeConfig(**config)
    referee = Referee(cfg)
    server = ThreadedServer(referee.asgi_app())
    cfg.endpoint = server.url
    server.start()
    try:
        yield RunningReferee(referee, server)
    finally:
        server.stop()


@pytest.fixture
def lm() -> Iterator[tuple[ScriptedLM, str]]:
    scripted = ScriptedLM()
    with serving(scripted.app()) as server:
        yield scripted, server.url


@pytest.fixture
def referee(lm, tmp_path) -> Iterator[RunningReferee]:
    _, lm_url = lm
    with run_referee(league_url=lm_url, state_dir=tmp_path / "state", max_concurrent=4) as running:
        running.wait_registered()
        yield running


@pytest.fixture
def players() -> Iterator[Callable[..., tuple[ScriptedPlayer, str]]]:
    """``players(player, mcp_only=False)`` serves a ScriptedPlayer; returns it with its URL."""
    with ExitStack() as stack:

        def serve(player: ScriptedPlayer, mcp_only: bool = False) -> tuple[ScriptedPlayer, str]:
            server = stack.enter_context(serving(player.app(mcp_only=mcp_only)))
            return player, server.url

        yield serve
