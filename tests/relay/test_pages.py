"""A player's page says how the player is reached: directly, or through the relay with the state
of its socket, as the socket opens and closes."""

from __future__ import annotations

import json

import pytest
from websockets.sync.client import connect

from league.models import Player as PlayerRow
from players.connect import connect_url
from tests.league.lm_support import make_league
from tests.relay.test_relay import _register, _relay_player
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def _page(client, player_id: str) -> str:
    response = client.get(f"/leagues/relay_unit/players/{player_id}/")
    assert response.status_code == 200
    return response.content.decode()


def test_the_player_page_shows_direct_or_relay_and_the_socket_state(lm_server, client):
    league = make_league("relay_unit")
    direct = _register(lm_server, "dee")
    assert "Direct: the league calls the player" in _page(client, direct["player_id"])

    relayed = _relay_player(lm_server)
    player_id = relayed["player_id"]
    page = _page(client, player_id)
    assert 'data-connection="relay"' in page and ">not connected<" in page
    with connect(connect_url(lm_server)) as socket:
        socket.send(json.dumps({"auth_token": relayed["auth_token"]}))
        assert json.loads(socket.recv(5))["type"] == "welcome"
        assert ">connected<" in _page(client, player_id)
    wait_until(lambda: PlayerRow.objects.get(league=league, player_id=player_id).relay_channel == "", timeout=10)
    assert ">not connected<" in _page(client, player_id)
