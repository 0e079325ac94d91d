"""What people expect of a live tournament page, in real Chromium: the crosstable, rank arrows
and form, a knockout's seeds, following one player across feed, schedule and chart, each agent's
health, times in the viewer's own time zone, CSV downloads and the "How to join" panel while
registration is open."""

from __future__ import annotations

import csv
import io
import json
import re
import shlex
from datetime import timedelta

import pytest
from django.utils import timezone

from league.events import record_event
from league.models import League, Match, Player
from tests.browser.league_data import answer_moves_in, make_knockout, make_league, play, play_round
from tests.browser.test_live_dashboard import on_commit, wait_points

pytestmark = [pytest.mark.browser, pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume")]


def wait_version(page, at_least: int = 1) -> None:
    """The page has rendered a snapshot (from the websocket) at least ``at_least`` times."""
    page.wait_for_function("n => Number(document.getElementById('league-page').dataset.version) >= n", arg=at_least)


def test_it_shows_the_crosstable_rank_moves_and_form(site, page):
    league = make_league("spring_cup", players=4)
    play_round(league, 1)  # drawn 4: the A sides (P01, P03) win
    play(Match.objects.get(match_id="R2M1"), "odd", "even", 8)  # R2: P04 beats P01? see the rows below
    play(Match.objects.get(match_id="R2M2"), "odd", "even", 8)
    page.goto(f"{site.base}/leagues/spring_cup/")
    wait_version(page)
    cross = page.locator("#crosstable table.cross")
    names = cross.locator("tbody th").all_inner_texts()
    assert len(names) == 4
    # Every played pair shows a result both ways, linked to its match; the diagonal is blank.
    assert cross.locator("a.xc").count() == 8
    assert cross.locator("td.self").count() == 4
    first = cross.locator("tbody tr").first
    marks = first.locator("a.xc").all_inner_texts()
    assert sorted(marks) == ["W", "W"]  # the leader won both its games
    href = first.locator("a.xc").first.get_attribute("href")
    assert re.fullmatch(r"/leagues/spring_cup/matches/R\dM\d/", href)
    # After two rounds: arrows for those who moved since round 2 began, and form.
    assert page.locator("#standings-body .move").count() >= 1
    assert page.locator("#standings-body tr").first.locator(".fm").all_inner_texts() == ["W", "W"]
    # It follows the websocket: a third round result changes the grid without a reload.
    page.evaluate("window.__same = true")
    from django.db import transaction

    play(
        Match.objects.get(match_id="R3M1"),
        "even",
        "odd",
        2,
        notify=lambda *a: transaction.on_commit(lambda: site.broadcast(*a)),
    )
    page.wait_for_function("() => document.querySelectorAll('#crosstable a.xc').length === 10")
    assert page.evaluate("window.__same")


def test_it_follows_one_player_across_feed_schedule_standings_and_chart(site, page):
    league = make_league("spring_cup", players=4)
    play_round(league, 1)
    play_round(league, 2)
    page.goto(f"{site.base}/leagues/spring_cup/")
    wait_version(page)
    page.select_option("#follow", "P03")
    assert page.url.endswith("#follow=P03")
    feed = page.locator("#feed li.feed-item")
    followed = page.locator("#feed li.feed-item.followed")
    assert followed.count() == 2 and feed.count() == 4
    for item in followed.all():
        assert "P03" in item.get_attribute("data-players").split()
    assert page.locator("#schedule li.followed").count() == 3  # P03's three matches, played or not
    assert page.locator("#standings-body tr.followed").get_attribute("data-player") == "P03"
    assert page.locator("#crosstable tr.followed").count() == 1
    colours = page.evaluate("window.leagueChart.data.datasets.map(d => [d.label, d.borderColor, d.borderWidth])")
    mine = [c for c in colours if c[0] == "Charlie"]
    others = [c for c in colours if c[0] != "Charlie"]
    assert mine[0][2] == 4 and all(c[1].startswith("rgba(160") and c[2] == 1 for c in others)
    # The choice is kept in the address: a reload (or a shared link) follows the same player.
    page.reload()
    wait_version(page)
    assert page.locator("#follow").input_value() == "P03"
    assert page.locator("#feed li.feed-item.followed").count() == 2
    page.select_option("#follow", "")
    assert page.locator(".followed").count() == 0


def seed_cells(page) -> list[tuple[str, str | None]]:
    """(player id, its Seed cell or None without one) of each standings row, top first."""
    rows = page.evaluate(
        "() => [...document.querySelectorAll('#standings-body tr')]"
        ".map(tr => [tr.dataset.player, tr.querySelector('td.seed')?.textContent ?? null])"
    )
    return [(player_id, seed) for player_id, seed in rows]


def test_a_knockout_shows_each_players_seed_as_its_rows_move(site, page):
    league = make_knockout("cup", players=6, ratings={"P05": 20.0, "P03": 10.0, "P06": 10.0})
    seeds = {"P05": "1", "P03": "2", "P06": "3", "P01": "4", "P02": "5", "P04": "6"}
    page.goto(f"{site.base}/leagues/cup/")
    wait_version(page)
    assert page.locator("table.standings thead th").all_text_contents()[:3] == ["#", "Seed", "Player"]
    assert dict(seed_cells(page)) == seeds
    # Seed 6 beats seed 3 (even_odd: B wins on an even number): it leads, and keeps its seed.
    play(Match.objects.get(league=league, player_a__player_id="P06"), "odd", "even", 4, notify=on_commit(site))
    wait_points(page, "P04", "3")
    rows = seed_cells(page)
    assert rows[0] == ("P04", "6") and dict(rows) == seeds

    make_league("spring_cup", players=4)  # a round-robin has no seeds
    page.goto(f"{site.base}/leagues/spring_cup/")
    wait_version(page)
    assert "Seed" not in page.locator("table.standings thead").text_content()
    assert [seed for _, seed in seed_cells(page)] == [None] * 4


def test_the_player_page_shows_its_agents_health(site, page):
    league = make_league("spring_cup", players=2)
    # P02 never answered: its two choose_parity calls timed out (league_data's technical log).
    play(Match.objects.get(match_id="R1M1"), "even", "odd", 4, technical="B")
    record_event(
        league,
        "OUT",
        "ROUND_COMPLETED",
        agent="P02",
        payload={"method": "notify_round_completed", "outcome": "timeout"},
    )
    page.goto(f"{site.base}/leagues/spring_cup/players/P01/")
    assert page.locator("#health-p50").inner_text() == "4.1 ms"
    assert page.locator("#health-timeouts").inner_text() == "0"
    assert page.locator("#health-calls").inner_text() == "1/1"
    assert "Answering: 1 of 1 calls answered." in page.locator("#health-note").inner_text()
    page.goto(f"{site.base}/leagues/spring_cup/players/P02/")
    assert page.locator("#player-status").inner_text() == "REGISTERED"
    note = page.locator("#health-note").inner_text()
    assert note.startswith("Never answered: 3 calls, 3 timed out")  # the status alone said nothing
    assert page.locator("#health-timeouts").inner_text() == "3"
    assert "no answer to notify_round_completed in time" in page.locator("#health-last").inner_text()


def test_a_slow_players_page_says_every_round_waits_for_it(site, page, tmp_path):
    league = make_league("spring_cup", players=2)
    League.objects.filter(pk=league.pk).update(move_timeout=5.0)
    match = Match.objects.get(league=league, match_id="R1M1")
    play(match, "even", "odd", 4)
    answer_moves_in(match, {"P01": [4800.0, 4700.0, 4900.0], "P02": [40.0, 60.0, 4900.0]})
    page.goto(f"{site.base}/leagues/spring_cup/players/P01/")
    note = page.locator("#slow-note")
    assert note.is_visible()
    assert "the move timeout is 5 s: every round waits for this player" in note.inner_text()
    # Set apart from the page's text as a warning is, not a line lost among the others.
    assert note.evaluate("e => getComputedStyle(e).backgroundColor") != page.locator("main p").first.evaluate(
        "e => getComputedStyle(e).backgroundColor"
    )
    page.screenshot(path=str(tmp_path / "slow-player.png"), full_page=True)
    page.goto(f"{site.base}/leagues/spring_cup/players/P02/")
    assert page.locator("#slow-note").count() == 0


def test_times_are_shown_in_the_viewers_time_zone_with_utc_in_the_title(site, browser):
    league = make_league("spring_cup", players=2)
    Player.objects.filter(league=league, player_id="P01").update(
        registered_at=timezone.datetime(2026, 11, 27, 1, 35, 7, tzinfo=timezone.UTC)
    )
    context = browser.new_context(timezone_id="Asia/Tokyo", viewport={"width": 1280, "height": 800})
    try:
        page = context.new_page()
        page.goto(f"{site.base}/leagues/spring_cup/players/P01/")
        registered = page.locator("p.muted time.local").first
        assert registered.inner_text() == "2026-11-27 10:35"  # UTC+9, and a space between date and time
        assert registered.get_attribute("title") == "2026-11-27 01:35:07 UTC"
        assert "Times in your time zone" in page.locator("footer").inner_text()
    finally:
        context.close()


def test_it_downloads_standings_and_results_as_csv(site, page):
    league = make_league("spring_cup", players=4)
    play_round(league, 1)
    page.goto(f"{site.base}/leagues/spring_cup/")
    with page.expect_download() as info:
        page.click("text=standings.csv")
    download = info.value
    assert download.suggested_filename == "spring_cup-standings.csv"
    rows = list(csv.DictReader(io.StringIO(download.path().read_text(encoding="utf-8"))))
    assert [r["player_id"] for r in rows] == ["P01", "P03", "P02", "P04"]
    with page.expect_download() as info:
        page.click("text=results.csv")
    results = list(csv.DictReader(io.StringIO(info.value.path().read_text(encoding="utf-8"))))
    assert [(r["match_id"], r["winner_id"]) for r in results] == [("R1M1", "P01"), ("R1M2", "P03")]


def test_the_how_to_join_panel_says_where_and_how_while_registration_is_open(site, page):
    league = make_league("class_2026", players=2, status=League.Status.REGISTERING, scheduled=False, referees=0)
    League.objects.filter(pk=league.pk).update(
        registration_opens_at=timezone.now(), registration_closes_at=timezone.now() + timedelta(minutes=9)
    )
    record_event(league, "OUT", "ROUND_ANNOUNCEMENT", agent="P01", payload={"method": "notify_round", "outcome": "ok"})
    record_event(
        league,
        "OUT",
        "ROUND_ANNOUNCEMENT",
        agent="P02",
        payload={"method": "notify_round", "outcome": "connection_error"},
    )
    page.goto(f"{site.base}/leagues/class_2026/")
    wait_version(page)
    panel = page.locator("#join")
    assert panel.is_visible()
    assert page.locator("#join-mcp").inner_text() == f"{site.base}/mcp"
    assert "class_2026" in panel.inner_text()
    page.wait_for_function("() => /\\(in 8:\\d\\d\\)/.test(document.getElementById('join-countdown').textContent)")
    agents = page.locator("#join-agents li").all_inner_texts()
    assert "Alpha" in agents[0] and "Answering: 1 of 1 calls answered." in agents[0]
    assert "Bravo" in agents[1] and "Never answered" in agents[1] and "could not connect for notify_round" in agents[1]

    # The command is the course's registration message plus our league id, nothing else.
    command = page.locator("#join-curl").inner_text()
    words = shlex.split(command.replace("\\\n", " "))
    assert words[:3] == ["curl", "-s", f"{site.base}/mcp"]
    body = json.loads(words[words.index("-d") + 1])
    assert (body["jsonrpc"], body["method"]) == ("2.0", "register_player")
    params = body["params"]
    assert sorted(params) == sorted(
        ["protocol", "message_type", "sender", "timestamp", "conversation_id", "league_id", "player_meta"]
    )
    assert (params["protocol"], params["message_type"], params["sender"], params["league_id"]) == (
        "league.v2",
        "LEAGUE_REGISTER_REQUEST",
        "player:alpha",
        "class_2026",
    )
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", params["timestamp"])
    assert sorted(params["player_meta"]) == ["contact_endpoint", "display_name", "game_types", "version"]
    assert params["player_meta"]["game_types"] == ["even_odd"]

    # A registration shows up live; when the league starts, the panel goes.
    Player.objects.create(
        league=league, player_id="P03", display_name="Carol", endpoint="http://127.0.0.1:9103/mcp", token_hash="x"
    )
    site.broadcast("class_2026", "player_registered", {"player_id": "P03"})
    page.wait_for_function("() => document.getElementById('join-agents').textContent.includes('Carol')")
    page.wait_for_function("() => document.getElementById('count-players').textContent === '3 players'")
    assert (
        "Not called by the league yet: it is pinged within seconds"
        in page.locator("#join-agents li").nth(2).inner_text()
    )
    League.objects.filter(pk=league.pk).update(status=League.Status.READY)
    site.broadcast("class_2026", "league_status", {"status": "READY"})
    page.wait_for_selector("#join", state="hidden")
