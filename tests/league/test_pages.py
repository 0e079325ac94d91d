"""The public pages render the league from the database, with clear empty states."""

from __future__ import annotations

import pytest
from django.test import Client

from league.models import Match
from tests.browser.league_data import make_league, play, play_round

pytestmark = pytest.mark.django_db


@pytest.fixture
def client() -> Client:
    return Client()


def test_it_lists_leagues_and_says_when_there_are_none(client):
    assert "No leagues yet" in client.get("/").content.decode()
    make_league("spring_cup", players=4)
    page = client.get("/").content.decode()
    assert "Spring Cup" in page
    assert "4 players" in page


def test_it_shows_registration_as_the_empty_state(client):
    league = make_league("open_cup", players=3, status="REGISTERING", scheduled=False)
    page = client.get("/leagues/open_cup/").content.decode()
    closes = league.registration_closes_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert "Registration open, 3 players registered." in page
    assert f'<time class="local" datetime="{closes}" data-format="time"' in page  # in the join panel
    assert "No matches played yet." in page
    assert "The schedule is drawn when the league starts." in page


def test_it_shows_standings_feed_and_schedule(client):
    league = make_league("spring_cup", players=4)
    play_round(league, 1)
    play(Match.objects.get(match_id="R2M1"), "odd", "even", 5, technical="B")
    page = client.get("/leagues/spring_cup/").content.decode()
    assert page.index("R2M1") < page.index("R1M1")  # newest first
    assert 'class="feed-item tech"' in page
    assert "technical loss" in page
    assert 'data-player="P03"' in page
    assert "Round 2 of 3 in play." in page
    assert 'id="snapshot"' in page
    assert client.get("/leagues/nope/").status_code == 404


def test_it_replays_a_match_log(client):
    league = make_league("spring_cup", players=2)
    play(Match.objects.get(league=league, match_id="R1M1"), "even", "odd", 7, technical="B")
    page = client.get("/leagues/spring_cup/matches/R1M1/").content.decode()
    assert "CHOOSE_PARITY_CALL" in page
    assert "attempt 2" in page
    assert "timeout" in page
    assert "4.1 ms" in page
    assert "&quot;message_type&quot;: &quot;CHOOSE_PARITY_CALL&quot;" in page  # the message, as JSON
    assert client.get("/leagues/spring_cup/matches/R7M7/").status_code == 404


def test_it_shows_player_and_referee_pages(client):
    league = make_league("spring_cup", players=4)
    play_round(league, 1)
    player = client.get("/leagues/spring_cup/players/P02/").content.decode()
    assert "Bravo" in player
    assert "0%" in player  # picks even 0% of the time
    assert "Alpha" in player  # the opponent
    referee = client.get("/leagues/spring_cup/referees/REF01/").content.decode()
    assert "matches reported" in referee
    assert "R1M2" in referee
    assert client.get("/leagues/spring_cup/players/P99/").status_code == 404


def test_it_serves_its_static_files(client):
    response = client.get("/static/league/league.js")
    assert response.status_code == 200
    assert client.get("/static/vendor/chart.umd.min.js").status_code == 200
