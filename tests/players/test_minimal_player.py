"""docs/examples/minimal_player.py as a real process against the live LM: whom it trusts once
registered (its league's notices only; a match's first referee unless the LM confirms another)
and what it says when it cannot register."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from league.auth import lm_token
from league.conductor.common import match_token
from league.models import Player as PlayerRow
from leagueproto.envelope import make_message
from leagueproto.matchtoken import player_token
from tests.league.lm_support import assigned_match, make_league, register_player, register_referee
from tests.support.servers import Process, free_port
from tests.support.waiting import wait_until

MINIMAL_PLAYER = Path(__file__).resolve().parents[2] / "docs" / "examples" / "minimal_player.py"


def start(league_url: str, agent_env: dict[str, str], log: Path, *args: str) -> tuple[Process, str]:
    port = free_port()
    command = [sys.executable, str(MINIMAL_PLAYER), "--port", str(port), "--league-url", league_url, *args]
    return Process([*command, "--name", "Mini"], agent_env, log_path=str(log)), f"http://127.0.0.1:{port}/mcp"


def rpc(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return httpx.post(url, json=body, timeout=10).json()["result"]


def game_message(message_type: str, token: str, league_id: str, **fields: Any) -> dict[str, Any]:
    return make_message(
        message_type,
        "referee:REF01",
        conversation_id="conv-r1m1",
        auth_token=token,
        league_id=league_id,
        round_id=1,
        match_id="R1M1",
        player_id="P01",
        **fields,
    )


@pytest.mark.processes
def test_the_minimal_player_trusts_only_its_league_and_its_matchs_referee(lm_server, agent_env, tmp_path):
    league = make_league("mini_trust")
    register_referee(lm_server, "ref")
    log = tmp_path / "mini.log"
    process, url = start(lm_server, agent_env, log, "--league-id", league.league_id)
    try:
        wait_until(lambda: "registered as P01" in log.read_text(), timeout=30)
        register_player(lm_server, "other")
        match = assigned_match(league, a="P01", b="P02")
        real = player_token(match_token(league.league_id, "R1M1", match.attempt), "P01")  # P01's own
        row = PlayerRow.objects.get(league=league, player_id="P01")

        # A practice LEAGUE_COMPLETED (the check's, a classmate's) does not end its league.
        notice = make_message(
            "LEAGUE_COMPLETED",
            "league_manager",
            auth_token="practice-token",
            league_id=league.league_id,
            champion={"player_id": "P01"},
        )
        assert rpc(url, "notify_league_completed", notice)["error_code"] == "E012"
        assert process.proc.poll() is None and "league completed" not in log.read_text()

        # A forged invitation sent before the real one binds the match, until the real referee's
        # invitation comes: the League Manager confirms its token, and the match is its.
        invitation = {"game_type": "even_odd", "role_in_match": "PLAYER_A", "opponent_id": "P02"}
        forged = game_message("GAME_INVITATION", "forged-1", league.league_id, **invitation)
        assert rpc(url, "handle_game_invitation", forged)["accept"] is True
        genuine = game_message("GAME_INVITATION", real, league.league_id, **invitation)
        assert rpc(url, "handle_game_invitation", genuine)["accept"] is True
        # Any other copy now, with or without the announced referee's endpoint, is refused.
        for token, extra in (("forged-1", {}), ("forged-2", {"referee_endpoint": "http://127.0.0.1:8001/mcp"})):
            copy = game_message("GAME_INVITATION", token, league.league_id, **invitation, **extra)
            assert rpc(url, "handle_game_invitation", copy)["error_code"] == "E012"
        call = {"game_type": "even_odd", "context": {"opponent_id": "P02"}}
        assert (
            rpc(url, "choose_parity", game_message("CHOOSE_PARITY_CALL", "forged-1", league.league_id, **call))[
                "error_code"
            ]
            == "E012"
        )
        answer = rpc(url, "choose_parity", game_message("CHOOSE_PARITY_CALL", real, league.league_id, **call))
        assert answer["parity_choice"] in ("even", "odd")

        # Its own League Manager's LEAGUE_COMPLETED ends it.
        notice["auth_token"] = lm_token(league.league_id, "P01", row.token_hash)
        assert rpc(url, "notify_league_completed", notice)["message_type"] == "ACK"
        assert process.proc.wait(20) == 0
        assert "league completed, champion P01" in log.read_text()
    finally:
        process.kill()


@pytest.mark.processes
def test_the_minimal_player_says_what_to_do_when_it_cannot_register(lm_server, agent_env, tmp_path):
    # The League Manager is down: a sentence, not a raw urlopen error, and it keeps trying.
    nobody = f"http://127.0.0.1:{free_port()}/mcp"
    log = tmp_path / "down.log"
    process, _ = start(nobody, agent_env, log)
    try:
        wait_until(lambda: "retrying" in log.read_text(), timeout=30)
        text = log.read_text()
        assert f"registration attempt 1/10: {nobody}: connection refused: is the League Manager running" in text
        assert "urlopen" not in text
    finally:
        process.kill()

    base = lm_server.removesuffix("/mcp")
    make_league("open_one")
    cases = [
        ((base + "/",), f"HTTP 403 from {base}/: not a League Manager's /mcp endpoint; did you mean {base}/mcp?"),
        ((lm_server, "--league-id", "nosuch"), f"no league 'nosuch' at {lm_server}; open for registration: open_one"),
    ]
    make_two = [((lm_server,), "2 leagues are open for registration (open_one, open_two)")]
    for i, (args, expected) in enumerate(cases + make_two):
        if i == len(cases):
            make_league("open_two")
        log = tmp_path / f"case{i}.log"
        process, _ = start(args[0], agent_env, log, *args[1:])
        try:
            assert process.proc.wait(30) == 1
        finally:
            process.kill()
        assert expected in log.read_text() and "attempt" not in log.read_text(), log.read_text()
