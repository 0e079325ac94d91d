"""Each player's own match token (leagueproto/matchtoken.py): HMAC-SHA256 keyed by the match token
over the player's id, in hex; the digest the League Manager shows a player is the SHA-256 of it."""

from __future__ import annotations

import hashlib
import hmac

from leagueproto.matchtoken import player_token, token_digest


def test_it_is_hmac_sha256_of_the_player_id_keyed_by_the_match_token():
    expected = hmac.new(b"match-secret", b"P01", hashlib.sha256).hexdigest()
    assert player_token("match-secret", "P01") == expected
    assert len(expected) == 64 and int(expected, 16) >= 0


def test_each_player_of_a_match_gets_another_token_and_none_is_the_match_token():
    a, b = player_token("match-secret", "P01"), player_token("match-secret", "P02")
    assert a != b and "match-secret" not in (a, b)
    # Deterministic: a resent invitation carries the same token; another match (or attempt), another.
    assert player_token("match-secret", "P01") == a
    assert player_token("match-secret-2", "P01") != a


def test_the_digest_is_the_sha256_of_the_token_in_hex():
    token = player_token("match-secret", "P02")
    assert token_digest(token) == hashlib.sha256(token.encode()).hexdigest()
    assert token_digest(token) != token_digest(player_token("match-secret", "P01"))
