"""The Event log's secret stripping (league/events.py)."""

from __future__ import annotations

import orjson
import pytest

from league.events import strip_secrets, without_secrets
from league.fields import FastJSONField
from league.models import MatchResult

LOG = [{"seq": 1, "message": {"message_type": "GAME_INVITATION", "player_id": "P01"}}, {"seq": 2, "note": "é"}]


def test_a_value_without_secrets_comes_back_as_the_json_already_encoded():
    encoded = without_secrets(LOG)
    assert type(encoded) is orjson.Fragment
    assert orjson.loads(orjson.dumps(encoded)) == LOG
    assert strip_secrets(LOG) is LOG  # nothing to strip: the value itself, not a copy


def test_a_value_with_a_secret_at_any_depth_comes_back_stripped():
    log = [{"seq": 1, "message": {"auth_token": "match-secret", "nested": [{"league_manager_token": "t"}]}}]
    for stripped in (without_secrets(log), strip_secrets(log)):
        assert stripped == [{"seq": 1, "message": {"nested": [{}]}}]
    assert log[0]["message"]["auth_token"] == "match-secret"  # the caller's value is left as it was


def test_what_orjson_cannot_encode_is_walked_instead():
    log = [{"big": 2**70, "auth_token": "x"}, {"big": 2**70}]
    assert without_secrets(log) == [{"big": 2**70}, {"big": 2**70}]
    assert without_secrets("plain") == "plain"


def _text(prepared):
    """The JSON text a prepared value writes (PostgreSQL's adapter holds it behind ``dumps``)."""
    return prepared.dumps(prepared.obj) if hasattr(prepared, "dumps") else prepared


@pytest.mark.django_db
def test_the_json_field_writes_an_encoded_value_as_it_is():
    from django.db import connection

    field = MatchResult._meta.get_field("log")
    assert isinstance(field, FastJSONField)
    plain = _text(field.get_db_prep_value(LOG, connection))
    assert _text(field.get_db_prep_value(without_secrets(LOG), connection)) == plain
    assert [_text(v) for v in field.db_values([without_secrets(LOG), LOG], connection)] == [plain, plain]
