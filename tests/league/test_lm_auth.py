"""Authentication on the LM's tools (docs/protocol.md, "Registering": E011, E012, E013, E005; Bearer
header)."""

from __future__ import annotations

import hashlib
import hmac

from league import actions
from league.auth import lm_token, new_token
from league.models import Player, hash_token
from tests.league.lm_support import call, make_league, message, register_player, register_referee


def _query(sender: str, token: str | None = None, **fields) -> dict:
    return message(
        "LEAGUE_QUERY", sender, query_type="GET_STANDINGS", **({"auth_token": token} if token else {}), **fields
    )


def test_it_answers_e011_without_a_token(lm_server):
    make_league()
    register_player(lm_server, "alpha")
    reply = call(lm_server, "league_query", _query("player:P01"))
    assert reply["error_code"] == "E011" and reply["error_name"] == "AUTH_TOKEN_MISSING"


def test_it_answers_e012_for_an_unknown_token_or_another_agents_token(lm_server):
    make_league()
    p1 = register_player(lm_server, "alpha")
    register_player(lm_server, "beta")
    assert call(lm_server, "league_query", _query("player:P01", "not-a-token"))["error_code"] == "E012"
    reply = call(lm_server, "league_query", _query("player:P02", p1["auth_token"]))
    assert reply["error_code"] == "E012" and "player:P02" in reply["error_description"]
    assert call(lm_server, "league_query", _query("player:P01", p1["auth_token"]))["success"] is True


def test_a_token_is_bound_to_its_league(lm_server):
    make_league("first")
    p1 = register_player(lm_server, "alpha", league_id="first")
    make_league("second")
    register_player(lm_server, "alpha", league_id="second")
    reply = call(lm_server, "league_query", _query("player:P01", p1["auth_token"], league_id="second"))
    assert reply["error_code"] == "E012"
    ok = call(lm_server, "league_query", _query("player:P01", p1["auth_token"], league_id="first"))
    assert ok["league_id"] == "first"


def test_it_answers_e005_and_e013_for_unregistered_senders(lm_server):
    make_league()
    reply = call(lm_server, "league_query", _query("player:P07", "whatever"))
    assert reply["error_code"] == "E005" and reply["error_name"] == "PLAYER_NOT_REGISTERED"
    reply = call(lm_server, "league_query", _query("referee:REF04", "whatever"))
    assert reply["error_code"] == "E013" and reply["error_name"] == "REFEREE_NOT_REGISTERED"


def test_it_accepts_the_token_as_a_bearer_header(lm_server):
    make_league()
    p1 = register_player(lm_server, "alpha")
    reply = call(
        lm_server, "league_query", _query("player:P01"), headers={"Authorization": f"Bearer {p1['auth_token']}"}
    )
    assert reply["message_type"] == "LEAGUE_QUERY_RESPONSE" and reply["success"] is True
    wrong = call(lm_server, "league_query", _query("player:P01"), headers={"Authorization": "Bearer nope"})
    assert wrong["error_code"] == "E012"


def test_a_suspended_player_is_refused(lm_server):
    make_league()
    p1 = register_player(lm_server, "alpha")
    actions.set_agent_status(Player.objects.get(player_id="P01"), "SUSPENDED")
    reply = call(lm_server, "league_query", _query("player:P01", p1["auth_token"]))
    assert reply["error_code"] == "E012" and "suspended" in reply["error_description"]


def test_a_player_cannot_register_a_referee(lm_server):
    make_league()
    p1 = register_player(lm_server, "alpha")
    request = message(
        "REFEREE_REGISTER_REQUEST",
        "player:P01",
        auth_token=p1["auth_token"],
        referee_meta={
            "display_name": "sneaky",
            "game_types": ["even_odd"],
            "contact_endpoint": "http://127.0.0.1:9401/mcp",
        },
    )
    assert call(lm_server, "register_referee", request)["error_code"] == "E012"
    request["sender"] = "referee:sneaky"  # a referee name, but a player's token
    assert call(lm_server, "register_referee", request)["error_code"] == "E012"
    assert register_referee(lm_server, "honest")["referee_id"] == "REF01"


def test_a_player_cannot_query_as_another_player(lm_server):
    make_league()
    p1 = register_player(lm_server, "alpha")
    register_player(lm_server, "beta")
    for query_type in ("GET_NEXT_MATCH", "GET_PLAYER_STATS"):
        request = message(
            "LEAGUE_QUERY",
            "player:P01",
            auth_token=p1["auth_token"],
            query_type=query_type,
            query_params={"player_id": "P02"},
        )
        reply = call(lm_server, "league_query", request)
        assert reply["error_code"] == "E012", reply


def test_the_lm_token_is_the_hmac_of_the_agent_and_follows_the_secret_key(settings):
    def hmac_of(key: str, text: str) -> str:
        return hmac.new(key.encode(), text.encode(), hashlib.sha256).hexdigest()

    first = lm_token("lg", "P01", "a" * 64)
    assert first == hmac_of(settings.SECRET_KEY, f"lg:P01:{'a' * 64}")
    assert lm_token("lg", "P01", "a" * 64) == first  # the kept one
    assert lm_token("lg", "P01", "b" * 64) == hmac_of(settings.SECRET_KEY, f"lg:P01:{'b' * 64}") != first
    assert lm_token("lg", "P02", "a" * 64) != first
    settings.SECRET_KEY = "another secret key, long enough for Django's checks " * 2
    assert lm_token("lg", "P01", "a" * 64) == hmac_of(settings.SECRET_KEY, f"lg:P01:{'a' * 64}") != first


def test_no_token_or_referee_key_starts_with_a_dash():
    """A key is passed on a command line (`runreferee --key KEY`): one starting with "-" would be
    read as an option. Without the rule about one in 64 would; 2,000 draws all pass."""
    tokens = [new_token() for _ in range(2000)]
    assert not [token for token, _ in tokens if token.startswith("-")]
    assert all(hash_token(token) == digest for token, digest in tokens)
