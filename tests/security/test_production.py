"""Admin pages behind login; `manage.py check --deploy` clean with the documented production settings."""

from __future__ import annotations

import secrets
import subprocess
import sys

import pytest
from django.urls import reverse

from tests.conftest import ROOT

PRODUCTION_ENV = {
    "DEBUG": "0",
    "ALLOWED_HOSTS": "league.example.org",
    "SECURE_SSL_REDIRECT": "1",
    "SESSION_COOKIE_SECURE": "1",
    "CSRF_COOKIE_SECURE": "1",
    "SECURE_HSTS_SECONDS": "31536000",
}


@pytest.mark.parametrize(
    "name",
    [
        "admin:index",
        "admin:league_league_changelist",
        "admin:league_league_add",
        "admin:league_player_changelist",
        "admin:league_referee_changelist",
        "admin:league_event_changelist",
        "admin:league_matchresult_changelist",
    ],
)
def test_admin_pages_send_anonymous_visitors_to_the_login(client, db, name):
    url = reverse(name)
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login")) and "next=" in response["Location"]


def test_an_anonymous_admin_action_changes_nothing(client, db):
    from league.models import League

    league = League.objects.create(name="Cup", league_id="cup")
    response = client.post(
        reverse("admin:league_league_changelist"), {"action": "start_league", "_selected_action": [league.pk]}
    )
    assert response.status_code in (302, 403)
    league.refresh_from_db()
    assert league.status == "INITIALIZING"


def test_a_non_staff_user_cannot_reach_the_admin(client, django_user_model):
    user = django_user_model.objects.create_user("student", password="pw-for-tests-only")
    client.force_login(user)
    response = client.get(reverse("admin:league_player_changelist"))
    assert response.status_code == 302 and response["Location"].startswith(reverse("admin:login"))


def _check_deploy(extra_env: dict[str, str], tmp_path) -> subprocess.CompletedProcess:
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "SECRET_KEY_FILE": str(tmp_path / "secret"),
        **extra_env,
    }
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "check", "--deploy", "--fail-level", "WARNING"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_the_documented_production_settings(tmp_path):
    done = _check_deploy({**PRODUCTION_ENV, "SECRET_KEY": secrets.token_urlsafe(50)}, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout


def test_check_deploy_flags_the_development_defaults(tmp_path):
    done = _check_deploy({"DEBUG": "1"}, tmp_path)
    assert done.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016", "security.W018"):
        assert warning in done.stderr + done.stdout
