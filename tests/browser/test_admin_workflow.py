"""The organiser's workflow in the admin: create a league and open registration in real Chromium;
pause, resume, cancel and reinstate through the admin's actions, each logged as an Event."""

from __future__ import annotations

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


def test_it_pauses_resumes_and_cancels_a_league(staff):
    league = make_league("spring_cup", players=4)
    run_action(staff, "league", "pause", league.pk)
    league.refresh_from_db()
    assert league.status == "PAUSED"
    page = staff.get("/leagues/spring_cup/").content.decode()
    assert "Paused by the organiser after 0 of 6 matches." in page

    run_action(staff, "league", "resume", league.pk)
    league.refresh_from_db()
    assert league.status == "RUNNING"

    response = run_action(staff, "league", "resume", league.pk)
    assert "not paused" in response.content.decode()

    run_action(staff, "league", "cancel", league.pk)
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

    page.fill("#id_league_id", "winter_cup")
    page.fill("#id_name", "Winter Cup")
    page.select_option("#id_schedule_format", "double")
    page.fill("#id_move_timeout", "5")
    page.click("input[name=_save]")
    page.wait_for_selector("text=was added successfully")

    page.check("input[name=_selected_action]")
    page.select_option("select[name=action]", "open_registration")
    page.click("button[name=index]")
    page.wait_for_selector("text=Registration opened")

    league = League.objects.get(league_id="winter_cup")
    assert league.status == "REGISTERING"
    assert league.schedule_format == "double"
    assert league.move_timeout == 5
    page.goto(f"{site.base}/leagues/winter_cup/")
    assert "Registration open until" in page.locator("#league-note").inner_text()
    assert "0 players registered" in page.locator("#league-note").inner_text()
