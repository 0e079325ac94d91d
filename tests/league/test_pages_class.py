"""The home page's cards, the API's root and its documented security, served by Django's test
client (no script involved)."""

from __future__ import annotations

import pytest
import yaml
from django.test import Client

from league.models import AgentStatus, League
from tests.browser.league_data import make_league

pytestmark = pytest.mark.django_db


@pytest.fixture
def client() -> Client:
    return Client()


@pytest.mark.django_db(transaction=True)  # the league page is read on its own threads (page_read)
def test_the_card_of_a_league_in_play_with_no_live_referee_warns_as_its_page_does(client):
    stalled = make_league("stalled_cup", players=4, referees=1)
    stalled.referees.update(status=AgentStatus.SUSPENDED)
    make_league("fine_cup", players=4, referees=1)
    page = client.get("/").content.decode()
    card = page[page.index('data-league="stalled_cup"') :].split("</a>", 1)[0]
    assert "No live referee: its 1 referee is suspended or gone, so no match can be played." in card
    assert "runreferee" in card and "--league-id stalled_cup" in card
    fine = page[page.index('data-league="fine_cup"') :].split("</a>", 1)[0]
    assert "No live referee" not in fine
    # The same words as the league page's own warning.
    league_page = client.get("/leagues/stalled_cup/").content.decode()
    assert "No live referee: its 1 referee is suspended or gone" in league_page


def test_a_league_not_yet_in_play_has_no_referee_warning_on_its_card(client):
    make_league("open_cup", players=2, status=League.Status.REGISTERING, scheduled=False, referees=0)
    assert "No live referee" not in client.get("/").content.decode()


def test_the_api_root_describes_the_api_and_links_to_its_docs_and_the_site(client):
    data = client.get("/api/", HTTP_ACCEPT="application/json").json()
    assert data["leagues"].endswith("/api/leagues/")
    assert data["docs"].endswith("/api/docs/")
    assert data["schema"].endswith("/api/schema/")
    assert data["site"] == "http://testserver/"
    browsable = client.get("/api/", HTTP_ACCEPT="text/html").content.decode()
    assert "interactive reference is at /api/docs/" in browsable
    assert client.get("/api/docs/").status_code == 200


def test_the_schema_marks_every_endpoint_public(client):
    schema = yaml.safe_load(client.get("/api/schema/").content)
    operations = [op for item in schema["paths"].values() for op in item.values() if isinstance(op, dict)]
    assert operations
    # "security: [{}]" is OpenAPI's "no authentication": Swagger UI shows no lock.
    assert all(op.get("security", [{}]) == [{}] for op in operations)
    assert "securitySchemes" not in schema.get("components", {})


@pytest.mark.django_db(transaction=True)  # the league page is read on its own threads (page_read)
def test_every_page_links_the_favicon(client):
    # An id of its own: pages are cached by league id and version (league/pages/views.py).
    make_league("favicon_cup", players=2)
    for url in ("/", "/leagues/favicon_cup/", "/leagues/favicon_cup/players/P01/", "/check/"):
        assert 'rel="icon" type="image/svg+xml" href="/static/league/favicon.svg"' in client.get(url).content.decode()
