"""A teacher's whole flow in Chromium, with real agents: log into the admin, create a league, open
registration, generate its referee key and start a referee with the command the key page shows,
let players join by the three routes a class uses (``runplayer`` serving its own port,
``runplayer --connect`` through the LM's relay, and the join panel's curl for an agent of one's
own), start, watch the league page follow live, pause, resume, cancel a second league (its
confirmation page), delete it, and download the exports. Each page must offer the next step: the
test reaches every step by what the page shows, not by typing addresses. With UPDATE_SCREENSHOTS=1
(``make screenshots``) it writes the referee key page and the cancel confirmation to docs/screenshots/."""

from __future__ import annotations

import csv
import io
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from league.models import League, MatchResult, Player
from tests.conftest import ROOT
from tests.support.servers import Process, free_ports, wait_for_port

pytestmark = [
    pytest.mark.browser,
    pytest.mark.processes,
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume"),
]

PASSWORD = "a-long-test-password-1"
DOC_SHOTS = ROOT / "docs" / "screenshots"
# Agents start slowly on a loaded machine: the waits for them are long, the pages' own are not.
AGENTS = 90_000
# Small and quick: best-of-1, four players (six matches in three rounds), short timeouts, and a
# pause between rounds so that the teacher can pause the league while it is visibly in play.
SETTINGS = {
    "join_timeout": "2",
    "move_timeout": "2",
    "game_over_timeout": "2",
    "report_timeout": "4",
    "default_timeout": "2",
    "retries": "1",
    "retry_delay": "0.2",
    "match_deadline": "30",
    "round_pause": "3",
}


def admin_action(page, league: League, action: str, go: bool = True) -> None:
    """From any admin page, the league list (its link on every page); select ``league`` and choose
    ``action``; run it unless ``go`` is false."""
    page.locator("a[href='/admin/league/league/']").first.click()
    page.check(f"input[name=_selected_action][value='{league.pk}']")
    page.select_option("select[name=action]", action)
    if go:
        page.click("button[name=index]")


def success(page) -> str:
    page.wait_for_selector(".messagelist")
    return page.locator(".messagelist").inner_text()


def create_league(page, league_id: str, name: str, **fields: str) -> League:
    page.click("#site-name a")  # the admin's home, from any of its pages
    page.click("tr.model-league a.addlink")
    # The admin focuses the form's first field once the page has rendered; on a loaded machine
    # that can come after the first fills and send the next one's keys to it: wait for it first.
    expect(page.locator("#id_league_id")).to_be_focused()
    page.fill("#id_league_id", league_id)
    page.fill("#id_name", name)
    for field, value in fields.items():
        page.fill(f"#id_{field}", value)
    page.click("input[name=_save]")
    assert "was added successfully" in success(page)
    return League.objects.get(league_id=league_id)


def wait_text(page, element_id: str, text: str, timeout: float = 30_000) -> None:
    """Until the element's text starts with ``text``; the page reaches it by its websocket."""
    page.wait_for_function(
        "([id, text]) => (document.getElementById(id).textContent || '').trim().startsWith(text)",
        arg=[element_id, text],
        timeout=timeout,
    )


def test_a_teacher_runs_a_league_from_the_admin_to_the_exports_with_real_agents(
    site, browser, agent_env, manage_py, tmp_path
):
    shots = DOC_SHOTS if os.environ.get("UPDATE_SCREENSHOTS") == "1" else tmp_path

    def shoot(page, name: str) -> None:
        """The admin pages a teacher meets, for docs/screenshots/ (``make screenshots``)."""
        page.screenshot(path=str(shots / f"{name}-desktop.png"), full_page=True)

    User.objects.create_superuser("teacher", "t@example.com", PASSWORD)
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    # No step may end on an error page, nor any page ask for something missing (an icon, a script).
    failed: list[str] = []
    context.on(
        "response", lambda response: response.status >= 400 and failed.append(f"{response.status} {response.url}")
    )
    admin = context.new_page()
    admin.set_default_timeout(10_000)
    procs: list[Process] = []

    def spawn(name: str, args: list[str], env: dict[str, str] | None = None) -> Process:
        proc = Process(args, env or agent_env, str(tmp_path / f"{name}.log"))
        procs.append(proc)
        return proc

    lm_url = f"{site.base}/mcp"
    try:
        # -- log in, create the league, open registration ------------------------------------
        admin.goto(f"{site.base}/admin/")
        admin.fill("#id_username", "teacher")
        admin.fill("#id_password", PASSWORD)
        admin.click("input[type=submit]")
        league = create_league(admin, "class_cup", "Class Cup", **SETTINGS)
        assert (league.game_type, league.round_pause, league.move_timeout) == ("even_odd", 3.0, 2.0)
        assert league.status == League.Status.INITIALIZING

        # The conductor runs beside the site, as the README's "Running a league by hand" says.
        spawn("conductor", [*manage_py, "runleague", "--poll", "0.05"])

        admin_action(admin, league, "open_registration")
        admin.fill("#id_minutes", "20")
        admin.click("input[name=apply]")
        assert "Registration opened: 1" in success(admin)

        # -- the referee key, and a referee started with the command its page shows -----------
        admin_action(admin, league, "generate_referee_key")
        shoot(admin, "admin-referee-key")
        # The admin's own breadcrumbs (styled as on its other pages), back to the league list.
        assert admin.locator("ol.breadcrumbs li[aria-current=page]").inner_text() == "Referee keys"
        command = admin.locator(".referee-command").inner_text()
        key = admin.locator(".referee-key").inner_text()
        words = shlex.split(command)
        assert words[0] == f"REFEREE_KEY={key}" and words[1:4] == ["python", "manage.py", "runreferee"]
        assert words[words.index("--league-id") + 1] == "class_cup"
        assert words[words.index("--league-url") + 1] == lm_url
        # Pasted as it is, with this machine's Python and a port that is free here.
        referee_port = free_ports(1)
        args = [sys.executable, str(ROOT / "manage.py"), *words[3:]]
        args[args.index("--port") + 1] = str(referee_port)
        spawn("referee", args, {**agent_env, "REFEREE_KEY": key})  # the league's key, not the site's
        admin.click("a:text-is('Back to the leagues')")

        # -- players by three routes ----------------------------------------------------------
        common = ["--league-url", lm_url, "--league-id", "class_cup"]
        direct_port = free_ports(2)
        spawn(
            "direct", [*manage_py, "runplayer", "--port", str(direct_port), "--count", "2", "--name", "Direct", *common]
        )
        spawn("relay", [*manage_py, "runplayer", "--connect", "--name", "Relayed", *common])
        # A student's own agent: it serves, and the student registers it with the join panel's curl.
        own_port = free_ports(1)
        spawn("own", [*manage_py, "runplayer", "--port", str(own_port), "--name", "Own", "--no-register", "--stay"])

        # The public page, from the admin's list: the teacher keeps it open in a tab of its own.
        href = admin.locator("#result_list tr:has(a:text-is('class_cup')) td.field-page a").get_attribute("href")
        watch = context.new_page()
        watch.goto(f"{site.base}{href}")
        wait_text(watch, "league-note", "Registration open,")
        assert watch.locator("#join").is_visible()
        assert watch.locator("#join-mcp").inner_text() == lm_url
        assert watch.locator("#progress-text").inner_text() == "No matches until the league starts."

        wait_for_port(own_port)
        own_url = f"http://127.0.0.1:{own_port}/mcp"
        watch.fill("#join-agent-url", own_url)
        curl = watch.locator("#join-curl").inner_text()
        ran = subprocess.run(["bash", "-c", curl], cwd=tmp_path, capture_output=True, text=True, timeout=30)
        assert ran.returncode == 0 and '"ACCEPTED"' in ran.stdout, ran.stdout + ran.stderr

        # Every agent appears on the page by itself.
        wait_text(watch, "count-players", "4 players", AGENTS)
        wait_text(watch, "count-referees", "1 referee", AGENTS)
        agents = watch.locator("#join-agents").inner_text()
        for name in ("Direct-1", "Direct-2", "Relayed", "Agent Alpha"):
            assert name in agents, agents
        endpoints = set(Player.objects.filter(league=league).values_list("endpoint", flat=True))
        assert own_url in endpoints and any("/relay/class_cup/" in e for e in endpoints), endpoints

        # -- start, watch, pause, resume ---------------------------------------------------------
        admin_action(admin, league, "start_league")
        messages = success(admin)
        assert "Started: 1" in messages and "No live referee" not in messages
        assert "The conductor (python manage.py runleague, running beside the site)" in messages
        wait_text(watch, "league-status", "RUNNING")
        watch.wait_for_selector("#join", state="hidden")
        admin_action(admin, league, "pause")
        assert "Paused: 1" in success(admin)
        wait_text(watch, "league-status", "PAUSED")
        wait_text(watch, "league-note", "Paused by the organiser after ")
        admin_action(admin, league, "resume")
        assert "Resumed: 1" in success(admin)

        # -- a second league, cancelled (after its confirmation) and deleted ---------------------
        spare = create_league(admin, "spare_cup", "Spare Cup")
        admin_action(admin, spare, "open_registration")
        admin.click("input[name=apply]")
        assert "Registration opened: 1" in success(admin)
        admin_action(admin, spare, "cancel")
        shoot(admin, "admin-cancel")
        assert admin.locator("ol.breadcrumbs li[aria-current=page]").inner_text() == "Cancel"
        asked = admin.locator("#content").inner_text()
        assert "Spare Cup" in asked and "cannot be resumed" in asked
        assert admin.locator("a:text-is('No, take me back')").is_visible()
        spare.refresh_from_db()
        assert spare.status == League.Status.REGISTERING  # nothing happens before the teacher confirms
        admin.click("input[value='Yes, cancel the league']")
        assert "Cancelled: 1" in success(admin)
        spare.refresh_from_db()
        assert spare.status == League.Status.CANCELLED
        admin_action(admin, spare, "delete_selected")
        admin.wait_for_selector("text=Are you sure")
        assert admin.locator("#content").inner_text().count("Spare Cup") >= 1
        admin.click("input[type=submit]")
        assert "Successfully deleted 1" in success(admin)
        assert not League.objects.filter(league_id="spare_cup").exists()

        # -- the league plays to the end, live on the page ---------------------------------------
        wait_text(watch, "league-status", "COMPLETED", AGENTS)
        wait_text(watch, "league-note", "Completed. Champion: ")
        wait_text(watch, "progress-text", "6 of 6 matches")
        results = MatchResult.objects.filter(league=league)
        assert results.count() == 6
        # Every route played its matches on their merits: no technical loss anywhere.
        assert not results.filter(technical_loss_a=True).exists() and not results.filter(technical_loss_b=True).exists()
        played = [int(text) for text in watch.locator("#standings-body tr td:nth-child(3)").all_inner_texts()]
        assert played == [3, 3, 3, 3]

        # -- exports: the page's downloads, its JSON API, the admin's full backup ----------------
        with watch.expect_download() as got:
            watch.click("a:text-is('standings.csv')")
        rows = list(csv.reader(io.StringIO(Path(got.value.path()).read_text(encoding="utf-8"))))
        assert len(rows) == 5 and {"Direct-1", "Direct-2", "Relayed", "Agent Alpha"} <= {c for r in rows for c in r}
        with watch.expect_download() as got:
            watch.click("a:text-is('results.csv')")
        rows = list(csv.reader(io.StringIO(Path(got.value.path()).read_text(encoding="utf-8"))))
        assert len(rows) == 7
        watch.click("a:text-is('JSON API')")
        assert "class_cup" in watch.locator("body").inner_text()

        admin_action(admin, league, "export_json", go=False)
        with admin.expect_download() as got:
            admin.click("button[name=index]")
        assert got.value.suggested_filename == "class_cup-export.json"
        backup = json.loads(Path(got.value.path()).read_text(encoding="utf-8"))
        assert backup["league"]["league_id"] == "class_cup" and len(backup["results"]) == 6
        assert failed == []
    finally:
        for proc in reversed(procs):
            proc.terminate(5)
        context.close()

    # The conductor's log follows the teacher's steps, the resumption included.
    marker = "league class_cup: "
    log = (tmp_path / "conductor.log").read_text()
    said = [line.split(marker, 1)[1] for line in log.splitlines() if marker in line]
    states = [s for s in said if s.isupper() or " -> " in s]  # not its pings' "P01 answers"
    assert states == [
        "REGISTERING",
        "REGISTERING -> READY",
        "READY -> RUNNING",
        "RUNNING -> PAUSED",
        "PAUSED -> RUNNING",
        "RUNNING -> COMPLETED",
    ], log
