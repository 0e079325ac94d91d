"""The names our own SQL uses come from the models (league/sql.py)."""

from __future__ import annotations

from league.models import Event, Match
from league.sql import column, table


def test_tables_and_columns_are_the_models_own():
    assert table(Match) == "league_match"
    assert column(Match, "status") == "status"
    assert column(Match, "referee") == "referee_id"  # a foreign key's column
    assert column(Event, "pk") == "id"
