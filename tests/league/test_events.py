"""The Event log (rows appended in order, secrets stripped) and the live broadcasts after commit
(league/events.py)."""

from __future__ import annotations

import orjson
import pytest
from asgiref.sync import async_to_sync
from channels.layers import BaseChannelLayer, InMemoryChannelLayer, get_channel_layer
from django.db import transaction
from django.utils import timezone

from league import events
from league.events import append_events, broadcast, event_values, record_event, strip_secrets
from league.models import Event, League

LOG = [{"seq": 1, "message": {"message_type": "GAME_INVITATION", "player_id": "P01"}}, {"seq": 2, "note": "é"}]


def test_a_value_without_secrets_comes_back_as_it_is():
    assert strip_secrets(LOG) is LOG  # nothing to strip: the value itself, not a copy


def test_a_value_with_a_secret_at_any_depth_comes_back_stripped():
    log = [{"seq": 1, "message": {"auth_token": "match-secret", "nested": [{"league_manager_token": "t"}]}}]
    assert strip_secrets(log) == [{"seq": 1, "message": {"nested": [{}]}}]
    assert log[0]["message"]["auth_token"] == "match-secret"  # the caller's value is left as it was


def test_what_orjson_cannot_encode_is_walked_instead():
    log = [{"big": 2**70, "auth_token": "x"}, {"big": 2**70}]
    assert strip_secrets(log) == [{"big": 2**70}, {"big": 2**70}]
    assert strip_secrets("plain") == "plain"


@pytest.mark.django_db
def test_a_message_with_json_encoded_already_is_stored_as_plain_json():
    # The conductor encodes a round's standings once for every player's message (orjson.Fragment).
    league = League.objects.create(league_id="fragment_cup", name="Fragment Cup")
    table = [{"rank": 1, "player_id": "P01", "points": 3}]
    message = {
        "message_type": "LEAGUE_STANDINGS_UPDATE",
        "auth_token": "t",
        "standings": orjson.Fragment(orjson.dumps(table)),
    }
    record_event(league, "OUT", "LEAGUE_STANDINGS_UPDATE", agent="P01", payload={"message": message})
    stored = Event.objects.get(league=league)
    assert stored.payload == {"message": {"message_type": "LEAGUE_STANDINGS_UPDATE", "standings": table}}


@pytest.mark.django_db
def test_appended_rows_keep_their_order_one_timestamp_and_no_secrets():
    league = League.objects.create(league_id="log_cup", name="Log Cup")
    message = {"message_type": "GAME_OVER", "auth_token": "secret", "match": {"match_token": "m"}}
    rows = [
        event_values(league, "OUT", "GAME_OVER", agent="P01", match_id="R1M1", payload={"message": message}),
        event_values(None, "STATE", "k" * 60, agent="P02" * 20, payload=None),
    ]
    append_events(rows)
    record_event(league, "IN", "ping", agent="REF01")
    stored = list(Event.objects.order_by("id"))
    assert [(e.league_id, e.direction, e.kind, e.agent, e.match_id) for e in stored] == [
        (league.pk, "OUT", "GAME_OVER", "P01", "R1M1"),
        (None, "STATE", "k" * 40, ("P02" * 20)[:40], ""),  # cut to the columns' lengths
        (league.pk, "IN", "ping", "REF01", ""),
    ]
    assert stored[0].payload == {"message": {"message_type": "GAME_OVER", "match": {}}}
    assert stored[0].at == stored[1].at <= stored[2].at


def received(channel: str, count: int) -> list[tuple[str, dict]]:
    """The first ``count`` events ``channel`` hears, from however many layer messages."""
    layer = get_channel_layer()
    heard: list[tuple[str, dict]] = []
    while len(heard) < count:
        heard += [(m["event"], m["data"]) for m in events.events_of(async_to_sync(layer.receive)(channel))]
    return heard


SENT: list[tuple[str, str]] = []  # (group, event) each layer below was handed, in order
MESSAGES: list[str] = []  # the group of each layer message the layers below were handed


def _handed(group: str, message: dict) -> None:
    MESSAGES.append(group)
    SENT.extend((group, item["event"]) for item in events.events_of(message))


class RecordingInMemory(InMemoryChannelLayer):
    """The in-memory layer, listing what it is handed."""

    async def group_send(self, group: str, message: dict) -> None:
        _handed(group, message)
        await super().group_send(group, message)


class OtherProcesses(BaseChannelLayer):
    """A layer whose groups live elsewhere (as Redis's do): who listens is not known here."""

    extensions = ["groups"]

    async def group_send(self, group: str, message: dict) -> None:
        _handed(group, message)


class Broken(OtherProcesses):
    async def group_send(self, group: str, message: dict) -> None:
        raise ConnectionError("redis is down")


@pytest.fixture
def use_layer(settings):
    """``use_layer(cls)``: the site's channel layer is a new ``cls`` (through CHANNEL_LAYERS, the
    setting Channels reads its layers from again when it changes); returns what it is handed."""

    def use(backend: type[BaseChannelLayer]) -> list[tuple[str, str]]:
        settings.CHANNEL_LAYERS = {"default": {"BACKEND": f"{__name__}.{backend.__name__}"}}
        assert type(get_channel_layer()) is backend
        SENT.clear()
        MESSAGES.clear()
        return SENT

    return use


@pytest.fixture
def watched(use_layer):
    """A dashboard of this process watching league ``one`` (what ``LeagueConsumer`` does), on a
    recording in-memory layer."""
    use_layer(RecordingInMemory)
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)("league_one", channel)
    events.joined("league_one")
    yield channel
    events.left("league_one")
    async_to_sync(layer.group_discard)("league_one", channel)


@pytest.mark.django_db(transaction=True)
def test_a_broadcast_is_sent_after_the_commit_in_order_and_never_after_a_rollback(watched):
    with pytest.raises(RuntimeError), transaction.atomic():
        broadcast("one", "match_started", {"match_id": "R1M1"})
        raise RuntimeError("rolled back")
    with transaction.atomic():
        broadcast("one", "match_started", {"match_id": "R1M2"})
        events.broadcast_all([("one", "match_finished", {"match_id": "R1M2"}), ("one", "round_completed", {})])
        assert SENT == []  # not before the commit
    assert received(watched, 3) == [
        ("match_started", {"match_id": "R1M2"}),
        ("match_finished", {"match_id": "R1M2"}),
        ("round_completed", {}),
    ]
    assert len(SENT) == 3  # the rolled-back one never was
    assert MESSAGES == ["league_one", "league_one"]  # broadcast_all's two events: one message


def test_a_commits_events_go_as_one_message_per_run_of_one_group_in_order(use_layer):
    sent = use_layer(OtherProcesses)
    finished = [("league_one", "match_finished", {"match_id": f"R1M{i}"}) for i in range(1, 251)]
    messages = [
        ("league_one", "round_started", {}),
        *finished,
        ("league_two", "match_started", {}),
        ("league_one", "round_completed", {}),
    ]
    events.send(messages)
    assert sent == [(group, event) for group, event, _ in messages]
    # 251 events to league_one in three messages of at most EVENTS_PER_MESSAGE, then the others.
    assert MESSAGES == ["league_one"] * 3 + ["league_two", "league_one"]
    shapes = [(m["type"], len(events.events_of(m))) for _, m in events.layer_messages(messages)]
    assert (
        shapes == [("league.events", 100), ("league.events", 100), ("league.events", 51)] + [("league.events", 1)] * 2
    )
    assert events.events_of(events.layer_messages(messages)[0][1])[1] == {
        "event": "match_finished",
        "data": {"match_id": "R1M1"},
    }


def test_on_the_in_memory_layer_only_groups_a_websocket_of_this_process_joined_are_sent_to(use_layer):
    sent = use_layer(RecordingInMemory)
    events.send([("league_one", "league_status", {}), ("league_two", "match_started", {"match_id": "R1M2"})])
    assert sent == []  # no dashboard of this process watches either league

    events.joined("league_two")
    try:
        events.send([("league_one", "league_status", {}), ("league_two", "match_started", {"match_id": "R1M2"})])
    finally:
        events.left("league_two")
    assert sent == [("league_two", "match_started")]


def test_other_layers_are_always_sent_to(use_layer):
    sent = use_layer(OtherProcesses)
    events.send([("league_one", "league_status", {}), ("league_two", "match_started", {})])
    assert sent == [("league_one", "league_status"), ("league_two", "match_started")]


def test_a_failing_layer_never_breaks_the_caller(use_layer, caplog):
    use_layer(Broken)
    events.send([("league_one", "league_status", {}), ("league_two", "league_status", {})])
    assert [r.getMessage() for r in caplog.records].count(
        "broadcast of 1 events to league_one failed: ConnectionError('redis is down')"
    ) == 1
    assert len(caplog.records) == 2  # the second was tried too


@pytest.mark.django_db
def test_appended_rows_read_back_as_the_orm_writes_them():
    """The rows are inserted with SQL of their own: their time compares with the ORM's times, and
    a payload holding an already encoded part (``orjson.Fragment``) or a number as a key reads
    back as plain JSON."""
    league = League.objects.create(league_id="sql_cup", name="SQL Cup")
    before = timezone.now()
    payload = {"table": orjson.Fragment(b'[{"rank":1}]'), "by_round": {1: "R1"}}
    append_events([event_values(league, "OUT", "LEAGUE_STANDINGS_UPDATE", agent="*", payload=payload)])
    after = timezone.now()
    stored = Event.objects.get(league=league, at__gte=before, at__lte=after)
    assert stored.payload == {"table": [{"rank": 1}], "by_round": {"1": "R1"}}
    assert list(Event.objects.filter(league=league, at__gt=after)) == []
