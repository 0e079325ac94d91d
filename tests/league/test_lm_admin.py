"""The admin: league workflow actions, read-only token hash, agent actions, read-only event log."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from league.conductor import common, delivery_log
from league.models import Event, League, Player


@pytest.fixture
def admin_client(client, db):
    user = User.objects.create_superuser("admin", "admin@example.com", "pw-for-tests-only")
    client.force_login(user)
    return client


def _league(**fields) -> League:
    return League.objects.create(name="Cup", league_id="cup", **fields)


def test_it_opens_closes_and_starts_a_league_from_the_changelist(admin_client):
    league = _league(min_players=1)
    url = reverse("admin:league_league_changelist")
    asked = admin_client.post(url, {"action": "open_registration", "_selected_action": [league.pk]})
    assert "Keep registration open for (minutes)" in asked.content.decode()
    league.refresh_from_db()
    assert league.status == "INITIALIZING"  # nothing happens before the organiser says how long
    admin_client.post(
        url, {"action": "open_registration", "_selected_action": [league.pk], "apply": "1", "minutes": "15"}
    )
    league.refresh_from_db()
    assert league.registration_open()
    window = (league.registration_closes_at - league.registration_opens_at).total_seconds()
    assert window == 15 * 60
    admin_client.post(url, {"action": "close_registration", "_selected_action": [league.pk]})
    league.refresh_from_db()
    assert not league.registration_open()
    response = admin_client.post(url, {"action": "start_league", "_selected_action": [league.pk]}, follow=True)
    assert "at least 1 are needed" in response.content.decode()
    Player.objects.create(league=league, player_id="P01", display_name="a", endpoint="http://127.0.0.1:9101/mcp")
    admin_client.post(url, {"action": "start_league", "_selected_action": [league.pk]})
    league.refresh_from_db()
    assert league.status == "READY"


def test_it_creates_a_league_with_all_its_settings(admin_client):
    response = admin_client.get(reverse("admin:league_league_add"))
    page = response.content.decode()
    for field in ("move_timeout", "retry_delay", "max_players", "registration_closes_at_0", "schedule_format"):
        assert f'name="{field}"' in page


def test_it_shows_the_token_hash_read_only_and_suspends_players(admin_client):
    league = _league()
    player = Player.objects.create(
        league=league, player_id="P01", display_name="a", endpoint="http://127.0.0.1:9101/mcp", token_hash="ab" * 32
    )
    page = admin_client.get(reverse("admin:league_player_change", args=[player.pk])).content.decode()
    assert "ab" * 32 in page and 'name="token_hash"' not in page
    admin_client.post(
        reverse("admin:league_player_changelist"), {"action": "mark_suspended", "_selected_action": [player.pk]}
    )
    player.refresh_from_db()
    assert player.status == "SUSPENDED"
    assert Event.objects.filter(kind="agent_suspended", agent="P01").exists()


def test_the_event_log_cannot_be_added_changed_or_deleted(admin_client):
    event = Event.objects.create(direction="STATE", kind="x")
    assert admin_client.get(reverse("admin:league_event_changelist")).status_code == 200
    assert admin_client.get(reverse("admin:league_event_add")).status_code == 403
    assert admin_client.get(reverse("admin:league_event_delete", args=[event.pk])).status_code == 403
    change = admin_client.get(reverse("admin:league_event_change", args=[event.pk])).content.decode()
    assert 'name="kind"' not in change


def test_the_event_log_names_who_a_notice_to_several_agents_went_to(admin_client):
    league = _league()
    body = {"message_type": "ROUND_COMPLETED", "round_id": 1, "conversation_id": "c"}
    batch = [common.Delivery(f"P0{n}", f"http://x/{n}", "notify_round_completed", body) for n in range(1, 6)]
    pair = batch[:2]
    delivery_log.record_deliveries(league, [[(d, "ok", None) for d in batch], [(d, "timeout", None) for d in pair]])

    page = admin_client.get(reverse("admin:league_event_changelist")).content.decode()

    assert "P01, P02, P03 … (5 agents)" in page and "P01, P02<" in page
    # Searching an agent's id finds the notices it was sent with the others, and only those.
    found = admin_client.get(reverse("admin:league_event_changelist"), {"q": "P04"}).content.decode()
    assert "P01, P02, P03 … (5 agents)" in found and "P01, P02<" not in found
    assert "P01, P02<" in admin_client.get(reverse("admin:league_event_changelist"), {"q": "P02"}).content.decode()


def test_it_opens_registration_until_closed_by_hand_when_no_duration_is_given(admin_client):
    league = _league()
    url = reverse("admin:league_league_changelist")
    admin_client.post(
        url, {"action": "open_registration", "_selected_action": [league.pk], "apply": "1", "minutes": ""}
    )
    league.refresh_from_db()
    assert league.registration_open() and league.registration_closes_at is None


def test_it_offers_only_the_games_the_registry_knows(admin_client):
    page = admin_client.get(reverse("admin:league_league_add")).content.decode()
    assert '<option value="even_odd" selected>' in page and '<option value="even_odd_bo5">' in page
    response = admin_client.post(
        reverse("admin:league_league_add"), {**_add_form(), "league_id": "chess_cup", "game_type": "chess"}
    )
    assert "Select a valid choice. chess is not one of the available choices." in response.content.decode()
    assert not League.objects.exists()


def test_it_refuses_a_bad_league_id_with_the_one_message(admin_client):
    response = admin_client.post(reverse("admin:league_league_add"), {**_add_form(), "league_id": "bad id!"})
    assert "league id &#x27;bad id!&#x27; is not valid: use 1-64 letters" in response.content.decode()
    assert not League.objects.exists()


def test_it_creates_through_the_named_action_and_then_keeps_the_id(admin_client):
    response = admin_client.post(
        reverse("admin:league_league_add"), {**_add_form(), "league_id": "winter"}, follow=True
    )
    assert response.status_code == 200
    league = League.objects.get(league_id="winter")
    assert Event.objects.filter(league=league, kind="league_created").exists()
    change = admin_client.get(reverse("admin:league_league_change", args=[league.pk])).content.decode()
    assert 'name="league_id"' not in change  # agents know the league by it
    assert 'href="/leagues/winter/"' in change and "View on site" in change


def test_it_creates_a_swiss_league_with_its_rounds_and_refuses_one_without(admin_client):
    url = reverse("admin:league_league_add")
    form = {**_add_form(), "league_id": "swiss", "schedule_format": "swiss"}
    refused = admin_client.post(url, form).content.decode()
    assert "number of rounds" in refused and not League.objects.filter(league_id="swiss").exists()
    too_many = admin_client.post(url, {**form, "swiss_rounds": "200"}).content.decode()
    assert "at most 199 rounds" in too_many and not League.objects.filter(league_id="swiss").exists()
    admin_client.post(url, {**form, "swiss_rounds": "5"}, follow=True)
    league = League.objects.get(league_id="swiss")
    assert (league.schedule_format, league.swiss_rounds) == ("swiss", 5)


def test_it_names_its_models_as_people_read_them(admin_client):
    page = admin_client.get(reverse("admin:index")).content.decode()
    assert ">Matches<" in page and "Matchs" not in page


def test_it_deletes_a_league_with_its_events_in_one_logged_action(admin_client):
    from tests.browser.league_data import make_league, play_round

    league = make_league("old_cup", players=4, status=League.Status.COMPLETED)
    play_round(league, 1)
    Event.objects.create(league=league, direction="STATE", kind="x")
    url = reverse("admin:league_league_delete", args=[league.pk])
    confirm = admin_client.get(url).content.decode()
    assert "4 players" in confirm and "6 matches" in confirm and "1 events" in confirm
    assert "permission" not in confirm
    admin_client.post(url, {"post": "yes"}, follow=True)
    assert not League.objects.exists() and not Event.objects.filter(kind="x").exists()
    gone = Event.objects.get(kind="league_deleted")
    assert (gone.agent, gone.payload["league_id"], gone.payload["results"]) == ("admin", "old_cup", 2)


def test_it_asks_to_cancel_a_league_in_play_before_deleting_it(admin_client):
    league = _league(status=League.Status.RUNNING)
    page = admin_client.get(reverse("admin:league_league_delete", args=[league.pk])).content.decode()
    assert "RUNNING: cancel it first" in page
    assert "This league cannot be deleted yet" in page and "protected related objects" not in page
    selected = admin_client.post(
        reverse("admin:league_league_changelist"), {"action": "delete_selected", "_selected_action": [league.pk]}
    ).content.decode()
    assert "These leagues cannot be deleted yet" in selected and "protected related objects" not in selected
    admin_client.post(reverse("admin:league_league_delete", args=[league.pk]), {"post": "yes"})
    assert League.objects.filter(pk=league.pk).exists()


def test_it_exports_one_league_as_the_json_backup(admin_client):
    from tests.browser.league_data import make_league, play_round

    league = make_league("old_cup", players=4, status=League.Status.COMPLETED)
    play_round(league, 1)
    other = _league()
    url = reverse("admin:league_league_changelist")
    response = admin_client.post(url, {"action": "export_json", "_selected_action": [league.pk]})
    assert response["Content-Disposition"] == 'attachment; filename="old_cup-export.json"'
    data = json.loads(response.content)
    assert data["format"] == "league-export/1" and data["league"]["league_id"] == "old_cup"
    assert len(data["results"]) == 2 and "token_hash" not in response.content.decode()
    # One file per league: two selected are refused with a word, not a zip or the first one.
    both = admin_client.post(url, {"action": "export_json", "_selected_action": [league.pk, other.pk]}, follow=True)
    assert "Select one league to export" in both.content.decode()


def _add_form() -> dict[str, str]:
    return {
        "name": "Cup",
        "game_type": "even_odd",
        "schedule_format": "single",
        "swiss_rounds": "0",
        "min_players": "2",
        "max_players": "200",
        "max_referees": "50",
        "join_timeout": "5",
        "move_timeout": "30",
        "game_over_timeout": "5",
        "report_timeout": "10",
        "default_timeout": "10",
        "retries": "3",
        "retry_delay": "2",
        "max_invalid_moves": "3",
        "match_deadline": "300",
        "round_pause": "0",
        "allowed_networks": "127.0.0.0/8",
        "rate_limit_per_minute": "600",
        "max_seats_per_network": "0",
        "referees-TOTAL_FORMS": "0",
        "referees-INITIAL_FORMS": "0",
        "players-TOTAL_FORMS": "0",
        "players-INITIAL_FORMS": "0",
    }


def test_the_referee_key_page_gives_a_command_ready_to_paste(admin_client):
    league = _league()
    page = admin_client.post(
        reverse("admin:league_league_changelist"), {"action": "generate_referee_key", "_selected_action": [league.pk]}
    ).content.decode()
    key = page.split('<code class="referee-key">')[1].split("</code>")[0]
    assert (
        f"REFEREE_KEY={key} python manage.py runreferee --port 8001 --league-id cup "
        "--league-url http://testserver/mcp" in page
    )
    league.refresh_from_db()
    from league.actions import check_referee_key

    check_referee_key(league, key)  # the key shown is the league's


def test_starting_a_league_with_no_live_referee_warns(admin_client, settings):
    settings.REFEREE_KEY = ""
    league = _league(min_players=1)
    Player.objects.create(league=league, player_id="P01", display_name="a", endpoint="http://127.0.0.1:9101/mcp")
    response = admin_client.post(
        reverse("admin:league_league_changelist"),
        {"action": "start_league", "_selected_action": [league.pk]},
        follow=True,
    )
    page = response.content.decode()
    assert "League cup: No live referee: none has registered with it" in page
    assert "Generate the league&#x27;s referee key first" in page
