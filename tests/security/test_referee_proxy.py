"""The referee is no open proxy: a ``runreferee`` process not yet registered with its League
Manager runs nothing for anyone (E013), and one started with ``--no-register`` runs matches only
for callers on its own machine, between players on its own machine, never on a metadata address
or another service's port. Each "contacts nothing" is a listening socket that no connection reached."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import httpx
import pytest

from leagueproto.envelope import make_message
from tests.support.servers import Process, free_port, wait_for_port

FORBIDDEN = ("http://127.0.0.1:6379/mcp", "http://169.254.169.254/mcp")


def call(url: str, method: str, params: dict) -> dict:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return httpx.post(url, json=body, timeout=30).json()["result"]


@contextlib.contextmanager
def listener(host: str = "127.0.0.1") -> Iterator[tuple[str, socket.socket]]:
    """A socket listening on ``host``: (its /mcp URL, the socket) for ``contacted``."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        sock.listen()
        sock.setblocking(False)
        yield f"http://{host}:{sock.getsockname()[1]}/mcp", sock


def contacted(sock: socket.socket) -> bool:
    try:
        conn, _ = sock.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


def outward_address() -> str:
    """An IPv4 address of this machine that is not loopback (the route out; nothing is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
        except OSError:
            pytest.skip("this machine has no network address besides loopback")
        address = probe.getsockname()[0]
    if address.startswith("127."):
        pytest.skip("this machine has no network address besides loopback")
    return address


def short_form(player1: str, player2: str, match_id: str = "M1") -> dict:
    return {
        "match_id": match_id,
        "timeouts": {"join": 1, "move": 1, "game_over": 1},
        "player1": {"display_name": "One", "endpoint": player1},
        "player2": {"display_name": "Two", "endpoint": player2},
    }


@pytest.mark.processes
def test_an_unregistered_referee_runs_nothing_for_anyone(agent_env, manage_py, tmp_path):
    port = free_port()
    nowhere = f"http://127.0.0.1:{free_port()}/mcp"  # its League Manager never answers
    args = [*manage_py, "runreferee", "--port", str(port), "--league-url", nowhere, "--name", "Lonely"]
    referee = Process(args, agent_env, str(tmp_path / "referee.log"))
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_for_port(port)
        with listener() as (bait, sock):
            for target in (*FORBIDDEN, bait):
                start = make_message(
                    "START_MATCH",
                    "league_manager",
                    league_id="league_x",
                    round_id=1,
                    match_id="R1M1",
                    player_A_id="P01",
                    player_B_id="P02",
                    player_A_endpoint=target,
                    player_B_endpoint=bait,
                    allowed_networks=["0.0.0.0/0"],
                )
                for method, params in (("start_match", start), ("run_match", short_form(target, bait))):
                    reply = call(url, method, params)
                    assert (reply["message_type"], reply["error_code"]) == ("GAME_ERROR", "E013"), reply
                    assert "has not registered with its League Manager yet" in reply["error_description"]
            assert call(url, "ping", {}) == {}  # it is up and answering
            assert not contacted(sock)
    finally:
        referee.terminate()
    assert "Traceback" not in (tmp_path / "referee.log").read_text()


@pytest.mark.processes
def test_a_referee_that_registers_nowhere_serves_only_its_own_machine(agent_env, manage_py, tmp_path):
    outward = outward_address()
    port = free_port()
    args = [*manage_py, "runreferee", "--port", str(port), "--host", "0.0.0.0", "--no-register"]
    referee = Process([*args, "--allowed-hosts", outward, "--name", "Local"], agent_env, str(tmp_path / "ref.log"))
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_for_port(port)
        # From this machine: a match is run, but a metadata address and a service port are never
        # contacted, whatever the caller asks.
        reply = call(url, "run_match", short_form(*FORBIDDEN))
        result = reply["result"]
        assert (result["status"], sorted(result["technical_loss"])) == ("TECHNICAL_LOSS", ["One", "Two"])
        assert "Endpoint port 6379 is the Redis port" in result["details"]["reason"]
        assert "169.254.169.254 is link-local or a metadata service" in result["details"]["reason"]
        # Nor a player off this machine: such a referee reaches loopback only.
        with listener(outward) as (bait, sock):
            start = make_message(
                "START_MATCH",
                "league_manager",
                league_id="league_x",
                round_id=1,
                match_id="R1M2",
                player_A_id="P01",
                player_B_id="P02",
                player_A_endpoint=bait,
                player_B_endpoint=bait,
                allowed_networks=["0.0.0.0/0"],  # a caller's networks change nothing here
                retry={"retries": 0, "delay": 0},
            )
            assert call(url, "start_match", start)["status"] == "ACCEPTED"
            reply = call(url, "run_match", short_form(bait, bait, "M2"))
            assert f"Endpoint address {outward} is outside the league's allowed networks" in str(reply["result"])
            assert not contacted(sock)
        # From another machine (here: this one's network address), nothing at all.
        remote = f"http://{outward}:{port}/mcp"
        with listener() as (bait, sock):
            reply = call(remote, "run_match", short_form(bait, bait))
            assert (reply["message_type"], reply["error_code"]) == ("GAME_ERROR", "E013")
            assert "callers on its own machine only" in reply["error_description"]
            assert not contacted(sock)
    finally:
        referee.terminate()
