"""A relay player (it connects out, listens on no port) joins a practice arena with the same
registration as a league, plays rated matches beside a direct player, and is rated by its name."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async

from league import actions
from league.actions.arena import open_arena
from league.conductor.worker import Conductor
from league.models import ArenaSeat, RatingChange
from league.models import Player as PlayerRow
from league.models import Referee as RefereeRow
from leagueproto.serve import ThreadedServer
from players.agent import Player, PlayerConfig, PlayerHost
from players.connect import ConnectHost
from referee.agent import Referee, RefereeConfig
from tests.relay.conftest import FAST
from tests.support.waiting import wait_until


def _player(name: str, lm_server: str) -> Player:
    return Player(PlayerConfig(name=name, strategy="random", league_url=lm_server, league_id="relay_arena"))


def conduct_until(league_id: str, done, timeout: float) -> None:
    """Run a conductor on the arena until ``done()`` holds (an arena never completes by itself)."""

    async def main() -> None:
        worker = asyncio.create_task(Conductor(league_id=league_id, poll=0.02).run())
        try:
            async with asyncio.timeout(timeout):
                while not await sync_to_async(done)():
                    await asyncio.sleep(0.05)
        finally:
            worker.cancel()
            await asyncio.gather(worker, return_exceptions=True)

    asyncio.run(main())


@pytest.mark.processes
def test_a_relay_player_joins_an_arena_and_is_rated_by_its_name(lm_server, run_connect_host):
    league = open_arena(
        actions.create_league(name="Relay arena", league_id="relay_arena", schedule_format="arena", **FAST)
    )
    referee = Referee(RefereeConfig(name="Ref", league_url=lm_server, league_id="relay_arena", backoff_initial=0.05))
    referee_server = ThreadedServer(referee.asgi_app())
    referee.config.endpoint = referee_server.url
    referee_server.start()
    direct = PlayerHost([_player("Dee", lm_server)], stay=True)
    direct_server = direct.start_in_thread()
    running = run_connect_host(ConnectHost([_player("Rae", lm_server)]))
    try:
        wait_until(
            lambda: (
                PlayerRow.objects.filter(league=league, relay_channel__gt="").count() == 1
                and PlayerRow.objects.filter(league=league).count() == 2
                and RefereeRow.objects.filter(league=league).exists()
            ),
            timeout=20,
        )
        rae = PlayerRow.objects.get(league=league, display_name="Rae")
        conduct_until("relay_arena", lambda: RatingChange.objects.filter(player=rae).count() >= 3, timeout=60)
        assert ArenaSeat.objects.get(player=rae).identity == "relay:Rae"
        changes = RatingChange.objects.filter(player=rae)
        assert not changes.filter(technical=True).exists()  # every call over the relay answered
        assert changes.order_by("-pk").first().rating.matches >= 3
    finally:
        running.stop()
        direct_server.stop()
        referee_server.stop()
