"""The relay's documented players run: docs/examples/connect_player.py and the JavaScript example
of docs/protocol.md ("Playing from behind NAT") join a real league as separate processes, listen
on no port, play it to the end over the relay and exit; the section's registration frame, sent as
it stands on a socket, registers a player there."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from websockets.sync.client import connect

from league import actions
from league.conductor.worker import Conductor
from league.models import League, MatchResult
from league.models import Player as PlayerRow
from league.models import Referee as RefereeRow
from leagueproto.serve import ThreadedServer
from players.agent import Player, PlayerConfig, PlayerHost
from players.connect import connect_url
from referee.agent import Referee, RefereeConfig
from tests.league.lm_support import make_league
from tests.relay.conftest import FAST
from tests.support.servers import Process
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
CONNECT_PLAYER = ROOT / "docs" / "examples" / "connect_player.py"
SECTION = "## Playing from behind NAT"


def example(language: str) -> str:
    """The first ```<language> block of the section."""
    text = (ROOT / "docs" / "protocol.md").read_text()
    section = text[text.index(SECTION) :]
    found = re.search(rf"```{language}\n(.*?)```", section, re.S)
    assert found, f"the section has a {language} example"
    return found.group(1)


def javascript_example() -> str:
    return example("javascript")


def node_command() -> list[str] | None:
    """``node`` with what it needs for a global WebSocket (a flag on Node 20), or None."""
    node = shutil.which("node")
    if node is None:
        return None
    probe = [node, "-e", "process.exit(typeof WebSocket === 'function' ? 0 : 1)"]
    if subprocess.run(probe, capture_output=True, timeout=30).returncode == 0:
        return [node]
    flagged = [node, "--experimental-websocket"]
    if subprocess.run([*flagged, *probe[1:]], capture_output=True, timeout=30).returncode == 0:
        return flagged
    return None


def test_the_documented_registration_frame_registers_a_player_on_its_socket(lm_server):
    league = make_league("relay_frame")
    frame = example("json").strip()  # indented in its list item: sent as the reader copies it
    with connect(connect_url(lm_server), open_timeout=5) as socket:
        socket.send(frame)
        reply = json.loads(socket.recv(10))
        assert reply["id"] == "register" and reply["result"]["status"] == "ACCEPTED", reply
        welcome = json.loads(socket.recv(10))
    row = PlayerRow.objects.get(league=league, player_id=reply["result"]["player_id"])
    assert welcome["type"] == "welcome" and welcome["endpoint"] == row.endpoint
    assert row.connection == PlayerRow.Connection.RELAY and row.display_name == "Ada"


@pytest.mark.processes
def test_the_documented_players_play_a_league_over_the_relay(lm_server, agent_env, tmp_path):
    node = node_command()
    if node is None:
        pytest.skip("node with a WebSocket client is not installed")
    league = make_league("relay_docs", **FAST)
    referee = Referee(RefereeConfig(name="Ref", league_url=lm_server, league_id=league.league_id, backoff_initial=0.05))
    referee_server = ThreadedServer(referee.asgi_app())
    referee.config.endpoint = referee_server.url
    referee_server.start()
    direct = PlayerHost([Player(PlayerConfig(name="Dee", league_url=lm_server, league_id=league.league_id))])
    direct_server = direct.start_in_thread()
    script = tmp_path / "connect_player.mjs"
    script.write_text(javascript_example())
    python_log, js_log = tmp_path / "python.log", tmp_path / "js.log"
    python_player = Process(
        [sys.executable, str(CONNECT_PLAYER), "--league-url", lm_server, "--league-id", league.league_id]
        + ["--name", "Py"],
        agent_env,
        log_path=str(python_log),
    )
    js_player = Process([*node, str(script), lm_server, "Js", league.league_id], agent_env, log_path=str(js_log))
    try:
        wait_until(
            lambda: (
                PlayerRow.objects.filter(league=league, connection="relay", relay_channel__gt="").count() == 2
                and PlayerRow.objects.filter(league=league).count() == 3
                and RefereeRow.objects.filter(league=league).exists()
            ),
            timeout=30,
        )
        actions.close_registration(league)
        asyncio.run(asyncio.wait_for(Conductor(league_id=league.league_id, poll=0.02).run(until_done=True), 60))
        league.refresh_from_db()
        assert league.status == League.Status.COMPLETED
        results = MatchResult.objects.filter(league=league)
        assert results.count() == 3
        assert not results.filter(technical_loss_a=True).exists() and not results.filter(technical_loss_b=True).exists()
        # Both exit by themselves once LEAGUE_COMPLETED came over their socket.
        assert python_player.proc.wait(15) == 0, python_log.read_text()
        assert js_player.proc.wait(15) == 0, js_log.read_text()
        assert "league completed" in js_log.read_text()
        assert "league completed" in python_log.read_text()
    finally:
        python_player.kill()
        js_player.kill()
        direct_server.stop()
        referee_server.stop()
