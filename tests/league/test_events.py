"""The Event log's secret stripping and the live broadcasts (league/events.py)."""

from __future__ import annotations

import channels.layers
import orjson
import pytest
from asgiref.sync import async_to_sync
from channels.layers import BaseChannelLayer, InMemoryChannelLayer

from league.events import send_all, send_now, strip_secrets, without_secrets
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


class Recording:
    """Wraps a channel layer's ``group_send`` to list what was handed to it."""

    def __init__(self, layer: BaseChannelLayer, monkeypatch: pytest.MonkeyPatch) -> None:
        self.layer = layer
        self.sent: list[tuple[str, str]] = []
        real = layer.group_send

        async def group_send(group: str, message: dict) -> None:
            self.sent.append((group, message["event"]))
            await real(group, message)

        monkeypatch.setattr(layer, "group_send", group_send)
        monkeypatch.setattr(channels.layers, "get_channel_layer", lambda alias="default": layer)


def test_on_the_in_memory_layer_only_groups_someone_joined_are_sent_to(monkeypatch):
    layer = Recording(InMemoryChannelLayer(), monkeypatch)
    send_now("one", "league_status", {})
    send_all([("one", "match_started", {"match_id": "R1M1"}), ("two", "match_started", {"match_id": "R1M2"})])
    assert layer.sent == []  # no dashboard of this process watches either league

    async_to_sync(layer.layer.group_add)("league_two", "viewer")
    send_now("one", "league_status", {})
    send_all([("one", "match_started", {"match_id": "R1M1"}), ("two", "match_started", {"match_id": "R1M2"})])
    send_now("two", "league_status", {"status": "COMPLETED"})
    assert layer.sent == [("league_two", "match_started"), ("league_two", "league_status")]
    received = [async_to_sync(layer.layer.receive)("viewer") for _ in range(2)]
    assert [(m["event"], m["data"]) for m in received] == [
        ("match_started", {"match_id": "R1M2"}),
        ("league_status", {"status": "COMPLETED"}),
    ]


class OtherProcesses(BaseChannelLayer):
    """A layer whose groups live elsewhere (as Redis's do): who listens is not known here."""

    extensions = ["groups"]

    async def group_send(self, group: str, message: dict) -> None:
        pass


def test_other_layers_are_always_sent_to(monkeypatch):
    layer = Recording(OtherProcesses(), monkeypatch)
    send_now("one", "league_status", {})
    send_all([("one", "match_started", {}), ("two", "match_started", {})])
    assert layer.sent == [
        ("league_one", "league_status"),
        ("league_one", "match_started"),
        ("league_two", "match_started"),
    ]
