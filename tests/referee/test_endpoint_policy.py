"""The referee applies the league's endpoint policy (leagueproto/endpoint_policy.py) to every
address it connects to: the networks START_MATCH carries (or loopback and the private ranges),
never a metadata or link-local address, never another service's port unless the league allows
it, never itself. A player refused so is never contacted: its calls fail as E009."""

from __future__ import annotations

import socket

import pytest

from leagueproto.endpoint_policy import SERVICE_PORTS
from tests.referee.conftest import rpc, start_match_message
from tests.referee.scripted import ScriptedPlayer, serving


def play(referee, lm, url_a: str, url_b: str, **overrides) -> dict:
    scripted_lm, _ = lm
    reply = rpc(referee.url, "start_match", start_match_message(url_a, url_b, **overrides))
    assert reply["status"] == "ACCEPTED", reply
    (report,) = scripted_lm.received.wait_for("acknowledged")
    return report


def refusal(report: dict, player_id: str) -> str:
    """Why every call to ``player_id`` (the invitation, the GAME_OVER) failed: one reason for all."""
    errors = {e.get("error", "") for e in report["match_log"] if e["direction"] == "OUT" and e["peer"] == player_id}
    assert len(errors) == 1, errors
    return errors.pop()


def test_players_outside_the_leagues_networks_are_never_contacted(referee, lm, players):
    a, url_a = players(ScriptedPlayer("P01"))
    b, url_b = players(ScriptedPlayer("P02"))
    # P02 by name: the name is resolved and its address checked when the referee connects.
    by_name = url_b.replace("127.0.0.1", "localhost")
    report = play(referee, lm, url_a, by_name, allowed_networks=["10.0.0.0/8"])
    assert report["result"]["status"] == "TECHNICAL_LOSS"
    assert sorted(report["result"]["technical_loss"]) == ["P01", "P02"]
    assert not a.received.of("handle_game_invitation") and not b.received.of("handle_game_invitation")
    assert "E009: not connecting: Endpoint address 127.0.0.1 is outside the league's allowed networks" in refusal(
        report, "P01"
    )
    assert "localhost resolves to a refused address" in refusal(report, "P02")


def test_the_leagues_networks_let_its_players_through(referee, lm, players):
    _, url_a = players(ScriptedPlayer("P01", choices=["even"]))
    _, url_b = players(ScriptedPlayer("P02", choices=["odd"]))
    report = play(referee, lm, url_a, url_b, allowed_networks=["10.0.0.0/8", "127.0.0.0/8"])
    assert report["result"]["status"] == "WIN"


@pytest.mark.parametrize(
    "endpoint,why",
    [
        ("http://169.254.169.254/mcp", "169.254.169.254 is link-local or a metadata service"),
        ("http://[::ffff:169.254.169.254]:8080/mcp", "link-local or a metadata service"),
        ("http://127.0.0.1:6379/mcp", "Endpoint port 6379 is the Redis port"),
        ("http://127.0.0.1:5432/mcp", "Endpoint port 5432 is the PostgreSQL port"),
    ],
)
def test_metadata_addresses_and_service_ports_are_never_contacted(referee, lm, players, endpoint, why):
    _, url_a = players(ScriptedPlayer("P01"))
    # The widest networks a league could give: the metadata and port rules hold all the same.
    report = play(referee, lm, url_a, endpoint, allowed_networks=["0.0.0.0/0", "::/0"])
    assert report["result"]["technical_loss"] == ["P02"]
    refused = refusal(report, "P02")
    assert refused.startswith("E009: not connecting") and why in refused


def test_a_player_endpoint_naming_the_referee_itself_is_refused(referee, lm, players):
    _, url_a = players(ScriptedPlayer("P01"))
    report = play(referee, lm, url_a, referee.url)
    assert "own address" in refusal(report, "P02")


def free_service_port() -> int:
    for port in SERVICE_PORTS:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    pytest.skip("every service port is taken on this machine")


def test_a_league_that_allows_service_ports_has_its_players_there_reached(referee, lm, players):
    port = free_service_port()
    _, url_a = players(ScriptedPlayer("P01", choices=["even"]))
    b = ScriptedPlayer("P02", choices=["odd"])
    with serving(b.app(), port=port) as server:
        report = play(referee, lm, url_a, server.url, allow_service_ports=True, match_id="R1M1")
    assert report["result"]["status"] == "WIN"
    assert b.received.of("handle_game_invitation")
