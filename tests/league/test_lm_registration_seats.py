"""Seats: one agent holds one seat whatever its URL's spelling (an indexed lookup of the stored
canonical form, so a registration costs the same in a league of 3 or of 300), a league may cap the
seats taken from one network, and registration buckets count a network as well as an address."""

from __future__ import annotations

import asyncio

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from league import actions
from league.endpoints import network_of
from league.models import Player
from league.ratelimit import RateLimiter, registration_buckets
from leagueproto.endpoints import canonical_endpoint, canonical_path
from leagueproto.errors import LeagueError
from tests.league.lm_support import make_league, message, player_meta

pytestmark = pytest.mark.django_db


def _register(n: int, client_host: str | None = None, **meta: object) -> actions.Registration:
    return actions.register_player(
        None,
        player_meta(f"http://127.0.0.1:{20000 + n}/mcp", display_name=f"p{n}", **meta),
        None,
        client_host=client_host,
    )


@pytest.mark.parametrize(
    "path", ["/mcp", "/mcp/", "/mcp/.", "//mcp", "/%6dcp", "/%6Dcp", "/x/../mcp", "/mcp;x", "/./mcp", "///mcp//"]
)
def test_every_spelling_of_a_path_is_one_path(path):
    assert canonical_path(path) == "/mcp"
    assert canonical_endpoint(f"http://LOCALHOST:8101{path}") == "http://127.0.0.1:8101/mcp"


def test_escapes_that_are_not_plain_characters_stay_escapes():
    assert canonical_path("/a%2fb") == "/a%2Fb"  # an escaped slash is no separator
    assert canonical_path("") == "" and canonical_path("/") == ""


def test_a_registration_does_the_same_number_of_queries_whatever_the_leagues_size():
    make_league(max_players=500)

    def queries_of_one(n: int) -> int:
        with CaptureQueriesContext(connection) as captured:
            assert _register(n).status == "ACCEPTED"
        return len(captured)

    assert _register(0).status == "ACCEPTED"  # the first one reads the (empty) list of ids once more
    small = queries_of_one(1)
    for n in range(2, 300):
        assert _register(n).status == "ACCEPTED"
    assert queries_of_one(300) == small
    assert small <= 10


def test_the_seat_is_stored_once_in_canonical_form():
    make_league()
    reg = actions.register_player(None, player_meta("HTTP://LocalHost:20001//x/../MCP/;v=1"), None)
    assert reg.status == "ACCEPTED"
    assert Player.objects.get().canonical_endpoint == "http://127.0.0.1:20001/MCP"


def test_a_league_caps_the_seats_taken_from_one_network():
    make_league(max_seats_per_network=2)
    assert _register(1, "10.4.4.1").status == "ACCEPTED"
    assert _register(2, "10.4.4.200").status == "ACCEPTED"
    refused = _register(3, "10.4.4.7")
    assert refused.status == "REJECTED"
    assert refused.reason == "Too many seats from your network: this league takes at most 2 agents from 10.4.4.0/24"
    assert _register(4, "10.4.5.1").status == "ACCEPTED"  # another /24
    assert list(Player.objects.values_list("registered_from", flat=True)) == ["10.4.4.0/24"] * 2 + ["10.4.5.0/24"]


def test_by_default_a_whole_class_behind_one_address_registers():
    make_league()
    assert [_register(n, "192.0.2.10").status for n in range(40)] == ["ACCEPTED"] * 40


def test_networks_are_a_slash_24_and_a_slash_64():
    assert network_of("10.1.2.3") == network_of("10.1.2.250") == "10.1.2.0/24"
    assert network_of("2001:db8:1:2::1") == network_of("2001:db8:1:2:ffff::9") == "2001:db8:1:2::/64"
    assert network_of("::ffff:10.1.2.3") == "10.1.2.0/24"
    assert network_of(None) == network_of("not-an-address") == ""


def test_rotating_addresses_of_one_network_share_its_registration_bucket(settings):
    settings.REGISTRATION_RATE_EXEMPT_NETWORKS = []
    settings.REGISTRATION_RATE_PER_ADDRESS = 100
    settings.REGISTRATION_RATE_PER_NETWORK = 3
    msg = message("LEAGUE_REGISTER_REQUEST", "player:x", league_id="test_league")
    keys = {b.key for b in registration_buckets(msg, "2001:db8::1")} & {
        b.key for b in registration_buckets(msg, "2001:db8::2")
    }
    assert any(key.endswith("rn:2001:db8::/64") for key in keys)
    limiter = RateLimiter()

    async def attempts() -> list[str]:
        outcomes = []
        for n in range(5):
            try:
                await limiter.check(msg, None, f"2001:db8::{n + 1:x}", "register_player")
                outcomes.append("ok")
            except LeagueError as err:
                outcomes.append(err.context["per"])
        return outcomes

    assert asyncio.run(attempts()) == ["ok", "ok", "ok", "network", "network"]


def test_a_teacher_sets_the_cap_in_the_admin(admin_client):
    page = admin_client.get(reverse("admin:league_league_add")).content.decode()
    assert 'name="max_seats_per_network"' in page


def test_an_endpoint_changed_in_the_admin_moves_its_seat(admin_client):
    league = make_league()
    player = Player.objects.create(
        league=league, player_id="P01", display_name="a", endpoint="http://LOCALHOST:20900//mcp"
    )
    assert player.canonical_endpoint == "http://127.0.0.1:20900/mcp"
    player.endpoint = "http://127.0.0.1:20901/mcp/"
    player.save(update_fields=["endpoint"])
    assert Player.objects.get().canonical_endpoint == "http://127.0.0.1:20901/mcp"
