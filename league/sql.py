"""The names the few statements of our own SQL use (league/events.py, league/api/live.py,
league/conductor/transitions.py), read from the models through Django's documented ``_meta`` API,
so that a renamed table or column reaches them as it reaches the ORM's queries."""

from __future__ import annotations

from django.db import models


def table(model: type[models.Model]) -> str:
    """The model's table."""
    return model._meta.db_table


def column(model: type[models.Model], field: str) -> str:
    """The column of the model's ``field`` (``"pk"``: its primary key's)."""
    meta = model._meta
    return meta.pk.column if field == "pk" else meta.get_field(field).column
