"""``/check/`` in Chromium: a student finds the page from the league list, checks the course's
minimal player (a real process: every step ok), a broken player (the failures, each fix linking
to its section of the protocol page) and a course player that plays but takes no notices (its
screenshot into docs/screenshots/ with UPDATE_SCREENSHOTS=1)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.league.checkagent_support import (
    CoursePlayer,
    minimal_player,
    non_utc,
    serving_broken_player,
    serving_course_player,
)
from tests.league.lm_support import make_league

pytestmark = [pytest.mark.browser, pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume")]
CHECK_TIMEOUT_MS = 30_000  # a check waits at most a few of its 5-10 s limits
DOC_SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def run_check(page, base: str, endpoint: str) -> None:
    page.goto(f"{base}/")
    page.click("#check-link a")
    page.fill("#id_endpoint", endpoint)
    page.select_option("#id_game", "even_odd")
    page.click("button.check-run")
    page.wait_for_selector("#check-report", timeout=CHECK_TIMEOUT_MS)


@pytest.mark.processes
def test_the_minimal_player_passes_on_the_page(site, page, agent_env, tmp_path):
    league = make_league("check_page")
    with minimal_player(f"{site.base}/mcp", league.league_id, agent_env, tmp_path / "mini.log") as url:
        run_check(page, site.base, url)
    # Registered, it takes league notices only with its own league's token, which the check
    # cannot show: the notices are advice, the match itself passes. Its league is not finished:
    # no practice LEAGUE_COMPLETED is sent.
    assert page.locator("#check-verdict").inner_text() == "WARN"
    assert page.locator("#check-plays-match").inner_text() == "Plays a match: pass"
    assert page.locator("#check-takes-notices").get_attribute("data-verdict") == "warn"
    assert "registered in league check_page" in page.locator(".check-skipped").inner_text()
    steps = page.locator(".check-step")
    assert steps.count() == 6
    assert page.locator('.check-step[data-verdict="ok"]').count() == 3
    assert page.locator('.check-step[data-verdict="warn"]').count() == 3
    # The three refusals have one fix: said once, on the first.
    assert page.locator(".check-fix").count() == 1 and page.locator(".check-same").count() == 2
    choice = page.locator('.check-step[data-message-type="CHOOSE_PARITY_CALL"]')
    assert "CHOOSE_PARITY_RESPONSE parity_choice=" in choice.locator(".check-reply").inner_text()
    choice.locator("summary").click()  # the messages themselves, sent and received
    assert '"message_type": "CHOOSE_PARITY_CALL"' in choice.locator("pre").first.inner_text()
    assert '"parity_choice"' in choice.locator("pre").nth(1).inner_text()


def test_a_broken_player_is_told_what_to_fix_on_the_page(site, page):
    with serving_broken_player() as url:
        run_check(page, site.base, url)
    assert page.locator("#check-verdict").inner_text() == "FAIL"
    assert page.locator("#check-plays-match").inner_text() == "Plays a match: fail"
    assert page.locator('.check-step[data-verdict="fail"]').count() == 4  # two choices, two GAME_ERRORs
    announcement = page.locator('.check-step[data-message-type="ROUND_ANNOUNCEMENT"]')
    assert "season_id" in announcement.locator(".check-fix").inner_text()
    choice = page.locator('.check-step[data-message-type="CHOOSE_PARITY_CALL"]').first
    fix = choice.locator(".check-fix")
    assert 'Answer with parity_choice exactly "even" or "odd" (lower case).' in fix.inner_text()
    # The link lands on the rules of the game in the protocol reference.
    fix.locator("a.check-see").click()
    page.wait_for_url("**/check/protocol/#even_odd-default")
    heading = page.locator("#even_odd-default")
    assert heading.inner_text() == "even_odd (default)" and heading.is_visible()
    assert page.evaluate("document.getElementById('even_odd-default').getBoundingClientRect().top") < 400


def test_an_agent_that_plays_but_takes_no_notices_gets_two_verdicts_on_the_page(site, page, tmp_path):
    """P07 fixed in its configuration, no notice tools, local-time timestamps: it plays whole
    leagues. The page says so, adopts P07 once, and says the timestamp warning once."""
    player = CoursePlayer("P07", notices=False, timestamp=non_utc)
    with serving_course_player(player) as url:
        run_check(page, site.base, url)
    assert page.locator("#check-verdict").inner_text() == "WARN"
    assert page.locator("#check-plays-match").inner_text() == "Plays a match: pass"
    assert page.locator("#check-takes-notices").get_attribute("data-verdict") == "warn"
    assert page.locator("#check-id-warning").inner_text().startswith("Your agent answered as P07, not P01")
    invitation = page.locator('.check-step[data-message-type="GAME_INVITATION"]')
    assert "(also on 2 other replies)" in invitation.locator(".check-fix").inner_text()
    assert page.locator(".check-same").count() == 2  # GAME_OVER and the parity call: no fix again
    assert page.locator(".check-fix").count() == 5  # the timestamp once, a tool for each notice
    shots = DOC_SHOTS if os.environ.get("UPDATE_SCREENSHOTS") == "1" else tmp_path
    page.screenshot(path=str(shots / "check-plays-no-notices-desktop.png"), full_page=True)
