"""docs/examples/connect_player.py as a real process: a clear message without ``websockets``, and
once registered it takes league notices only with its own league's token."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from league.models import Player as PlayerRow
from leagueproto.envelope import make_message
from tests.league.lm_support import make_league
from tests.support.servers import Process
from tests.support.waiting import wait_until

CONNECT_PLAYER = Path(__file__).resolve().parents[2] / "docs" / "examples" / "connect_player.py"


def test_without_websockets_it_says_what_to_install(tmp_path):
    # A Python where the package is missing: an entry of None in sys.modules makes its import fail.
    run = "import runpy, sys; sys.modules['websockets'] = None; "
    run += f"runpy.run_path({str(CONNECT_PLAYER)!r}, run_name='__main__')"
    done = subprocess.run([sys.executable, "-c", run], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "connect_player.py needs the websockets package: pip install websockets (then run it again)"
    )


@pytest.mark.processes
def test_a_league_completed_from_anyone_but_its_league_leaves_it_playing(lm_server, agent_env, tmp_path):
    league = make_league("connect_trust")
    log = tmp_path / "connect.log"
    args = [sys.executable, str(CONNECT_PLAYER), "--league-url", lm_server, "--league-id", league.league_id]
    process = Process([*args, "--name", "Cora"], agent_env, log_path=str(log))
    try:
        wait_until(lambda: "connected to" in log.read_text(), timeout=30)
        row = PlayerRow.objects.get(league=league, display_name="Cora")
        notice = make_message(
            "LEAGUE_COMPLETED",
            "league_manager",
            auth_token="practice-token",
            league_id=league.league_id,
            champion={"player_id": row.player_id},
        )
        body = {"jsonrpc": "2.0", "id": 1, "method": "notify_league_completed", "params": notice}
        response = httpx.post(row.endpoint, json=body, timeout=10)  # its relay endpoint on the LM
        if response.status_code == 200:  # the relay passed it on: the player refused it
            assert response.json()["result"]["error_code"] == "E012", response.text
        assert process.proc.poll() is None and "league completed" not in log.read_text()
    finally:
        process.kill()
