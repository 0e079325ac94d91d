"""Who may call a relay endpoint (league/relay/callers.py): the tokens of one player, read by index."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from league.auth import lm_token
from league.conductor.common import match_token
from league.models import AgentStatus, Match, Player
from league.relay.callers import FINISHED_GRACE, LEAGUE_MANAGER, credentials
from leagueproto.matchtoken import player_token
from tests.league.lm_support import make_league

pytestmark = pytest.mark.django_db


def relay_players(league, count: int) -> list[Player]:
    return [
        Player.objects.create(
            league=league,
            player_id=f"P{n:02d}",
            display_name=f"Player {n}",
            endpoint=f"http://127.0.0.1/relay/{league.league_id}/P{n:02d}/mcp",
            connection=Player.Connection.RELAY,
            token_hash=f"{n:064x}",
        )
        for n in range(1, count + 1)
    ]


def test_a_player_is_called_by_the_lm_and_by_the_referees_of_its_own_matches_only():
    league = make_league("callers")
    p1, p2, p3 = relay_players(league, 3)
    from league.actions.leagues import create_match

    create_match(league, 1, p1, p2, match_id="R1M1")
    create_match(league, 1, p2, p3, match_id="R1M2")
    Match.objects.filter(league=league).update(status=Match.Status.ASSIGNED, attempt=1)  # sent to a referee
    found = credentials("callers", "P01")
    assert found.exists
    secret = match_token("callers", "R1M1", 1)
    assert found.tokens == {
        lm_token("callers", "P01", p1.token_hash): LEAGUE_MANAGER,
        player_token(secret, "P01"): "referee:R1M1",
    }
    # The opponent's own token for the same match is not one that may call P01.
    assert player_token(secret, "P02") not in found.tokens
    assert not credentials("callers", "P09").exists
    # A match finished longer ago than the grace for its referee's last calls no longer counts.
    Match.objects.filter(match_id="R1M1").update(
        status=Match.Status.FINISHED, finished_at=timezone.now() - timedelta(seconds=FINISHED_GRACE + 1)
    )
    assert credentials("callers", "P01").tokens == {lm_token("callers", "P01", p1.token_hash): LEAGUE_MANAGER}
    Player.objects.filter(pk=p3.pk).update(status=AgentStatus.REMOVED)
    assert not credentials("callers", "P03").exists


@pytest.mark.parametrize("size", [4, 24])
def test_reading_a_players_tokens_costs_the_same_whatever_the_leagues_size(size):
    """The read is by the player's row and its own matches: a league of 24 relay players with 276
    live matches costs the queries a league of 4 does, and reads only the player's matches."""
    league = make_league(f"size{size}")
    players = relay_players(league, size)
    from league.actions.leagues import create_match

    n = 0
    for i, a in enumerate(players):
        for b in players[i + 1 :]:
            n += 1
            create_match(league, 1, a, b, match_id=f"R1M{n}")
    Match.objects.filter(league=league).update(status=Match.Status.ASSIGNED, attempt=1)
    with CaptureQueriesContext(connection) as queries:
        found = credentials(league.league_id, "P01")
    assert len(queries) == 3  # the player, its matches as A, its matches as B
    assert len(found.tokens) == 1 + (size - 1)  # the LM's, and one per match of P01
