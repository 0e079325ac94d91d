"""league.dbexec.insert_rows: rows read back as ``bulk_create`` writes them, column by column."""

from __future__ import annotations

from collections import OrderedDict
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from django.utils.functional import lazy

from league.dbexec import insert_rows
from league.models import Event, League
from tests.league.lm_support import make_league

COLUMNS = ("league", "at", "direction", "kind", "agent", "match_id", "payload")
READ = ("league_id", "at", "direction", "kind", "agent", "match_id", "payload")


def lazy_text(text: str) -> str:
    return lazy(lambda: text, str)()


def sample_rows(league: League) -> list[tuple]:
    shared = timezone.now()  # one timestamp down the column, as append_events writes it
    return [
        (league.pk, shared, "OUT", "ACK", "P01", "R1M1", {"status": "received", "nested": {"list": [1, 2.5, None]}}),
        (None, shared, "IN", "ping", "", "", [1, "two", {"three": 3}]),
        # orjson refuses integers beyond 64 bits: Django's own encoding takes over.
        (league.pk, shared, "STATE", "big", "P02", "", {"n": 2**70}),
        # Keys that are not strings become strings, as json.dumps makes them.
        (league.pk, shared + timedelta(seconds=1), "STATE", "keys", "P03", "", {1: "one", "2": "two"}),
        # A dict subclass and scalars take the field's own path.
        (league.pk, shared, "STATE", "ordered", "P04", "", OrderedDict([("b", 1), ("a", 2)])),
        (league.pk, shared, "STATE", "text", "P05", "", "just a string"),
        (league.pk, shared, "STATE", "number", "P06", "", 42),
        # A value that is not a plain str in a text column goes through the field.
        (league.pk, shared, "STATE", "lazy", lazy_text("P07"), "R2M3", {}),
    ]


def tagged(rows: list[tuple], tag: str) -> list[tuple]:
    """The rows with their kind tagged, to tell two inserts of the same rows apart."""
    return [(*row[:3], f"{tag}:{row[3]}", *row[4:]) for row in rows]


def read_back(tag: str) -> list[tuple]:
    found = Event.objects.filter(kind__startswith=f"{tag}:").order_by("id").values_list(*READ)
    return [(*row[:3], row[3].partition(":")[2], *row[4:]) for row in found]


@pytest.mark.django_db
def test_rows_read_back_as_bulk_create_writes_them():
    rows = sample_rows(make_league())
    insert_rows(Event, COLUMNS, tagged(rows, "fast"))
    Event.objects.bulk_create(Event(**dict(zip(READ, row, strict=True))) for row in tagged(rows, "orm"))
    inserted = read_back("fast")
    assert inserted == read_back("orm")
    assert len(inserted) == len(rows)
    assert inserted[0][-1] == {"status": "received", "nested": {"list": [1, 2.5, None]}}
    assert inserted[2][-1] == {"n": 2**70}
    assert inserted[3][-1] == {"1": "one", "2": "two"}
    assert inserted[7][4] == "P07"


@pytest.mark.django_db
def test_json_column_converted_at_once_equals_the_field_value_by_value():
    field = Event._meta.get_field("payload")
    values = [{"a": [1, {"b": None}]}, [1, 2], {"n": 2**70}, OrderedDict(x=1), "s", 3, {1: "one"}]
    at_once = field.db_values(values, connection)
    one_by_one = [field.get_db_prep_save(value, connection) for value in values]
    if connection.vendor == "postgresql":  # Jsonb adapters: compare what they send
        assert [a.dumps(a.obj) for a in at_once] == [b.dumps(b.obj) for b in one_by_one]
    else:
        assert at_once == one_by_one


@pytest.mark.django_db
def test_nothing_to_insert_is_no_query(django_assert_num_queries):
    with django_assert_num_queries(0):
        insert_rows(Event, COLUMNS, [])
