"""What a class sees on the projector and on phones, checked in Chromium: scores in the names'
order, live headline counts, tie-break tags in words, the chart's leaders, the gold rank only once
a match is played, the dark theme, the crosstable's scroll hint and a join command that cannot
take a seat for an address where nothing listens."""

from __future__ import annotations

import subprocess
from datetime import timedelta

import pytest
from django.utils import timezone

from league.models import AgentStatus, League, Match, Player
from tests.browser.league_data import make_league, play, play_bo5, play_round

pytestmark = [pytest.mark.browser, pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume")]


def wait_version(page, at_least: int = 1) -> None:
    page.wait_for_function("n => Number(document.getElementById('league-page').dataset.version) >= n", arg=at_least)


def beat(league: League, winner: str, loser: str) -> None:
    """``winner`` beats ``loser`` in their round-robin match, whichever side it plays."""
    match = Match.objects.get(
        league=league, player_a__player_id__in=(winner, loser), player_b__player_id__in=(winner, loser)
    )
    if match.player_a.player_id == winner:
        play(match, "even", "odd", 4)
    else:
        play(match, "odd", "even", 4)


def test_the_player_and_match_pages_show_scores_in_the_names_order(site, page):
    league = make_league("bo5_cup", players=4, game_type="even_odd_bo5")
    match = Match.objects.filter(league=league, round__number=1).order_by("id").first()
    a, b = match.player_a, match.player_b
    play_bo5(match, [(1, 2), (2, 2), (2, 4), (4, 4)])  # A (ODD) wins one game, B (EVEN) three

    page.goto(f"{site.base}/leagues/bo5_cup/players/{a.player_id}/")
    item = page.locator(f'#history li[data-match="{match.match_id}"]')
    assert item.locator(".feed-players").inner_text().split() == [a.display_name, "vs", b.display_name]
    assert item.locator(".score").inner_text() == "1–3"  # A–B, as on the league page
    assert item.locator(".badge").inner_text() == "L"  # the player's own result, apart
    page.goto(f"{site.base}/leagues/bo5_cup/players/{b.player_id}/")
    item = page.locator(f'#history li[data-match="{match.match_id}"]')
    assert (item.locator(".score").inner_text(), item.locator(".badge").inner_text()) == ("1–3", "W")

    page.goto(f"{site.base}/leagues/bo5_cup/matches/{match.match_id}/")
    sides = page.locator(".versus .side").all_inner_texts()
    assert f"{a.player_id} (ODD)" in sides[0] and f"{b.player_id} (EVEN)" in sides[1]
    assert page.locator("#games-score").inner_text() == "1–3"
    assert page.locator(".middle").inner_text().split("\n")[-1] == "games"
    assert page.locator("#verdict-text").inner_text() == f"{b.display_name} won 3–1"
    assert "won 3-1" not in page.locator(".verdict").inner_text()  # the referee's wording, not repeated


def test_headline_counts_are_the_live_agents_with_the_others_apart(site, page):
    league = make_league("spring_cup", players=6, referees=2)
    Player.objects.filter(league=league, player_id="P05").update(status=AgentStatus.SUSPENDED)
    Player.objects.filter(league=league, player_id="P06").update(status=AgentStatus.SHUTDOWN)
    league.referees.filter(referee_id="REF02").update(status=AgentStatus.SUSPENDED)
    page.goto(f"{site.base}/")
    counts = page.locator('.league-card[data-league="spring_cup"] .counts').inner_text()
    assert counts == "4 players · 1 suspended · 1 exited · 1 referee · 1 suspended"

    page.goto(f"{site.base}/leagues/spring_cup/")
    wait_version(page)
    assert page.locator("#count-players").inner_text() == "4 players · 1 suspended · 1 exited"
    assert page.locator("#count-referees").inner_text() == "1 referee · 1 suspended"
    Player.objects.filter(league=league, player_id="P04").update(status=AgentStatus.SUSPENDED)
    site.broadcast("spring_cup", "player_status", {"player_id": "P04"})
    page.wait_for_function(
        "() => document.getElementById('count-players').textContent === '3 players · 2 suspended · 1 exited'"
    )


def test_ties_broken_are_tagged_in_words_and_the_leader_is_gold_once_a_match_is_played(site, page):
    league = make_league("tie_cup", players=4)
    page.goto(f"{site.base}/leagues/tie_cup/")
    wait_version(page)
    gold = "() => getComputedStyle(document.querySelector('#standings-body tr:first-child .rank')).fontWeight"
    assert page.evaluate(gold) == "400"  # a table of zeros has no leader

    # P01 beats P02 and loses to P03; P02 beats P04: P01, P02 and P03 on 3 points and one win
    # each. P02 lost to P01 (head-to-head); P01 and P03 are level on everything.
    beat(league, "P01", "P02")
    beat(league, "P03", "P01")
    beat(league, "P02", "P04")
    page.wait_for_function("() => document.getElementById('progress-text').textContent.startsWith('3 of')")
    page.wait_for_function(f"{gold.replace('() =>', '() => ')} === '700'")
    tags = {
        row.get_attribute("data-player"): row.locator(".tb").all_inner_texts()
        for row in page.locator("#standings-body tr").all()
    }
    assert tags["P02"] == ["tie-break: level on points, wins and draws: more points in their games against each other"]
    assert tags["P01"] == tags["P03"] == tags["P04"] == []
    page.reload()
    wait_version(page)
    assert page.locator('#standings-body tr[data-player="P02"] .tb').inner_text().startswith("tie-break: level on")
    assert page.locator("#standings-body .tb").count() == 1
    assert page.evaluate(gold) == "700"


def test_the_chart_keeps_colour_for_the_leaders_and_the_followed_player(site, page):
    league = make_league("class_12", players=12)
    for number in (1, 2):
        play_round(league, number)
    page.goto(f"{site.base}/leagues/class_12/")
    wait_version(page)
    page.wait_for_function("() => window.leagueChart && window.leagueChart.data.datasets.length === 12")
    leaders = page.evaluate(
        "() => [...document.querySelectorAll('#standings-body tr')].slice(0, 3).map(r => r.dataset.player)"
    )
    names = {p.player_id: p.display_name for p in league.players.all()}
    widths = page.evaluate(
        "() => Object.fromEntries(window.leagueChart.data.datasets.map(d => [d.label, d.borderWidth]))"
    )
    assert {label for label, width in widths.items() if width > 1} == {names[pid] for pid in leaders}

    follow = next(pid for pid in names if pid not in leaders)
    page.select_option("#follow", follow)
    widths = page.evaluate(
        "() => Object.fromEntries(window.leagueChart.data.datasets.map(d => [d.label, d.borderWidth]))"
    )
    assert widths[names[follow]] == 4
    assert {label for label, width in widths.items() if width > 1} == {names[pid] for pid in [*leaders, follow]}


def test_dark_theme_favicon_and_the_crosstable_hint_on_a_phone(site, browser):
    make_league("spring_cup", players=12)
    play_round(League.objects.get(league_id="spring_cup"), 1)
    context = browser.new_context(
        viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True, color_scheme="dark"
    )
    page = context.new_page()
    try:
        page.goto(f"{site.base}/leagues/spring_cup/")
        wait_version(page)
        background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
        assert background == "rgb(13, 17, 23)"
        assert page.evaluate("() => getComputedStyle(document.querySelector('.panel')).color") == "rgb(230, 233, 239)"
        hint = page.locator("#crosstable-hint")
        assert hint.is_visible() and hint.inner_text() == "scroll →"
        box = page.evaluate(
            "() => { const b = document.getElementById('crosstable');"
            " return [b.scrollWidth > b.clientWidth, getComputedStyle(b).overflowX]; }"
        )
        assert box == [True, "auto"]
        icon = page.locator('link[rel="icon"]').get_attribute("href")
        assert icon.endswith(".svg") and page.request.get(f"{site.base}{icon}").ok
        # Four players fit on a phone: no hint to scroll a grid that does not scroll.
        make_league("small_cup", players=4)
        page.goto(f"{site.base}/leagues/small_cup/")
        wait_version(page)
        assert (
            page.evaluate(
                "() => { const b = document.getElementById('crosstable'); return b.scrollWidth > b.clientWidth; }"
            )
            is False
        )
        assert not page.locator("#crosstable-hint").is_visible()
    finally:
        context.close()
    light = browser.new_context(viewport={"width": 1280, "height": 800}, color_scheme="light")
    page = light.new_page()
    try:
        page.goto(f"{site.base}/leagues/spring_cup/")
        wait_version(page)
        assert page.evaluate("() => getComputedStyle(document.body).backgroundColor") == "rgb(246, 247, 251)"
        assert not page.locator("#crosstable-hint").is_visible()
    finally:
        light.close()


def test_the_join_command_cannot_run_unedited_and_takes_the_students_url(site, page, tmp_path):
    league = make_league("class_2026", players=2, status=League.Status.REGISTERING, scheduled=False, referees=0)
    League.objects.filter(pk=league.pk).update(
        registration_opens_at=timezone.now(), registration_closes_at=timezone.now() + timedelta(minutes=9)
    )
    Player.objects.filter(league=league, player_id="P02").update(
        unreachable_since=timezone.now(), unreachable_reason="connection refused"
    )
    page.goto(f"{site.base}/leagues/class_2026/")
    wait_version(page)
    agents = page.locator("#join-agents li").all_inner_texts()
    assert "http://127.0.0.1:8102/mcp" in agents[1] and "Not answering: connection refused" in agents[1]
    assert page.locator("#join-agents li").nth(1).get_attribute("class") == "agent agent-silent"

    # Pasted as it is, the shell refuses the command: nothing is sent, no seat is taken.
    command = page.locator("#join-curl").inner_text()
    assert "<YOUR-AGENT-URL>" in command
    ran = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert ran.returncode != 0 and "No such file or directory" in ran.stderr
    assert league.players.count() == 2

    # An address that would break the command is refused; a plain one fills it in, and registers.
    page.fill("#join-agent-url", "http://host/mcp' ; rm")
    assert page.locator("#join-url-error").is_visible()
    assert "<YOUR-AGENT-URL>" in page.locator("#join-curl").inner_text()
    page.fill("#join-agent-url", "http://127.0.0.1:8199/mcp")
    assert not page.locator("#join-url-error").is_visible()
    command = page.locator("#join-curl").inner_text()
    assert "<YOUR-AGENT-URL>" not in command and '"contact_endpoint": "http://127.0.0.1:8199/mcp"' in command
    ran = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert ran.returncode == 0 and '"ACCEPTED"' in ran.stdout, ran.stdout + ran.stderr
    assert league.players.filter(endpoint="http://127.0.0.1:8199/mcp").exists()
