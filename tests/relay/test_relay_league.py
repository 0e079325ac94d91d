"""A league where some players connect out to the relay and others serve their own endpoint:
the live LM (Django + Channels on a real port), a real referee, the conductor."""

from __future__ import annotations

import asyncio

import pytest

from league import actions
from league.conductor.worker import Conductor
from league.models import League, MatchResult
from league.models import Player as PlayerRow
from league.models import Referee as RefereeRow
from leagueproto.serve import ThreadedServer
from players.agent import Lifecycle, Player, PlayerConfig, PlayerHost
from players.connect import ConnectHost
from referee.agent import Referee, RefereeConfig
from tests.league.lm_support import make_league
from tests.relay.conftest import FAST
from tests.support.waiting import wait_until


def _players(names: list[str], lm_server: str, league_id: str) -> list[Player]:
    return [
        Player(PlayerConfig(name=name, strategy="random", league_url=lm_server, league_id=league_id)) for name in names
    ]


@pytest.mark.processes
def test_players_that_connect_out_play_a_league_beside_direct_players(lm_server, run_connect_host):
    league = make_league("relay_mixed", **FAST)
    referee = Referee(RefereeConfig(name="Ref", league_url=lm_server, league_id=league.league_id, backoff_initial=0.05))
    referee_server = ThreadedServer(referee.asgi_app())
    referee.config.endpoint = referee_server.url
    referee_server.start()
    direct = PlayerHost(_players(["Dee", "Dora"], lm_server, league.league_id), stay=False)
    direct_server = direct.start_in_thread()
    relayed = ConnectHost(_players(["Rae", "Remy"], lm_server, league.league_id))
    running = run_connect_host(relayed)
    try:
        wait_until(
            lambda: (
                PlayerRow.objects.filter(league=league, relay_channel__gt="").count() == 2
                and PlayerRow.objects.filter(league=league).count() == 4
                and RefereeRow.objects.filter(league=league).exists()
            ),
            timeout=20,
        )
        actions.close_registration(league)
        asyncio.run(asyncio.wait_for(Conductor(league_id=league.league_id, poll=0.02).run(until_done=True), 60))

        league.refresh_from_db()
        assert league.status == League.Status.COMPLETED
        results = MatchResult.objects.filter(league=league)
        assert results.count() == 6
        assert not results.filter(technical_loss_a=True).exists() and not results.filter(technical_loss_b=True).exists()
        base = lm_server.removesuffix("/mcp")
        for player in relayed.players:
            row = PlayerRow.objects.get(league=league, player_id=player.player_id)
            assert row.connection == PlayerRow.Connection.RELAY
            assert row.endpoint == f"{base}/relay/{league.league_id}/{player.player_id}/mcp"
            # LEAGUE_COMPLETED came over the socket; the last GAME_OVER may follow it (told once recorded).
            wait_until(lambda p=player: p.lifecycle == Lifecycle.SHUTDOWN, what=f"{player.name} shut down")
            assert player.memory.stats["played"] == 3
        for player in direct.players:
            assert PlayerRow.objects.get(league=league, player_id=player.player_id).connection == "direct"
            wait_until(lambda p=player: p.memory.stats["played"] == 3, what=f"{player.name} told 3 results")
        # The referee's calls to the relay players (they listen on no port) were all answered.
        relay_ids = {p.player_id for p in relayed.players}
        calls = [e for r in results for e in r.log if e["direction"] == "OUT" and e["peer"] in relay_ids]
        assert calls and all(e["outcome"] == "ok" for e in calls)
    finally:
        running.stop()
        direct_server.stop()
        referee_server.stop()
