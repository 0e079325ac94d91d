"""The organiser's workflow in the admin: create a league and open registration in real Chromium;
pause, resume, cancel and reinstate through the admin's actions, each logged as an Event."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from league.models import Event, League, Match, Player
from tests.browser.league_data import make_league

PASSWORD = "a-long-test-password-1"


def run_action(client: Client, model: str, action: str, *pks: int):
    return client.post(
        f"/admin/league/{model}/",
        {"action": action, "_selected_action": [str(pk) for pk in pks]},
        follow=True,
    )


@pytest.fixture
def staff(db) -> Client:
    User.objects.create_superuser("organiser", "o@example.com", PASSWORD)
    client = Client()
    client.login(username="organiser", password=PASSWORD)
    return client


def test_it_requires_login_for_the_admin(db):
    response = Client().get("/admin/league/league/")
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


@pytest.mark.django_db(transaction=True)  # the league page is read on its own threads (page_read)
def test_a_paused_leagues_page_says_by_whom_and_when(staff):
    league = make_league("spring_cup", players=4)
    run_action(staff, "league", "pause", league.pk)
    page = staff.get("/leagues/spring_cup/").content.decode()
    assert "Paused by the organiser after 0 of 6 matches." in page


def test_it_pauses_resumes_and_cancels_a_league(staff):
    league = make_league("spring_cup", players=4)
    run_action(staff, "league", "pause", league.pk)
    league.refresh_from_db()
    assert league.status == "PAUSED"

    run_action(staff, "league", "resume", league.pk)
    league.refresh_from_db()
    assert league.status == "RUNNING"

    response = run_action(staff, "league", "resume", league.pk)
    assert "not paused" in response.content.decode()

    asked = run_action(staff, "league", "cancel", league.pk).content.decode()
    assert "cannot be resumed" in asked and "Yes, cancel the league" in asked
    league.refresh_from_db()
    assert league.status == "RUNNING"  # nothing happens before the organiser confirms
    staff.post(
        "/admin/league/league/",
        {"action": "cancel", "_selected_action": [str(league.pk)], "apply": "1"},
        follow=True,
    )
    league.refresh_from_db()
    assert league.status == "CANCELLED"
    assert not Match.objects.filter(league=league).exclude(status="CANCELLED").exists()
    kinds = list(Event.objects.filter(league=league).values_list("kind", flat=True))
    assert kinds == ["league_paused", "league_resumed", "league_cancelled"]


def test_it_suspends_and_reinstates_a_player(staff):
    league = make_league("spring_cup", players=2)
    player = Player.objects.get(league=league, player_id="P02")
    run_action(staff, "player", "mark_suspended", player.pk)
    player.refresh_from_db()
    assert player.status == "SUSPENDED"
    run_action(staff, "player", "reinstate", player.pk)
    player.refresh_from_db()
    assert player.status == "REGISTERED"
    assert Event.objects.filter(league=league, kind="agent_reinstated", agent="P02").exists()


@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume")
def test_it_creates_a_league_and_opens_registration_in_the_browser(site, page):
    User.objects.create_superuser("organiser", "o@example.com", PASSWORD)
    page.goto(f"{site.base}/admin/league/league/add/")
    page.fill("#id_username", "organiser")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")

    # The id rule, with its one message, before anything is created.
    page.fill("#id_league_id", "winter cup!")
    page.fill("#id_name", "Winter Cup")
    assert page.locator("#id_game_type option").all_inner_texts() == ["even_odd", "even_odd_bo5"]
    page.select_option("#id_game_type", "even_odd_bo5")
    page.select_option("#id_schedule_format", "double")
    page.fill("#id_move_timeout", "5")
    page.click("input[name=_save]")
    page.wait_for_selector("text=is not valid: use 1-64 letters (a-z, A-Z), digits, underscores or hyphens")
    assert not League.objects.exists()
    page.fill("#id_league_id", "winter_cup")
    page.click("input[name=_save]")
    page.wait_for_selector("text=was added successfully")

    page.check("input[name=_selected_action]")
    page.select_option("select[name=action]", "open_registration")
    page.click("button[name=index]")
    page.fill("#id_minutes", "20")  # the organiser says how long
    page.click("input[name=apply]")
    page.wait_for_selector("text=Registration opened")

    league = League.objects.get(league_id="winter_cup")
    assert league.status == "REGISTERING"
    assert (league.game_type, league.schedule_format, league.move_timeout) == ("even_odd_bo5", "double", 5)
    assert (league.registration_closes_at - league.registration_opens_at).total_seconds() == 20 * 60

    # From the admin's league page to its public page.
    page.click("#result_list th a:text-is('winter_cup')")
    page.click("text=View on site")
    page.wait_for_url(f"{site.base}/leagues/winter_cup/")
    assert page.locator("#league-note").inner_text() == "Registration open, 0 players registered."
    # 20 minutes from the opening: 20:00 while its first second has not passed, 19:xx after.
    assert re.search(r"\(in (19:[0-5]\d|20:00)\)", page.locator("#join-countdown").inner_text())
    page.goto(f"{site.base}/admin/")
    assert page.locator("text=Matches").count() >= 1 and page.locator("text=Matchs").count() == 0


@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume")
def test_it_deletes_a_league_and_its_events_from_the_admin(site, page):
    from tests.browser.league_data import play_round

    User.objects.create_superuser("organiser", "o@example.com", PASSWORD)
    # Stored before ids were checked: "/" fails every page's 500 no more, and the admin removes it.
    bad = League.objects.create(league_id="bad id!", name="Bad", status=League.Status.INITIALIZING)
    Event.objects.create(league=bad, direction="STATE", kind="league_created")
    done = make_league("done_cup", players=4, status=League.Status.COMPLETED)
    play_round(done, 1)
    page.goto(f"{site.base}/")
    assert page.locator(".league-card").count() == 2
    page.goto(f"{site.base}/admin/league/league/")
    page.fill("#id_username", "organiser")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    for league in (bad, done):
        page.check(f"input[name=_selected_action][value='{league.pk}']")
    page.select_option("select[name=action]", "delete_selected")
    page.click("button[name=index]")
    page.wait_for_selector("text=Are you sure")
    assert page.locator("text=permission").count() == 0
    assert page.locator("text=done_cup").count() >= 1
    page.click("input[type=submit]")
    page.wait_for_selector("text=Successfully deleted 2")
    assert not League.objects.exists()
    assert sorted(Event.objects.values_list("payload__league_id", flat=True)) == ["bad id!", "done_cup"]
    page.goto(f"{site.base}/")
    assert "No leagues yet" in page.locator("main").inner_text()
