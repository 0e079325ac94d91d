"""Who may call a relay endpoint (league/relay/callers.py): a league's tokens, read in one query."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from league.actions.leagues import create_match
from league.auth import lm_token
from league.conductor.common import match_token
from league.models import Match, Player
from league.relay.callers import FINISHED_GRACE, LEAGUE_MANAGER, Book, credentials
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


def referee_token(league_id: str, match_id: str, player_id: str) -> str:
    return player_token(match_token(league_id, match_id, 1), player_id)


def test_a_player_is_called_by_the_lm_and_by_the_referee_of_its_own_match_with_its_own_token():
    league = make_league("callers")
    p1, p2, _ = relay_players(league, 3)
    create_match(league, 1, p1, p2, match_id="R1M1")
    Match.objects.filter(league=league).update(status=Match.Status.ASSIGNED, attempt=1)  # sent to a referee
    book = Book()
    book.update(credentials("callers"), 0.0)
    assert book.holder("P01", lm_token("callers", "P01", p1.token_hash)) == LEAGUE_MANAGER
    assert book.holder("P01", referee_token("callers", "R1M1", "P01")) == "referee:R1M1"
    # The opponent's own token for the match is not one that may call P01, nor P03's anything.
    assert book.holder("P01", referee_token("callers", "R1M1", "P02")) is None
    assert book.holder("P03", referee_token("callers", "R1M1", "P01")) is None


def test_a_finished_matchs_token_is_kept_for_the_grace_and_no_longer():
    league = make_league("grace")
    p1, p2 = relay_players(league, 2)
    create_match(league, 1, p1, p2, match_id="R1M1")
    in_play = Match.objects.filter(league=league)
    in_play.update(status=Match.Status.RUNNING, attempt=1)
    book = Book()
    book.update(credentials("grace"), 100.0)
    token = referee_token("grace", "R1M1", "P01")
    assert book.holder("P01", token) == "referee:R1M1"
    # Finished: later reads look at the matches in play only, and the token stays for the grace
    # (the referee's GAME_OVER comes after its report) ...
    in_play.update(status=Match.Status.FINISHED, finished_at=timezone.now())
    book.update(credentials("grace", finished_too=False), 101.0)
    assert book.holder("P01", token) == "referee:R1M1"
    book.update(credentials("grace", finished_too=False), 101.0 + FINISHED_GRACE - 1)
    assert book.holder("P01", token) == "referee:R1M1"
    # ... and not after it.
    book.update(credentials("grace", finished_too=False), 101.0 + FINISHED_GRACE + 1)
    assert book.holder("P01", token) is None
    # A first read (a process that starts) sees the recently finished matches themselves.
    assert referee_token("grace", "R1M1", "P01") in credentials("grace").tokens
    Match.objects.filter(league=league).update(finished_at=timezone.now() - timedelta(seconds=FINISHED_GRACE + 1))
    assert referee_token("grace", "R1M1", "P01") not in credentials("grace").tokens


@pytest.mark.parametrize("finished", [0, 120])
def test_a_later_read_costs_the_same_however_many_matches_have_finished(finished):
    league = make_league(f"reads{finished}")
    players = relay_players(league, 16)
    n = 0
    for i, a in enumerate(players):
        for b in players[i + 1 :]:
            n += 1
            create_match(league, 1, a, b, match_id=f"R1M{n}")
    matches = Match.objects.filter(league=league).order_by("pk")
    done = list(matches.values_list("pk", flat=True)[:finished])
    Match.objects.filter(pk__in=done).update(status=Match.Status.FINISHED, finished_at=timezone.now())
    Match.objects.exclude(pk__in=done).filter(league=league).update(status=Match.Status.ASSIGNED, attempt=1)
    in_play = Match.objects.filter(league=league, status=Match.Status.ASSIGNED).count()
    with CaptureQueriesContext(connection) as queries:
        found = credentials(league.league_id, finished_too=False)
    assert len(queries) == 2  # the relay players, their matches in play
    assert len(found.tokens) == 16 + 2 * in_play  # the LM's for each, and one per player per match in play
