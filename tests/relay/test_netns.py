"""Players that cannot be reached play anyway. Each host is a network namespace (tests/support/
netns.py); the NAT host refuses every inbound connection, as a home router or a campus Wi-Fi with
client isolation does, so its players connect out to the LM's relay. They play a whole league
beside players on an open host that serve their own endpoints."""

from __future__ import annotations

import asyncio

import pytest

from league import actions
from league.conductor.worker import Conductor
from league.models import League, MatchResult
from league.models import Player as PlayerRow
from league.models import Referee as RefereeRow
from leagueproto.serve import ThreadedServer
from leaguesite.asgi import application
from referee.agent import Referee, RefereeConfig
from tests.league.lm_support import make_league
from tests.relay.conftest import FAST
from tests.support import netns
from tests.support.servers import free_port
from tests.support.waiting import wait_until

WHY_NOT = netns.unsupported()
pytestmark = [pytest.mark.skipif(WHY_NOT is not None, reason=str(WHY_NOT)), pytest.mark.processes]


def _runplayer(manage_py: list[str], lm_url: str, league_id: str, name: str, *extra: str) -> list[str]:
    return [
        *manage_py,
        *("runplayer", "--league-url", lm_url, "--league-id", league_id),
        *("--name", name, "--count", "2", "--log-level", "WARNING", *extra),
    ]


def test_players_behind_nat_play_a_league_through_the_relay(transactional_db, settings, agent_env, manage_py, tmp_path):
    with netns.Network(subnet="10.214.0.0/24") as network:
        nat, open_host = network.add_host("nat"), network.add_host("open")
        try:
            nat.block_inbound()
        except netns.Unsupported as exc:
            pytest.skip(str(exc))
        settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, network.address]
        lm = ThreadedServer(application, host=network.address, lifespan="off").start()
        league = make_league("relay_nat", **FAST)
        config = RefereeConfig(name="Ref", league_url=lm.url, league_id=league.league_id, backoff_initial=0.05)
        referee = Referee(config)
        referee_server = ThreadedServer(referee.asgi_app())
        referee.config.endpoint = referee_server.url
        referee_server.start()
        nat_log, open_log = open(tmp_path / "nat.log", "w"), open(tmp_path / "open.log", "w")  # noqa: SIM115
        try:
            nat.popen(_runplayer(manage_py, lm.url, league.league_id, "Nat", "--connect"), agent_env, nat_log)
            open_host.popen(
                _runplayer(manage_py, lm.url, league.league_id, "Open")
                + ["--host", open_host.address, "--port", str(free_port())],
                agent_env,
                open_log,
            )
            wait_until(
                lambda: (
                    PlayerRow.objects.filter(league=league, connection="relay", relay_channel__gt="").count() == 2
                    and PlayerRow.objects.filter(league=league, connection="direct").count() == 2
                    and RefereeRow.objects.filter(league=league).exists()
                ),
                timeout=60,
            )
            # The NAT host's players could not have served their own endpoints: nothing gets in.
            probe = f"import socket; socket.create_connection(('{nat.address}', 9), timeout=2)"
            assert open_host.run("python3", "-c", probe, check=False).returncode != 0
            actions.close_registration(league)
            asyncio.run(asyncio.wait_for(Conductor(league_id=league.league_id, poll=0.02).run(until_done=True), 90))

            league.refresh_from_db()
            assert league.status == League.Status.COMPLETED
            results = MatchResult.objects.filter(league=league)
            assert results.count() == 6
            assert not results.filter(technical_loss_a=True).exists()
            assert not results.filter(technical_loss_b=True).exists()
            for row in PlayerRow.objects.filter(league=league, connection="relay"):
                assert row.endpoint.startswith(f"http://{network.address}:{lm.ports[0]}/relay/")
        finally:
            referee_server.stop()
            lm.stop()
            nat_log.close()
            open_log.close()
