"""Schemathesis against the REST API's own OpenAPI schema (/api/schema/), in-process over WSGI:
no 500s, and every response matches the schema (status codes, content types, bodies)."""

from __future__ import annotations

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings

from league import actions
from league.models import Player, Referee
from tests.league.lm_support import log_for, site_referee_key

schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application())
# Valid requests only: the property is "no 500s and responses match the schema"; what the API does
# with requests the schema forbids (ignores a bad ?offset, 404 for a non-slug id) is not part of it.
schema.config.generation.update(modes=[schemathesis.GenerationMode.POSITIVE], allow_x00=False)


@pytest.fixture
def wsgi_keeps_the_test_connection():
    """As Django's test client does: a request must not close the test transaction's connection."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def api_league(db, wsgi_keeps_the_test_connection) -> None:
    """A league with players, a referee, a finished and a scheduled match, for realistic responses."""
    league = actions.create_league(name="Api Cup", league_id="api_cup")
    actions.open_registration(league, 600)
    for n in range(3):
        meta = {
            "display_name": f"p{n}",
            "protocol_version": "2.1.0",
            "game_types": ["even_odd"],
            "contact_endpoint": f"http://127.0.0.1:{9901 + n}/mcp",
        }
        actions.register_player("api_cup", meta, None)
    ref_meta = {"display_name": "ref", "game_types": ["even_odd"], "contact_endpoint": "http://127.0.0.1:9909/mcp"}
    actions.register_referee("api_cup", ref_meta, None, referee_key=site_referee_key())
    p1, p2, p3 = Player.objects.order_by("id")
    referee = Referee.objects.get()
    actions.create_match(league, 1, p1, p2, match_id="R1M1", referee=referee)
    actions.create_match(league, 1, p3, p1, match_id="R1M2")
    result = {"status": "WIN", "winner": "P01", "score": {"P01": 3, "P02": 0}, "technical_loss": [], "details": {}}
    actions.record_result(referee, "R1M1", result, log_for("P01", "P02", result))


@schema.parametrize()
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_the_api_answers_as_its_schema_says(case, api_league):
    case.call_and_validate()
