"""The public pages render the league from the database, with clear empty states."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from league.models import Event, League, Match, MatchResult, Player
from tests.browser.league_data import answer_moves_in, make_league, play, play_round

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


@pytest.mark.django_db(transaction=True)  # the league page is read on its own threads (page_read)
def test_it_shows_registration_as_the_empty_state(client):
    league = make_league("open_cup", players=3, status="REGISTERING", scheduled=False)
    page = client.get("/leagues/open_cup/").content.decode()
    closes = league.registration_closes_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert "Registration open, 3 players registered." in page
    assert f'<time class="local" datetime="{closes}" data-format="time"' in page  # in the join panel
    assert "No matches played yet." in page
    assert "The schedule is drawn when the league starts." in page


@pytest.mark.django_db(transaction=True)  # the league page is read on its own threads (page_read)
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


ODD_NAMES = ["<script>alert(1)</script>", "", "日本語リーグ", "x" * 100, "Ω & \"quotes\" 'too'", "🙂"]
ODD_IDS = ["bad id!", "a/b", "ünï", "with space", "x" * 64, "dots.in.it", "%41", "-"]


def _every_page(client, league_id: str, player_ids, match_ids, referee_ids) -> None:
    """Fetch every page of one league: none may fail (404 for what does not exist)."""
    from urllib.parse import quote

    base = f"/leagues/{quote(league_id, safe='')}/"
    urls = [base, f"/api/leagues/{quote(league_id, safe='')}/live/"]
    urls += [f"{base}players/{quote(p, safe='')}/" for p in player_ids]
    urls += [f"{base}matches/{quote(m, safe='')}/" for m in match_ids]
    urls += [f"{base}referees/{quote(r, safe='')}/" for r in referee_ids]
    for url in urls:
        response = client.get(url)
        assert response.status_code in (200, 404), (url, response.status_code)


def test_no_stored_data_makes_a_page_fail_in_any_state(client):
    """Leagues in every state, with odd names and ids stored before ids were checked, odd agent
    names and junk in results and logs: every page answers (a league whose id holds "/" cannot
    have a page: the home page says so instead of failing)."""
    from tests.browser.league_data import make_league

    statuses = [s for s, _ in League.Status.choices]
    for i in range(len(ODD_IDS) * 2):
        status = statuses[i % len(statuses)]
        league_id = (ODD_IDS[i % len(ODD_IDS)] if i < len(ODD_IDS) else f"{i}{ODD_IDS[i % len(ODD_IDS)]}")[:64]
        league = make_league(f"seed_{i}", players=3, status=status, scheduled=status != "INITIALIZING")
        League.objects.filter(pk=league.pk).update(league_id=league_id, name=ODD_NAMES[i % len(ODD_NAMES)])
        Player.objects.filter(league=league, player_id="P02").update(display_name=ODD_NAMES[(i + 1) % len(ODD_NAMES)])
        league.refresh_from_db()
        matches = list(Match.objects.filter(league=league))
        if len(matches) > 1:
            MatchResult.objects.filter(pk=play(matches[1], "odd", "odd", 3).pk).update(
                details=["not", "a", "dict"], log={}
            )
        if matches:
            result = play(matches[0], "even", "odd", 4)
            # What a careless referee may report: not our shapes at all.
            MatchResult.objects.filter(pk=result.pk).update(
                details={
                    "choices": ["even"],
                    "scores": {"P01": "x"},
                    "rounds": [1, {"moves": "no"}],
                    "drawn_number": "?",
                },
                log=[1, "x", {"direction": "OUT", "peer": "P01", "latency_ms": "slow", "attempt": "2", "at": None}],
            )
        if status == League.Status.COMPLETED:
            League.objects.filter(pk=league.pk).update(champion=league.players.first())
        Event.objects.create(
            league=league, direction="OUT", kind="ROUND_ANNOUNCEMENT", agent="P01", payload={"outcome": 5}
        )
        _every_page(
            client,
            league_id,
            [*league.players.values_list("player_id", flat=True), "nope"],
            [*(m.match_id for m in matches[:2]), "R9M9"],
            [*league.referees.values_list("referee_id", flat=True)],
        )
    response = client.get("/")
    assert response.status_code == 200
    home = response.content.decode()
    assert home.count('class="card league-card"') == len(ODD_IDS) * 2
    assert "This league's id cannot be part of an address" in home  # the "a/b" ones
    assert "<script>alert(1)</script>" not in home


@pytest.mark.django_db(transaction=True)  # the league page is read on its own threads (page_read)
def test_the_league_list_and_the_api_show_the_same_progress(client):
    """One number for how far a league has come: the list's bar, the league page's bar and the
    API's ``progress.percent`` (a league completed without a match counts as done in all three)."""
    play_round(make_league("spring_cup", players=4), 1)  # 2 of 6 matches
    make_league("open_cup", players=3, status="REGISTERING", scheduled=False)
    make_league("empty_cup", players=0, status="COMPLETED", scheduled=False)
    cards = {
        league_id: int(percent)
        for league_id, percent in re.findall(
            r'data-league="(\w+)".*?class="progress-bar" style="width: (\d+)%"', client.get("/").content.decode(), re.S
        )
    }
    api = {
        league_id: client.get(f"/api/leagues/{league_id}/live/").json()["progress"]["percent"] for league_id in cards
    }
    pages = {
        league_id: int(
            re.search(
                r'id="progress-bar" class="progress-bar" style="width: (\d+)%"',
                client.get(f"/leagues/{league_id}/").content.decode(),
            )[1]
        )
        for league_id in cards
    }
    assert cards == api == pages == {"spring_cup": 33, "open_cup": 0, "empty_cup": 100}


def test_the_player_page_says_when_its_answers_keep_every_round_waiting(client):
    league = make_league("spring_cup", players=2)
    League.objects.filter(pk=league.pk).update(move_timeout=5.0)
    match = Match.objects.get(league=league, match_id="R1M1")
    play(match, "even", "odd", 4)
    answer_moves_in(match, {"P01": [4800.0, 4700.0, 4900.0], "P02": [40.0, 60.0, 4900.0]})
    slow = client.get("/leagues/spring_cup/players/P01/").content.decode()
    assert 'id="slow-note"' in slow
    assert "answers a move in 4.8 s" in slow
    assert "the move timeout is 5 s: every round waits for this player" in slow
    assert 'id="slow-note"' not in client.get("/leagues/spring_cup/players/P02/").content.decode()


class CacheReads:
    """Django's cache as the league page's view uses it, with the keys it reads noted."""

    def __init__(self) -> None:
        from django.core.cache import cache

        self.cache, self.keys = cache, []

    def __getattr__(self, name: str):
        return getattr(self.cache, name)

    def get(self, key: str, *args, **kwargs):
        self.keys.append(key)
        return self.cache.get(key, *args, **kwargs)

    def page_reads(self) -> int:
        """How many times a kept page's bytes were read (``<record key>:<rendering>``)."""
        return sum(1 for key in self.keys if key.startswith("live-page:") and key.count(":") == 2)


@pytest.mark.django_db(transaction=True)  # the league page is read on its own threads (page_read)
def test_a_process_serves_the_kept_page_it_holds_and_reads_anothers_rendering_once(client, monkeypatch):
    """What the cache shares between processes (Redis) is a small record per page and the page's
    bytes once per rendering: a process's viewers are served the bytes it holds, not a read of
    ~250 KB from the cache each; a rendering it did not make is read once, then held."""
    from league.pages import views

    make_league("spring_cup", players=4)
    reads = CacheReads()
    monkeypatch.setattr(views, "cache", reads)
    page = client.get("/leagues/spring_cup/").content
    assert all(client.get("/leagues/spring_cup/").content == page for _ in range(5))
    assert reads.page_reads() == 0  # rendered here: held since
    key = next(key for key in reads.keys if key.startswith("live-page:") and key.count(":") == 1)
    token, held = views._pages[key]
    assert held == page
    views._pages[key] = ("another rendering", b"not this page")  # as if held from an older one
    assert all(client.get("/leagues/spring_cup/").content == page for _ in range(5))
    assert reads.page_reads() == 1 and views._pages[key] == (token, page)
