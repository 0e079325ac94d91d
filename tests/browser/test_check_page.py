"""``/check/`` in Chromium: a student finds the page from the league list, checks the course's
minimal player (a real process: every step ok) and a broken player (the failures, each fix linking
to its section of the protocol page)."""

from __future__ import annotations

import pytest

from tests.league.checkagent_support import minimal_player, serving_broken_player
from tests.league.lm_support import make_league

pytestmark = [pytest.mark.browser, pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume")]
CHECK_TIMEOUT_MS = 30_000  # a check waits at most a few of its 5-10 s limits


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
    # cannot show: the four notices are advice, the match itself passes.
    assert page.locator("#check-verdict").inner_text() == "WARN"
    steps = page.locator(".check-step")
    assert steps.count() == 7
    assert page.locator('.check-step[data-verdict="ok"]').count() == 3
    assert page.locator('.check-step[data-verdict="warn"]').count() == 4
    assert page.locator(".check-fix").count() == 4
    choice = page.locator('.check-step[data-message-type="CHOOSE_PARITY_CALL"]')
    assert "CHOOSE_PARITY_RESPONSE parity_choice=" in choice.locator(".check-reply").inner_text()
    choice.locator("summary").click()  # the messages themselves, sent and received
    assert '"message_type": "CHOOSE_PARITY_CALL"' in choice.locator("pre").first.inner_text()
    assert '"parity_choice"' in choice.locator("pre").nth(1).inner_text()


def test_a_broken_player_is_told_what_to_fix_on_the_page(site, page):
    with serving_broken_player() as url:
        run_check(page, site.base, url)
    assert page.locator("#check-verdict").inner_text() == "FAIL"
    assert page.locator('.check-step[data-verdict="fail"]').count() >= 5
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
