"""The conductor's collaborators through their own interfaces: what each remembers, and how one
hands what it learnt to another (league/conductor/sending.py, dispatcher.py, supervision.py)."""

from __future__ import annotations

import asyncio
import time

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from league.conductor.common import Delivery, message_to
from league.conductor.dispatcher import Dispatcher
from league.conductor.sending import Sender
from league.conductor.shared import Shared
from league.conductor.supervision import Supervisor
from league.models import AgentStatus, Player, Referee
from leagueproto.client import AgentClient
from leagueproto.errors import ErrorCode
from tests.league.lm_support import make_league
from tests.support.servers import free_port

# The collaborators reach the database from asyncio's worker thread: committed rows, not a test
# transaction.
pytestmark = pytest.mark.django_db(transaction=True)


def test_a_referee_that_fails_rests_until_it_is_back():
    league = make_league("parts_rest")
    referee = Referee.objects.create(
        league=league, referee_id="REF01", display_name="R", endpoint="http://127.0.0.1:1/r", token_hash="0" * 64,
        status=AgentStatus.ACTIVE,
    )  # fmt: skip
    dispatcher = Dispatcher(Shared(), cooldown_base=30.0)

    async def fail() -> None:
        try:
            await dispatcher.count_failure(league, referee.pk, "start_match refused")
        finally:
            await sync_to_async(connections.close_all)()

    asyncio.run(fail())
    referee.refresh_from_db()
    assert referee.failures == 1
    assert dispatcher.cooling() == [referee.pk]
    dispatcher.referee_back(referee.pk)
    assert dispatcher.cooling() == []


def test_a_player_whose_notices_keep_failing_is_skipped_until_it_is_back():
    league = make_league("parts_gone", retries=0, default_timeout=1.0)
    player = Player.objects.create(
        league=league, player_id="P01", display_name="P", endpoint=f"http://127.0.0.1:{free_port()}/mcp",
        token_hash="1" * 64, status=AgentStatus.ACTIVE,
    )  # fmt: skip
    player.league = league

    def notice() -> list[Delivery]:
        return [Delivery("P01", player.endpoint, "ping", message_to(player, "PING", league_id=league.league_id))]

    async def main() -> list[str]:
        client = AgentClient()
        shared = Shared(client)
        sender = Sender(shared, patience=10.0)
        outcomes = []
        try:
            # Nothing listens: two failed calls in a row and it is marked unreachable.
            for batch in await sender.send_in_order(league, [notice(), notice(), notice()], 1.0):
                outcomes.append(batch[0][1])
            await asyncio.gather(*shared.tasks())
            # The database says it is back (let in elsewhere): it is sent notices again, and its
            # failures still count, so this one more marks it again.
            sender.keep_gone(league.pk, [])
            for _ in range(2):
                outcomes.append((await sender.send_in_order(league, [notice()], 1.0))[0][0][1])
            # Back through a probe of this conductor: sent notices again, its failures forgotten.
            sender.answered(league.pk, "P01")
            for _ in range(2):
                outcomes.append((await sender.send_in_order(league, [notice()], 1.0))[0][0][1])
            await asyncio.gather(*shared.tasks())
        finally:
            await client.close()
            await sync_to_async(connections.close_all)()
        return outcomes

    refused = ErrorCode.CONNECTION_ERROR.value
    assert asyncio.run(main()) == [refused, refused, "skipped", refused, "skipped", refused, refused]
    player.refresh_from_db()
    assert player.unreachable_since is not None


def test_a_league_is_supervised_at_most_every_so_often():
    league = make_league("parts_due")
    supervisor = Supervisor(Shared(), Dispatcher(Shared()), every=60.0)
    now = time.monotonic()
    assert supervisor.due(league.pk, now)
    asyncio.run(supervisor.supervise(league, in_play=[]))
    assert not supervisor.due(league.pk, time.monotonic())
    assert supervisor.due(league.pk, time.monotonic() + 60.0)
