"""What teachers found, each checked through the real pages in Chromium: odd stored ids, a league with no
referee, counts and states that follow the websocket on every page, ties, and the smaller ones.
(The admin's are in test_admin_workflow.py; the demo's busy port in tests/test_demo.py.)"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from league import actions
from league.models import AgentStatus, League, Match, Player, Referee
from tests.browser.league_data import complete, make_league, play, play_bo5, play_round

pytestmark = [pytest.mark.browser, pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume")]


def wait_version(page, at_least: int = 1) -> None:
    page.wait_for_function("n => Number(document.getElementById('league-page').dataset.version) >= n", arg=at_least)


def wait_main_live(page) -> None:
    page.wait_for_function("() => document.getElementById('main').dataset.live === 'live'")


def test_a_league_stored_with_an_odd_id_still_has_its_pages(site, page):
    league = make_league("seed", players=2)
    League.objects.filter(pk=league.pk).update(league_id="bad id!", name="<b>Odd</b>")
    page.goto(f"{site.base}/")
    page.click(".league-card")
    wait_version(page)
    assert page.locator("h1").inner_text() == "<b>Odd</b>"
    assert page.locator("#league-status").inner_text() == "RUNNING"
    page.click("#standings-body a >> nth=0")
    assert page.locator("h1").inner_text().startswith("Alpha")


def test_a_league_in_play_without_a_live_referee_says_so_until_one_registers(site, page):
    make_league("spring_cup", players=2, referees=0)
    page.goto(f"{site.base}/leagues/spring_cup/")
    wait_version(page)
    warning = page.locator("#referee-warning")
    assert warning.is_visible()
    assert warning.inner_text().startswith("No live referee: none has registered with it")
    assert "runreferee --league-id spring_cup" in warning.inner_text()
    league = League.objects.get(league_id="spring_cup")
    referee = Referee.objects.create(
        league=league, referee_id="REF01", display_name="R", endpoint="http://127.0.0.1:9001/mcp", token_hash="x"
    )
    site.broadcast("spring_cup", "referee_registered", {"referee_id": "REF01"})
    page.wait_for_selector("#referee-warning", state="hidden")
    # The snapshot that hid the warning may have counted the referees a moment before it came:
    # the next one, which the same event asked for, has it.
    page.wait_for_function("() => document.getElementById('count-referees').textContent === '1 referee'")
    Referee.objects.filter(pk=referee.pk).update(status=AgentStatus.SUSPENDED)
    site.broadcast("spring_cup", "referee_suspended", {"referee_id": "REF01"})
    page.wait_for_selector("#referee-warning", state="visible")
    assert "its 1 referee is suspended or gone" in warning.inner_text()


def test_the_league_header_counts_and_the_closed_window_follow_without_a_reload(site, page):
    league = make_league("open_cup", players=0, status=League.Status.REGISTERING, scheduled=False)
    # A window that closes a few seconds from now, with no player: the page must say so by itself.
    League.objects.filter(pk=league.pk).update(registration_closes_at=timezone.now() + timedelta(seconds=3))
    page.goto(f"{site.base}/leagues/open_cup/")
    wait_version(page)
    page.evaluate("window.__same = true")
    assert page.locator("#count-players").inner_text() == "0 players"
    assert page.locator("#league-note").inner_text() == "Registration open, 0 players registered."
    Player.objects.create(league=league, player_id="P01", display_name="A", endpoint="http://127.0.0.1:9101/mcp")
    site.broadcast("open_cup", "player_registered", {"player_id": "P01"})
    page.wait_for_function("() => document.getElementById('count-players').textContent === '1 player'")
    # No event comes when the window closes: the countdown reaching zero brings the page up to date.
    page.wait_for_function(
        "() => document.getElementById('league-note').textContent.startsWith('Registration closed with 1 player')",
        timeout=15_000,
    )
    assert page.locator("#join").is_hidden()
    assert page.evaluate("window.__same")


def test_the_league_list_follows_the_websocket(site, page):
    make_league("spring_cup", players=2)
    page.goto(f"{site.base}/")
    wait_main_live(page)
    page.evaluate("window.__same = true")
    assert page.locator(".league-card").count() == 1
    # A league created (the admin and the command announce it to the list) appears.
    with transaction.atomic():
        league = actions.create_league(name="Autumn Cup", league_id="autumn_cup")
    site.send("leagues", "league_created", {"league_id": "autumn_cup"})
    page.wait_for_function("() => document.querySelectorAll('.league-card').length === 2")
    # And its later changes reach the list through the league's own group.
    actions.open_registration(league, 600)
    Player.objects.create(league=league, player_id="P01", display_name="A", endpoint="http://127.0.0.1:9101/mcp")
    site.broadcast("autumn_cup", "player_registered", {"player_id": "P01"})
    card = page.locator('.league-card[data-league="autumn_cup"]')
    counts = "document.querySelector('.league-card[data-league=\"autumn_cup\"] .counts').textContent"
    page.wait_for_function(f"() => {counts}.startsWith('1 player')")
    assert "REGISTERING" in card.inner_text() and "Registration open until" in card.inner_text()
    assert page.evaluate("window.__same")


def test_the_player_referee_and_match_pages_follow_the_websocket(site, page):
    league = make_league("spring_cup", players=2)
    page.goto(f"{site.base}/leagues/spring_cup/players/P02/")
    wait_main_live(page)
    assert page.locator("#history .badge").count() == 0
    play(Match.objects.get(match_id="R1M1"), "even", "odd", 4, technical="B")
    Player.objects.filter(league=league, player_id="P02").update(status=AgentStatus.SUSPENDED)
    # The page is about P02 (it is told at once of what names it, as the LM's events do).
    assert page.evaluate("window.pageSocket.url").endswith("?brief=1&about=P02")
    site.broadcast("spring_cup", "match_finished", {"match_id": "R1M1", "player_A_id": "P01", "player_B_id": "P02"})
    page.wait_for_function("() => document.getElementById('player-status').textContent === 'SUSPENDED'")
    assert page.locator("#history .badge").inner_text() == "L"
    page.goto(f"{site.base}/leagues/spring_cup/referees/REF01/")
    wait_main_live(page)
    assert "3–0" in page.locator("#referee-matches").inner_text()


def test_ties_show_the_rule_and_which_rule_separated_each_pair(site, page):
    league = make_league("tie_cup", players=2)
    play(Match.objects.get(match_id="R1M1"), "odd", "odd", 3)  # a 1-1 draw
    complete(league)
    page.goto(f"{site.base}/leagues/tie_cup/")
    wait_version(page)
    note = page.locator("#league-note").inner_text()
    assert note.startswith("Completed. Champion: Alpha (P01), ahead of Bravo on the tie-break:")
    assert "the lower player id" in note
    assert "then head-to-head" in page.locator("#tie-rule").inner_text()
    # Level on everything: the player id orders them, but no tie was broken, so no tag.
    assert page.locator("#standings-body .tb").count() == 0


def test_the_smaller_findings(site, page, browser):
    league = make_league("spring_cup", players=14, referees=2)
    Player.objects.filter(league=league, player_id="P02").update(display_name="Bartholomew-the-Long-Named")
    Player.objects.filter(league=league, player_id="P13").update(display_name="Maximilian-Alexander")
    play_round(league, 1)
    page.goto(f"{site.base}/leagues/spring_cup/")
    wait_version(page)

    # At 1280 px the feed shows player B's choice: it lies inside the box that clips the names.
    inside = page.evaluate(
        """() => [...document.querySelectorAll('#feed li.feed-item')].map(item => {
             const shown = item.querySelector('.feed-players').getBoundingClientRect();
             const choice = item.querySelectorAll('.pl')[1].querySelector('.choice').getBoundingClientRect();
             return choice.width > 0 && choice.right <= shown.right + 0.5;
           })"""
    )
    assert inside == [True] * 7

    # Fourteen players: the three leaders in colours of their own, the others thin grey lines.
    styles = page.evaluate("window.leagueChart.data.datasets.map(d => d.borderColor + '|' + d.borderWidth)")
    coloured = [s for s in styles if not s.startswith("rgba(160")]
    assert len(styles) == 14 and len(coloured) == len(set(coloured)) == 3
    assert all(s.endswith("|1") for s in styles if s not in coloured)

    # The schedule names the players and shows results.
    first = page.locator("#schedule .round").first
    assert "Alpha" in first.inner_text() and "3–0" in first.inner_text()

    # The API root's "leagues" is the API's list, not the home page.
    page.goto(f"{site.base}/api/")
    page.click(f"a[href='{site.base}/api/leagues/']")
    assert "Spring Cup" in page.locator(".response-info").inner_text()

    # A winner's history row is not tinted when its opponent lost technically; the loser's is.
    play(Match.objects.get(match_id="R2M1"), "even", "odd", 4, technical="B")
    match = Match.objects.get(match_id="R2M1")
    winner, loser = match.player_a.player_id, match.player_b.player_id
    page.goto(f"{site.base}/leagues/spring_cup/players/{winner}/")
    assert "tech" not in page.locator('#history li[data-match="R2M1"]').get_attribute("class")
    page.goto(f"{site.base}/leagues/spring_cup/players/{loser}/")
    assert "tech" in page.locator('#history li[data-match="R2M1"]').get_attribute("class")

    # The referee page shows each match's result, not only "finished".
    page.goto(f"{site.base}/leagues/spring_cup/referees/REF01/")
    items = page.locator("#referee-matches li").all_inner_texts()
    assert items and all("3–0" in text or "1–1" in text for text in items)

    # On a phone the feed is part of the page, not a scroll box inside it.
    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    try:
        small = phone.new_page()
        small.goto(f"{site.base}/leagues/spring_cup/")
        feed = small.evaluate(
            "() => { const f = document.getElementById('feed');"
            " return [getComputedStyle(f).overflowY, f.scrollHeight - f.clientHeight]; }"
        )
        assert feed == ["visible", 0]
    finally:
        phone.close()


def test_best_of_five_matches_show_their_score_and_every_game(site, page):
    league = make_league("bo5_cup", players=4, game_type="even_odd_bo5")
    play_bo5(Match.objects.get(league=league, match_id="R1M1"), [(1, 2), (3, 2), (2, 2), (1, 4)])  # A: 3-1
    page.goto(f"{site.base}/leagues/bo5_cup/")
    wait_version(page)
    assert page.locator('#feed li[data-match="R1M1"] .score').inner_text() == "3–1"
    assert page.locator('#crosstable a.xc[title="R1M1: 3–1"]').inner_text() == "W"
    page.click('#feed li[data-match="R1M1"] a')
    rows = page.locator("#game-rounds tbody tr").all_inner_texts()
    assert len(rows) == 4
    assert rows[0].split("\t")[:4] == ["1", "1", "2", "3 odd"]
    assert page.locator(".versus .middle").inner_text().startswith("3–1")
