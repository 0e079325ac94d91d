"""The league page in real headless Chromium: live standings and feed, reconnect and catch-up,
and its screenshots (into docs/screenshots/ with ``make screenshots``)."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import transaction
from django.utils import timezone

from league.models import League, Match
from tests.browser.league_data import complete, make_league, play, play_bo5, play_round, start

# Static files come from FileResponse (a sync iterator) when the LM serves them itself.
pytestmark = [pytest.mark.browser, pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume")]

DOC_SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


@pytest.fixture
def shots(tmp_path) -> Path:
    """Where the screenshots go: the docs' own with UPDATE_SCREENSHOTS=1 (``make screenshots``),
    else a temporary directory, so a test run leaves the checkout as it was (a rendering differs
    by a few bytes from run to run, and every run rewrote the four files)."""
    return DOC_SHOTS if os.environ.get("UPDATE_SCREENSHOTS") == "1" else tmp_path


def on_commit(site):
    """What ``league.events.broadcast`` does, sent on the server's loop (see Site.broadcast)."""
    return lambda league_id, event, data: transaction.on_commit(lambda: site.broadcast(league_id, event, data))


def wait_points(page, player_id: str, points: str) -> None:
    """The standings and the feed are redrawn from separate snapshots: wait for the table too."""
    page.wait_for_function(
        '([pid, pts]) => document.querySelector(`#standings-body tr[data-player="${pid}"] td.points`)'
        "?.textContent === pts",
        arg=[player_id, points],
    )


def wait_live(page, connections: int = 1) -> None:
    page.wait_for_function(
        "n => document.getElementById('live').dataset.state === 'live'"
        " && Number(document.getElementById('league-page').dataset.connections) >= n",
        arg=connections,
    )


def test_it_updates_standings_and_feed_without_reload(site, page):
    make_league("spring_cup", players=4)
    notify = on_commit(site)
    page.goto(f"{site.base}/leagues/spring_cup/")
    wait_live(page)
    assert page.locator("#feed").inner_text().strip() == "No matches played yet."
    page.evaluate("window.__marker = 'same page'")  # gone if the page reloads

    start(Match.objects.get(match_id="R1M1"), notify=notify)
    page.wait_for_selector('#feed li[data-match="R1M1"].running')

    play(Match.objects.get(match_id="R1M1"), "odd", "even", 3, notify=notify)
    page.wait_for_function("() => document.querySelector('#standings-body tr td.points').textContent === '3'")
    assert page.locator("#standings-body tr").first.get_attribute("data-player") == "P01"
    assert page.locator('#feed li[data-match="R1M1"] .drawn').inner_text() == "3"

    play(Match.objects.get(match_id="R1M2"), "odd", "even", 8, technical="A", notify=notify)
    page.wait_for_selector('#feed li[data-match="R1M2"].tech')
    assert page.locator("#feed li").first.get_attribute("data-match") == "R1M2"  # newest first
    wait_points(page, "P04", "3")
    page.wait_for_function("() => document.getElementById('progress-text').textContent.startsWith('2 of 6')")
    assert "round 2 of 3" in page.locator("#progress-text").inner_text()
    assert page.locator("#chart-empty").is_hidden()
    assert page.evaluate("window.__marker") == "same page"


def test_it_reconnects_after_a_drop_and_catches_up(site, page):
    league = make_league("spring_cup", players=4)
    page.goto(f"{site.base}/leagues/spring_cup/")
    wait_live(page)
    page.evaluate("window.leagueSocket.close()")
    page.wait_for_function("() => document.getElementById('live').dataset.state === 'reconnecting'")
    # Results arrive while the page is not listening: no event reaches it.
    play_round(league, 1, notify=lambda *args: None)
    wait_live(page, connections=2)
    page.wait_for_function("() => document.querySelectorAll('#feed li.feed-item').length === 2")
    wait_points(page, "P01", "3")
    wait_points(page, "P03", "3")


def test_it_renders_mid_league_and_completed_screenshots(site, browser, shots):
    league = make_league("spring_cup", players=6, referees=2)
    play_round(league, 1, notify=lambda *a: None)
    play_round(league, 2, drawn=7, notify=lambda *a: None)
    matches = list(Match.objects.filter(league=league, round__number=3).order_by("id"))
    play(matches[0], "odd", "odd", 2, notify=lambda *a: None)
    play(matches[1], "even", "odd", 5, technical="B", notify=lambda *a: None)
    start(matches[2], notify=lambda *a: None)
    _shoot(browser, site, shots, "league-mid")

    play(Match.objects.get(pk=matches[2].pk), "even", "odd", 6, notify=lambda *a: None)
    for number, drawn in ((4, 1), (5, 10)):
        play_round(league, number, drawn=drawn, notify=lambda *a: None)
    complete(league, notify=lambda *a: None)
    written = _shoot(browser, site, shots, "league-completed")

    # A class of fourteen mid-play, a best-of-5 league, and one still taking registrations.
    big = make_league("class_of_14", players=14, referees=2)
    for number in (1, 2, 3):
        play_round(big, number, drawn=number + 3, notify=lambda *a: None)
    written += _shoot(browser, site, shots, "league-14-players", "class_of_14")
    bo5 = make_league("bo5_cup", players=4, game_type="even_odd_bo5")
    games = ([(1, 2), (3, 2), (2, 2), (1, 4)], [(2, 2), (1, 2), (5, 4), (3, 4), (1, 1)])
    for match, moves in zip(Match.objects.filter(league=bo5, round__number=1).order_by("id"), games, strict=True):
        play_bo5(match, moves, notify=lambda *a: None)
    written += _shoot(browser, site, shots, "league-bo5", "bo5_cup")
    # The best-of-5 match and a player of it, and the league in the dark theme.
    bo5_match = Match.objects.filter(league=bo5, round__number=1).order_by("id").first()
    for scheme in ("light", "dark"):
        written += _shoot(
            browser, site, shots, f"match-bo5-{scheme}", "bo5_cup", path=f"matches/{bo5_match.match_id}/", scheme=scheme
        )
        written += _shoot(
            browser,
            site,
            shots,
            f"player-{scheme}",
            "bo5_cup",
            path=f"players/{bo5_match.player_a.player_id}/",
            scheme=scheme,
        )
    written += _shoot(browser, site, shots, "league-dark", "class_of_14", scheme="dark")
    joining = make_league("class_2026", players=3, status=League.Status.REGISTERING, scheduled=False, referees=0)
    League.objects.filter(pk=joining.pk).update(
        registration_opens_at=timezone.now(), registration_closes_at=timezone.now() + timedelta(minutes=10)
    )
    written += _shoot(browser, site, shots, "league-registering", "class_2026")
    assert sorted(p.name for p in shots.glob("*.png") if not p.name.startswith(("check-", "admin-"))) == sorted(
        f"{when}-{label}.png"
        for when in (
            *(f"league-{w}" for w in ("completed", "mid", "14-players", "bo5", "registering", "dark")),
            *(f"{page}-{scheme}" for page in ("match-bo5", "player") for scheme in ("light", "dark")),
        )
        for label in ("desktop", "phone")
    )
    for shot in written:
        assert shot.stat().st_size > 10_000


def _shoot(
    browser, site, shots: Path, name: str, league_id: str = "spring_cup", *, path: str = "", scheme: str = "light"
) -> list[Path]:
    """The league page (or ``path`` under it: a match's or a player's page) on a desktop and a
    phone, in the ``scheme`` colour theme."""
    shots.mkdir(parents=True, exist_ok=True)
    written = []
    for label, viewport, mobile in (("desktop", (1280, 800), False), ("phone", (390, 844), True)):
        context = browser.new_context(
            viewport={"width": viewport[0], "height": viewport[1]},
            device_scale_factor=1 if not mobile else 2,
            is_mobile=mobile,
            has_touch=mobile,
            color_scheme=scheme,
        )
        page = context.new_page()
        page.goto(f"{site.base}/leagues/{league_id}/{path}")
        if path:
            page.wait_for_function("() => document.getElementById('main').dataset.live === 'live'")
        else:
            wait_live(page)
            page.wait_for_function("() => Number(document.getElementById('league-page').dataset.version) >= 1")
        # Nothing wider than the screen: a phone would zoom the whole page out to fit it.
        assert page.evaluate("() => document.documentElement.scrollWidth") == viewport[0], name
        shot = shots / f"{name}-{label}.png"
        page.screenshot(path=str(shot), full_page=True)
        written.append(shot)
        context.close()
    return written


def test_a_big_leagues_earlier_rounds_are_fetched_when_asked(site, page, settings):
    """Past LIVE_SCHEDULE_LISTED_MAX matches the schedule lists the rounds in play; an earlier
    round shows its counts and a button that fetches its matches."""
    from league.models import Round

    league = make_league("spring_cup", players=4)  # 6 matches in 3 rounds
    for number in (1, 2):
        play_round(league, number)
    Round.objects.filter(league=league, number__in=(1, 2)).update(status=Round.Status.COMPLETED)
    Round.objects.filter(league=league, number=3).update(status=Round.Status.ANNOUNCED)
    settings.LIVE_SCHEDULE_LISTED_MAX = 4
    page.goto(f"{site.base}/leagues/spring_cup/")
    wait_live(page)
    first = page.locator("#schedule .round").first
    assert first.locator("li").count() == 0
    assert first.locator("button.round-more").inner_text() == "Show its 2 matches"
    assert page.locator("#schedule .round").nth(1).locator("li").count() == 2  # the last completed
    first.locator("button.round-more").click()
    page.wait_for_selector("#schedule .round:first-child li")
    links = first.locator("li a")
    assert links.count() == 2 and links.first.get_attribute("href").endswith("/matches/R1M1/")
    assert "2/2" in first.locator(".round-head").inner_text()
