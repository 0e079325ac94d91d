"""league.prepared: a queryset compiled once gives what the ORM gives, for any values."""

from __future__ import annotations

import pytest
from django.db.models import Count
from django.utils import timezone

from league import actions
from league.models import League, Player
from league.prepared import Prepared, update_row
from tests.league.lm_support import make_league, player_meta

BY_ID = Prepared(lambda league_id: League.objects.filter(league_id=league_id).order_by()[:1], "\0league_id")


@pytest.mark.django_db
def test_objects_equal_what_the_orm_loads_for_each_value():
    first = make_league("prep_one", max_players=7)
    second = make_league("prep_two", max_players=9)
    for league in (first, second):
        prepared = BY_ID.first(league.league_id)
        loaded = League.objects.get(pk=league.pk)
        assert prepared is not None and prepared.pk == league.pk
        # Every column converted as the ORM converts it (datetimes, JSON, choices).
        for field in League._meta.concrete_fields:
            assert getattr(prepared, field.attname) == getattr(loaded, field.attname), field.name
    assert BY_ID.first("nobody") is None
    assert BY_ID.objects("nobody") == []


@pytest.mark.django_db
def test_select_related_objects_come_with_the_row(django_assert_num_queries):
    league = make_league("prep_related")
    registration = actions.register_player(league.league_id, player_meta(display_name="Ann"), None)
    shape = Prepared(
        lambda league_pk, player_id: (
            Player.objects.select_related("league").filter(league_id=league_pk, player_id=player_id).order_by()[:1]
        ),
        -701,
        "\0player_id",
    )
    with django_assert_num_queries(1):
        player = shape.first(league.pk, registration.agent_id)
        assert player.display_name == "Ann"
        assert player.league.league_id == "prep_related"  # no second query
        assert player.game_types == ["even_odd"]


@pytest.mark.django_db
def test_rows_and_annotations():
    league = make_league("prep_rows")
    for name in ("a", "b", "c"):
        actions.register_player(league.league_id, player_meta(display_name=name), None)
    names = Prepared(
        lambda league_pk: Player.objects.filter(league_id=league_pk).order_by("player_id").values_list("display_name"),
        -701,
    )
    assert names.rows(league.pk) == [("a",), ("b",), ("c",)]
    counted = Prepared(
        lambda league_id: League.objects.filter(league_id=league_id).annotate(n=Count("players")).order_by(),
        "\0league_id",
    )
    assert counted.first("prep_rows").n == 3


def test_a_sample_must_appear_once_and_values_must_match_the_samples():
    twice = Prepared(lambda x: League.objects.filter(league_id=x, name=x), "\0same")
    with pytest.raises(ValueError, match="appears 2 times"):
        twice.rows("x")
    absent = Prepared(lambda x: League.objects.filter(league_id="fixed"), "\0absent")
    with pytest.raises(ValueError, match="appears 0 times"):
        absent.rows("x")
    with pytest.raises(TypeError, match="expected 1 values"):
        BY_ID.rows("a", "b")


@pytest.mark.django_db
def test_an_integer_lookup_the_backend_wraps_takes_new_values():
    """PostgreSQL's driver gets ``Int4(...)`` for an integer comparison: new values are wrapped alike."""
    from league.models import Round

    league = make_league("prep_rounds")
    for number in (1, 2, 3):
        Round.objects.create(league=league, number=number)
    after = Prepared(
        lambda league_pk, number: Round.objects.filter(league_id=league_pk, number__gt=number).order_by("number")[:1],
        -701,
        1_000_702,
    )
    assert after.first(league.pk, 1).number == 2
    assert after.first(league.pk, 2).number == 3
    assert after.first(league.pk, 3) is None


@pytest.mark.django_db
def test_update_row_sets_the_named_fields_of_one_row_in_one_query(django_assert_num_queries):
    league = make_league("prep_update")
    other = make_league("prep_untouched")
    when = timezone.now().replace(microsecond=123456)
    for name in ("ready", "running"):  # the second time, from the statement written the first
        with django_assert_num_queries(1):
            update_row(League, league.pk, status=name.upper(), started_at=when, current_round=3)
    league.refresh_from_db()
    assert (league.status, league.started_at, league.current_round) == ("RUNNING", when, 3)
    update_row(League, league.pk, current_round=4)  # other fields, another statement
    league.refresh_from_db()
    assert (league.status, league.current_round) == ("RUNNING", 4)
    untouched = League.objects.get(pk=other.pk)
    assert (untouched.status, untouched.current_round) == (other.status, other.current_round)
