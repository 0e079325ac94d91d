"""The admin: league workflow actions, read-only token hash, agent actions, read-only event log."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

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
    admin_client.post(url, {"action": "open_registration", "_selected_action": [league.pk]})
    league.refresh_from_db()
    assert league.registration_open()
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
