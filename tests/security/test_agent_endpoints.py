"""The agents' /mcp keeps the LM's Host and Origin rules (DNS rebinding: a forged Host is a 400, a
foreign browser Origin a 403), with ``--allowed-hosts`` for a name the agent is reached by; and the
referee reads a player's reply only up to ``--max-reply-bytes``. Real processes, real HTTP."""

from __future__ import annotations

import httpx
import pytest

from leagueproto.jsonutil import dumps
from tests.referee.conftest import rpc, run_referee, start_match_message
from tests.referee.scripted import ScriptedLM, ScriptedPlayer, raw_app, serving
from tests.support.servers import Process, free_port, wait_for_port

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


def post(port: int, **headers: str) -> httpx.Response:
    return httpx.post(f"http://127.0.0.1:{port}/mcp", json=PING, headers=headers, timeout=10)


def assert_host_and_origin_rules(port: int) -> None:
    assert post(port).status_code == 200  # Host: 127.0.0.1:<port>
    assert post(port, host=f"localhost:{port}").status_code == 200
    forged = post(port, host="rebind.attacker.example")
    assert forged.status_code == 400
    assert forged.json()["error"]["data"]["field"] == "Host"
    assert post(port, origin="http://rebind.attacker.example").status_code == 403
    assert post(port, origin=f"http://127.0.0.1:{port}").status_code == 200
    # The name given with --allowed-hosts is answered, with or without a port.
    assert post(port, host=f"agent.lab.example:{port}").status_code == 200
    assert post(port, host="agent.lab.example", origin="http://agent.lab.example").status_code == 200


@pytest.mark.processes
def test_runplayer_refuses_a_forged_host_and_origin(agent_env, manage_py, tmp_path):
    port = free_port()
    args = [*manage_py, "runplayer", "--port", str(port), "--name", "Hosty", "--no-register", "--stay"]
    process = Process([*args, "--allowed-hosts", "agent.lab.example"], agent_env, str(tmp_path / "player.log"))
    try:
        wait_for_port(port)
        assert_host_and_origin_rules(port)
    finally:
        process.terminate()


@pytest.mark.processes
def test_runreferee_refuses_a_forged_host_and_origin(agent_env, manage_py, tmp_path):
    port = free_port()
    args = [*manage_py, "runreferee", "--port", str(port), "--no-register"]
    process = Process([*args, "--allowed-hosts", "agent.lab.example"], agent_env, str(tmp_path / "referee.log"))
    try:
        wait_for_port(port)
        assert_host_and_origin_rules(port)
    finally:
        process.terminate()


def test_an_oversized_reply_is_a_technical_failure_of_that_player(tmp_path):
    """A GAME_JOIN_ACK padded past the limit: the referee stops reading, and that player loses."""
    ack = {
        "protocol": "league.v2",
        "message_type": "GAME_JOIN_ACK",
        "sender": "player:P01",
        "timestamp": "2025-01-15T10:30:00Z",
        "conversation_id": "c",
        "match_id": "R1M1",
        "player_id": "P01",
        "arrival_timestamp": "2025-01-15T10:30:00Z",
        "accept": True,
        "padding": "x" * 100_000,
    }
    body = dumps({"jsonrpc": "2.0", "id": 1, "result": ack})
    lm = ScriptedLM()
    with (
        serving(lm.app()) as lm_server,
        serving(raw_app(200, body)) as big,
        serving(ScriptedPlayer("P02", choices=["odd"]).app()) as fine,
        run_referee(league_url=lm_server.url, state_dir=tmp_path) as running,  # the default: 64 KiB
    ):
        running.wait_registered()
        reply = rpc(running.url, "start_match", start_match_message(big.url, fine.url))
        assert reply["status"] == "ACCEPTED"
        (report,) = lm.received.wait_for("report_match_result")
    result = report["result"]
    assert result["status"] == "TECHNICAL_LOSS" and result["winner"] == "P02"
    assert "P01" in result["technical_loss"]
    assert "reply too large" in dumps(report["match_log"]).decode()


def test_the_reply_limit_is_a_setting(tmp_path):
    with serving(ScriptedPlayer("P01").app()) as a, serving(ScriptedPlayer("P02").app()) as b:
        lm = ScriptedLM()
        with (
            serving(lm.app()) as lm_server,
            run_referee(league_url=lm_server.url, state_dir=tmp_path, max_reply_bytes=100) as running,
        ):
            running.wait_registered()
            rpc(running.url, "start_match", start_match_message(a.url, b.url))
            (report,) = lm.received.wait_for("report_match_result")
    # Every ordinary reply is longer than 100 bytes: both players fail.
    assert sorted(report["result"]["technical_loss"]) == ["P01", "P02"]


def test_the_referee_in_process_answers_only_its_hosts(tmp_path):
    lm = ScriptedLM()
    with serving(lm.app()) as lm_server, run_referee(league_url=lm_server.url, state_dir=tmp_path) as running:
        running.wait_registered()
        port = int(running.url.rsplit(":", 1)[1].split("/")[0])
        assert post(port).status_code == 200
        assert post(port, host="rebind.attacker.example:80").status_code == 400
        assert post(port, host="[::1]:80").status_code == 200
