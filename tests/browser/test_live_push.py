"""The league page in Chromium follows what the server pushes: patches applied in place (no API
reads), a busy league still refreshing it, and the count of viewers."""

from __future__ import annotations

import time
from urllib.parse import parse_qs, urlsplit

import pytest

from league.models import Match
from tests.browser.league_data import make_league, play, start
from tests.browser.test_live_dashboard import on_commit

pytestmark = [pytest.mark.browser, pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume")]


def wait_live(page) -> None:
    page.wait_for_function(
        "() => document.getElementById('live').dataset.state === 'live'"
        " && Number(document.getElementById('league-page').dataset.version) >= 1"
    )


def test_the_page_shows_pushed_changes_without_reading_the_api(site, page):
    league = make_league("spring_cup", players=4)
    reads = []
    page.on("request", lambda request: reads.append(request.url) if "/api/" in request.url else None)
    page.goto(f"{site.base}/leagues/spring_cup/")
    wait_live(page)
    page.evaluate("window.__marker = 'same page'")  # gone if the page reloads

    notify = on_commit(site)
    start(Match.objects.get(league=league, match_id="R1M1"), notify=notify)
    page.wait_for_selector('#feed li[data-match="R1M1"].running')
    play(Match.objects.get(league=league, match_id="R1M1"), "odd", "even", 3, notify=notify)  # P01 beats P04
    page.wait_for_function(
        "() => document.querySelector('#standings-body tr[data-player=\"P01\"] td.points').textContent === '3'"
    )
    assert page.locator("#standings-body tr").first.get_attribute("data-player") == "P01"
    assert page.locator('#feed li[data-match="R1M1"] .badge-win').count() == 1
    # The crosstable's cell, the schedule's row and the chart's point came with the same push.
    page.wait_for_selector('#crosstable tr[data-player="P01"] a.xc-W[title^="R1M1"]')
    assert page.locator('#schedule li.sm-finished a[title^="R1M1"] .sm-score').inner_text() == "3–0"
    assert page.evaluate("window.leagueChart.data.datasets.find(d => d.label === 'Alpha').data") == [3]
    page.wait_for_function("() => document.getElementById('progress-text').textContent.startsWith('1 of 6')")
    assert page.evaluate("document.getElementById('league-page').dataset.lastEvent") == "match_finished"
    assert page.evaluate("window.__marker") == "same page"
    assert reads == []
    # Chromium inflates: the patches it applied came compressed (league.js asks where it can), and
    # its socket asked for what changed since the version the page was rendered at (``at``).
    url = urlsplit(page.evaluate("window.leagueSocket.url"))
    rendered = page.evaluate("document.getElementById('league-page').dataset.at")
    assert url.path == "/ws/leagues/spring_cup/" and parse_qs(url.query) == {"deflate": ["1"], "at": [rendered]}


def test_the_page_shows_how_many_are_watching(site, page, browser):
    make_league("spring_cup", players=4)
    page.goto(f"{site.base}/leagues/spring_cup/")
    wait_live(page)
    page.wait_for_function("() => document.getElementById('viewers-count').textContent === '1 watching'")
    others = [browser.new_context().new_page() for _ in range(2)]
    for other in others:
        other.goto(f"{site.base}/leagues/spring_cup/")
    page.wait_for_function("() => document.getElementById('viewers-count').textContent === '3 watching'")
    assert page.locator("#viewers").is_visible()
    for other in others:
        other.context.close()
    page.wait_for_function("() => document.getElementById('viewers-count').textContent === '1 watching'")


def test_a_busy_league_still_refreshes_the_page(site, page):
    """500 events 10 ms apart (5 s where sending one costs nothing), a result every 50th: the page
    shows results as they come, not only once the league goes quiet. Counted in events, not in
    seconds: on a loaded machine sending takes longer, and 5 s would hold only a result or two."""
    league = make_league("busy_cup", players=12)
    page.goto(f"{site.base}/leagues/busy_cup/")
    wait_live(page)
    page.evaluate(
        """() => {
          window.__seen = [];
          const text = document.getElementById('progress-text');
          new MutationObserver(() => window.__seen.push(text.textContent))
            .observe(text, {childList: true, characterData: true, subtree: true});
        }"""
    )
    matches = iter(Match.objects.filter(league=league).order_by("round__number", "id"))
    for sent in range(1, 501):
        site.broadcast("busy_cup", "match_started", {"match_id": "R1M1"})
        if sent % 50 == 0:
            play(next(matches), "odd", "even", 3, notify=lambda *a: None)
        time.sleep(0.01)
    seen = page.evaluate("window.__seen")  # before any quiet moment after the last event
    finished = {text.split(" of ")[0] for text in seen}
    assert len(finished) >= 3, seen


def test_the_pages_apply_patches_as_the_server_makes_them(site, page):
    """``applyPatch`` (static/league/site.js) and ``live.diff`` are two halves of one format."""
    from league.api import live
    from tests.league.test_live import PATCH_CASES

    make_league("spring_cup", players=4)
    page.goto(f"{site.base}/leagues/spring_cup/")
    for old, new in PATCH_CASES:
        patch = live.diff(old, new)
        assert page.evaluate("([value, patch]) => window.leagueSite.applyPatch(value, patch)", [old, patch]) == new


SNAPSHOT_ASKS = """() => {
  window.__asked = 0;
  const send = window.leagueSocket.send.bind(window.leagueSocket);
  window.leagueSocket.send = (text) => { if (JSON.parse(text).type === 'snapshot') window.__asked += 1; send(text); };
}"""


def test_a_charts_last_point_changes_in_place_while_a_round_is_played(site, page):
    """Mid-round a player's last point changes and the points before it do not: the patch keeps
    them ("$t") and the chart shows the league's own series, with no snapshot asked for."""
    from league.api import readmodel

    league = make_league("spring_cup", players=4)
    page.goto(f"{site.base}/leagues/spring_cup/")
    wait_live(page)
    page.evaluate(SNAPSHOT_ASKS)
    page.evaluate(
        """() => {
          window.__kept = 0;
          window.leagueSocket.addEventListener('message', (ev) => {
            const text = typeof ev.data === 'string' ? Promise.resolve(ev.data)
              : new Response(new Blob([ev.data]).stream().pipeThrough(new DecompressionStream('deflate'))).text();
            text.then((t) => { if (t.includes('"$t"')) window.__kept += 1; });
          });
        }"""
    )
    notify = on_commit(site)
    for match in Match.objects.filter(league=league).order_by("round__number", "id")[:4]:
        play(match, "odd", "even", 3, notify=notify)  # player A wins each
        series = {s["display_name"]: s["points"] for s in readmodel.points_over_rounds(league)["series"]}
        page.wait_for_function(
            "(series) => Object.entries(series).every(([name, points]) => JSON.stringify("
            "window.leagueChart.data.datasets.find(d => d.label === name).data) === JSON.stringify(points))",
            arg=series,
        )
    assert max(len(points) for points in series.values()) == 2  # the second round's points came too
    assert page.evaluate("window.__kept") >= 1
    assert page.evaluate("window.__asked") == 0


def test_a_patch_the_page_cannot_apply_makes_it_take_the_snapshot(site, page):
    """An op the page's script does not know (a server newer than the page) is not applied half
    way: the page asks for the snapshot at once and goes on following the league."""
    league = make_league("spring_cup", players=4)
    page.goto(f"{site.base}/leagues/spring_cup/")
    wait_live(page)
    page.evaluate(SNAPSHOT_ASKS)
    notify = on_commit(site)
    play(Match.objects.get(league=league, match_id="R1M1"), "odd", "even", 3, notify=notify)
    page.wait_for_function("() => document.getElementById('progress-text').textContent.startsWith('1 of 6')")
    # The page's version is the one of the patch it last applied: catch the next real patch's
    # "from" by asking for the snapshot (its version is the page's).
    version = page.evaluate(
        """() => new Promise((resolve) => {
          const text = (d) => typeof d === 'string' ? Promise.resolve(d)
            : new Response(new Blob([d]).stream().pipeThrough(new DecompressionStream('deflate'))).text();
          window.leagueSocket.addEventListener('message', (ev) => text(ev.data).then((t) => {
            const msg = JSON.parse(t);
            if (msg.type === 'snapshot') resolve(msg.version);
          }));
          window.leagueSocket.send(JSON.stringify({type: 'snapshot'}));
        })"""
    )
    page.wait_for_function("() => window.__asked === 1")
    page.evaluate(
        """(version) => window.leagueSocket.onmessage({data: JSON.stringify({
          type: 'patch', from: version, version: version + '+1', data: {'$d': {progress: {'$unknown': 1}}}})})""",
        version,
    )
    page.wait_for_function("() => window.__asked === 2")
    play(Match.objects.get(league=league, match_id="R1M2"), "odd", "even", 3, notify=notify)
    page.wait_for_function("() => document.getElementById('progress-text').textContent.startsWith('2 of 6')")


def test_a_players_page_is_read_again_for_its_own_results_not_for_every_other(site, page, monkeypatch):
    """P03's page (it re-reads itself when told): another pair's result does not make it read
    itself again (the league's other changes are told every BRIEF_EVERY seconds), its own does."""
    from league import consumers

    monkeypatch.setattr(consumers, "BRIEF_EVERY", 60.0)  # however slow the machine, not within the test
    league = make_league("spring_cup", players=4)
    first = list(Match.objects.filter(league=league, round__number=1).select_related("player_a", "player_b"))
    mine = next(m for m in first if "P03" in (m.player_a.player_id, m.player_b.player_id))
    other = next(m for m in first if m is not mine)
    reads = []
    page.on("request", lambda r: reads.append(r.url) if r.url.endswith("/players/P03/") else None)
    page.goto(f"{site.base}/leagues/spring_cup/players/P03/")
    page.wait_for_function("() => document.getElementById('main').dataset.live === 'live'")
    assert page.evaluate("window.pageSocket.url").endswith("?brief=1&about=P03")
    notify = on_commit(site)
    play(other, "odd", "even", 3, notify=notify)
    page.wait_for_timeout(1500)  # (Playwright hands over the page's requests while it waits)
    assert len(reads) == 1  # the page's own load only
    play(mine, "odd", "even", 3, notify=notify)
    page.wait_for_function("() => document.querySelectorAll('#history .badge').length === 1")
    assert len(reads) == 2
