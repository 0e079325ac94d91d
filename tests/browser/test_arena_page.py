"""The arena's leaderboard in Chromium follows the arena live: each rated match (reported to the
LM over /mcp, rated in the result's transaction) reaches the open page as a pushed patch, with
no reload and no API read."""

from __future__ import annotations

import pytest

from league import actions
from league.actions.arena import open_arena
from league.conductor.arena import pair_arena
from league.conductor.dispatch import claim_matches
from league.models import ArenaSeat, Match, Rating
from tests.league.lm_support import call, register_player, register_referee
from tests.league.test_arena import report

pytestmark = [pytest.mark.browser, pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume")]


def rating_of(player) -> Rating:
    return Rating.objects.get(identity=ArenaSeat.objects.get(player=player).identity)


def play(mcp: str, league, ref: dict, winner_side: str) -> Match:
    paired = pair_arena(league.pk, capacity=1)
    claim_matches(league.pk, paired.rnd.pk)
    match = Match.objects.select_related("player_a", "player_b", "league").get(league=league, status="ASSIGNED")
    a, b = match.player_a.player_id, match.player_b.player_id
    winner, loser = (a, b) if winner_side == "a" else (b, a)
    assert call(mcp, "report_match_result", report(ref, match, winner, loser))["status"] == "RECORDED"
    return match


def board_cell(page, player_id: str, cell: str) -> str:
    return page.locator(f'#leaderboard-body tr[data-player="{player_id}"] td.{cell}').inner_text()


def test_the_leaderboard_moves_live_with_each_rated_match(site, page):
    mcp = f"{site.base}/mcp"
    league = open_arena(actions.create_league(name="Practice", league_id="practice", schedule_format="arena"))
    ref = register_referee(mcp, "ref", league_id="practice")
    for name in ("ann", "bob"):
        assert register_player(mcp, name, league_id="practice")["status"] == "ACCEPTED"
    reads = []
    page.on("request", lambda request: reads.append(request.url) if "/api/" in request.url else None)
    page.goto(f"{site.base}/arenas/practice/")
    page.wait_for_function("() => document.getElementById('live').dataset.state === 'live'")
    page.wait_for_selector('#leaderboard-body tr[data-player="P02"]')
    assert board_cell(page, "P01", "rating") == "–"  # not rated yet
    page.evaluate("window.__marker = 'same page'")  # gone if the page reloads

    first = play(mcp, league, ref, "a")
    winner = rating_of(first.player_a)
    page.wait_for_function(
        '([pid, r]) => document.querySelector(`#leaderboard-body tr[data-player="${pid}"] td.rating`)'
        "?.textContent === String(r)",
        arg=[first.player_a.player_id, round(winner.ordinal, 2)],
    )
    assert page.locator("#leaderboard-body tr").first.get_attribute("data-player") == first.player_a.player_id
    assert float(board_cell(page, first.player_a.player_id, "sigma")) == round(winner.sigma, 2)
    page.wait_for_selector(f'#feed li[data-match="{first.match_id}"] .badge-win')
    assert page.evaluate("window.arenaChart.data.datasets.length") == 2

    second = play(mcp, league, ref, "b")
    page.wait_for_function(
        "pid => document.querySelector(`#leaderboard-body tr[data-player=\"${pid}\"] td.matches`)?.textContent === '2'",
        arg=first.player_a.player_id,
    )
    for player in (second.player_a, second.player_b):
        row = rating_of(player)
        page.wait_for_function(
            '([pid, r]) => document.querySelector(`#leaderboard-body tr[data-player="${pid}"] td.rating`)'
            "?.textContent === String(r)",
            arg=[player.player_id, round(row.ordinal, 2)],
        )
    assert page.evaluate("window.arenaChart.data.datasets.map(d => d.data.length)") == [2, 2]
    assert page.evaluate("window.__marker") == "same page"
    assert reads == []
