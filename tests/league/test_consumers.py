"""The league websocket: snapshot on connect, then every broadcast event (docs/architecture.md).

Runs on whichever channel layer settings choose: in-memory here, Redis when REDIS_URL is set.
"""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator

from league.consumers import announce_leagues
from league.events import broadcast
from leaguesite.asgi import application
from tests.browser.league_data import make_league

pytestmark = pytest.mark.django_db(transaction=True)


def communicator(path: str) -> WebsocketCommunicator:
    return WebsocketCommunicator(application, path, headers=[(b"origin", b"http://localhost")])


async def test_it_sends_a_snapshot_then_forwards_league_events():
    await database_sync_to_async(make_league)("spring_cup", 4)
    ws = communicator("/ws/leagues/spring_cup/")
    connected, _ = await ws.connect(timeout=2)
    assert connected
    first = await ws.receive_json_from(timeout=2)
    assert first["type"] == "snapshot"
    assert [r["player_id"] for r in first["data"]["standings"]] == ["P01", "P02", "P03", "P04"]
    assert first["data"]["progress"]["matches_total"] == 6

    await database_sync_to_async(broadcast)("spring_cup", "match_finished", {"match_id": "R1M1"})
    event = await ws.receive_json_from(timeout=2)
    assert event == {"type": "event", "event": "match_finished", "data": {"match_id": "R1M1"}}
    await ws.disconnect()


async def test_the_league_list_hears_of_a_new_league_and_then_of_its_events():
    ws = communicator("/ws/leagues/")
    connected, _ = await ws.connect(timeout=2)
    assert connected
    await database_sync_to_async(make_league)("fresh", 2)
    await database_sync_to_async(announce_leagues)("league_created", "fresh")
    event = await ws.receive_json_from(timeout=2)
    assert event == {"type": "event", "event": "league_created", "data": {"league_id": "fresh"}}
    # The list joined the new league's group on the way: its events reach the home page too.
    await database_sync_to_async(broadcast)("fresh", "match_started", {"match_id": "R1M1", "league_id": "fresh"})
    event = await ws.receive_json_from(timeout=2)
    assert (event["event"], event["data"]["match_id"]) == ("match_started", "R1M1")
    await ws.disconnect()


async def test_it_only_sends_a_league_its_own_events():
    await database_sync_to_async(make_league)("one", 2)
    await database_sync_to_async(make_league)("two", 2)
    ws = communicator("/ws/leagues/one/")
    await ws.connect(timeout=2)
    await ws.receive_json_from(timeout=2)
    layer = get_channel_layer()
    await layer.group_send("league_two", {"type": "league.event", "event": "round_started", "data": {}})
    await layer.group_send("league_one", {"type": "league.event", "event": "round_completed", "data": {"round_id": 1}})
    event = await ws.receive_json_from(timeout=2)
    assert event["event"] == "round_completed"
    assert await ws.receive_nothing(timeout=0.2)
    await ws.disconnect()


async def test_it_answers_a_snapshot_request():
    await database_sync_to_async(make_league)("spring_cup", 2)
    ws = communicator("/ws/leagues/spring_cup/")
    await ws.connect(timeout=2)
    await ws.receive_json_from(timeout=2)
    await ws.send_json_to({"type": "snapshot"})
    again = await ws.receive_json_from(timeout=2)
    assert again["type"] == "snapshot"
    assert again["data"]["league"]["league_id"] == "spring_cup"
    await ws.disconnect()


async def test_it_refuses_unknown_leagues_and_foreign_origins():
    ws = communicator("/ws/leagues/nope/")
    connected, code = await ws.connect(timeout=2)
    assert not connected
    assert code == 4404
    await database_sync_to_async(make_league)("spring_cup", 2)
    foreign = WebsocketCommunicator(
        application, "/ws/leagues/spring_cup/", headers=[(b"origin", b"http://evil.example")]
    )
    connected, _ = await foreign.connect(timeout=2)
    assert not connected
