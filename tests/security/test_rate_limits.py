"""Rate limits on the LM's /mcp: per token and per client address, E017 + HTTP 429, shared via Redis."""

from __future__ import annotations

import os

import pytest
from asgiref.sync import async_to_sync

from league.models import Event, Player
from league.ratelimit import RateLimiter
from leagueproto.errors import LeagueError
from tests.league.lm_support import make_league, message, player_meta, post, register_player


def _query(sender: str, token: str, **fields) -> dict:
    return message("LEAGUE_QUERY", sender, auth_token=token, query_type="GET_STANDINGS", **fields)


def _rpc(method: str, params: dict, rid: int = 1) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def test_a_token_over_its_league_limit_gets_429_and_a_retryable_e017(lm_server):
    make_league(rate_limit_per_minute=3)
    p1 = register_player(lm_server, "alpha", league_id="test_league")
    p2 = register_player(lm_server, "beta", league_id="test_league")
    for _ in range(3):
        ok = post(lm_server, _rpc("league_query", _query("player:P01", p1["auth_token"], league_id="test_league")))
        assert ok.status_code == 200 and ok.json()["result"]["success"] is True
    events_before = Event.objects.count()
    refused = post(lm_server, _rpc("league_query", _query("player:P01", p1["auth_token"], league_id="test_league")))
    assert refused.status_code == 429
    reply = refused.json()["result"]
    assert reply["message_type"] == "LEAGUE_ERROR" and reply["error_code"] == "E017"
    assert reply["error_name"] == "RATE_LIMIT_EXCEEDED" and reply["retryable"] is True
    assert reply["context"]["per"] == "token" and reply["context"]["limit_per_minute"] == 3
    assert Event.objects.count() == events_before  # refused before any logging or database work
    # Another player's token has its own bucket.
    other = post(lm_server, _rpc("league_query", _query("player:P02", p2["auth_token"], league_id="test_league")))
    assert other.status_code == 200 and other.json()["result"]["success"] is True


def test_registrations_from_one_address_are_limited_per_league(lm_server, settings):
    settings.MCP_RATE_LIMIT_ADDRESS_FACTOR = 1
    make_league(rate_limit_per_minute=2)
    for name in ("a", "b"):
        assert register_player(lm_server, name, league_id="test_league")["status"] == "ACCEPTED"
    meta = player_meta(display_name="c")
    refused = post(
        lm_server,
        _rpc(
            "tools/call",
            {
                "name": "register_player",
                "arguments": message("LEAGUE_REGISTER_REQUEST", "player:c", league_id="test_league", player_meta=meta),
            },
        ),
    )
    assert refused.status_code == 429
    result = refused.json()["result"]
    assert result["isError"] is True and result["structuredContent"]["error_code"] == "E017"
    assert result["structuredContent"]["context"]["per"] == "address"
    assert Player.objects.count() == 2


def test_requests_naming_no_league_use_the_site_wide_address_limit(lm_server, settings):
    settings.MCP_RATE_LIMIT_PER_ADDRESS = 2
    make_league(rate_limit_per_minute=1000)
    assert register_player(lm_server, "a")["status"] == "ACCEPTED"
    assert register_player(lm_server, "b")["status"] == "ACCEPTED"
    refused = post(
        lm_server,
        _rpc(
            "register_player", message("LEAGUE_REGISTER_REQUEST", "player:c", player_meta=player_meta(display_name="c"))
        ),
    )
    assert refused.status_code == 429 and refused.json()["result"]["error_code"] == "E017"
    # Naming the league draws from that league's (larger) bucket instead.
    assert register_player(lm_server, "d", league_id="test_league")["status"] == "ACCEPTED"


def test_the_default_limits_let_a_busy_referee_report_for_a_minute(db):
    """100 reports a second from one referee on one address, for a minute: a 100-player league's
    pace in the benchmarks. None is refused with the default limits."""
    make_league("busy", open_seconds=None, rate_limit_per_minute=500)
    limiter = RateLimiter()
    report = {"sender": "referee:REF01", "auth_token": "ref-token", "league_id": "busy"}

    async def burst() -> None:
        for _ in range(6000):
            await limiter.check(report, None, "10.1.2.3")

    async_to_sync(burst)()
    # while a player's token is held to the league's 500 a minute: the bucket refills at 500/60
    # a second as the calls go on (a slow machine takes a while over them), so 1,000 calls, not 501
    with pytest.raises(LeagueError) as exc:
        async_to_sync(_calls)(limiter, {**report, "sender": "player:P01", "auth_token": "p-token"}, 1000)
    assert exc.value.code == "E017" and exc.value.http_status == 429


async def _calls(limiter: RateLimiter, message: dict, count: int) -> None:
    for _ in range(count):
        await limiter.check(message, None, None)


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="sharing a limit between processes needs REDIS_URL")
def test_with_redis_several_lm_processes_share_one_limit(transactional_db):
    make_league("shared", open_seconds=None, rate_limit_per_minute=4)
    first, second = RateLimiter(), RateLimiter()  # as two LM processes would hold
    call = {"sender": "player:P01", "auth_token": "shared-token", "league_id": "shared"}

    async def run() -> None:
        for limiter in (first, second, first, second):
            await limiter.check(call, None, None)
        with pytest.raises(LeagueError) as exc:
            await second.check(call, None, None)
        assert exc.value.code == "E017"

    async_to_sync(run)()
