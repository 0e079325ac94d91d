"""``insert_rows``: many rows of one model in one ``executemany``."""

from __future__ import annotations

from typing import Any

from django.db import connection, connections, models

_PLAIN = ((models.CharField, str), (models.IntegerField, int), (models.BooleanField, bool), (models.ForeignKey, int))


def insert_rows(model: type[models.Model], names: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    """Insert ``rows`` (values of the fields ``names``, in that order) with one ``executemany``,
    in the caller's transaction, in order.

    Each value goes through its field's ``get_db_prep_save`` (timestamps, JSON, foreign keys by
    their ids), so rows read back as ``bulk_create`` would have written them; what is saved is
    the model instance and the insert compilation per row, most of ``bulk_create``'s cost on the
    hot paths. No defaults are filled in and no signals sent: name every column that needs a value.
    """
    if not rows:
        return
    meta = model._meta
    fields = [meta.get_field(name) for name in names]
    quote = connection.ops.quote_name
    sql = "INSERT INTO {} ({}) VALUES ({})".format(
        quote(meta.db_table), ", ".join(quote(f.column) for f in fields), ", ".join(["%s"] * len(fields))
    )
    # Converted column by column: most columns need nothing, and saying so is one pass in C over
    # the column's types. A round boundary's 300 Event rows cost 3.5 ms converted value by value
    # (a field method, and the connection looked up through its thread-local proxy, per value).
    conn = connections[connection.alias]  # the connection itself, not the proxy, for every value
    columns = [_db_column(field, [row[n] for row in rows], conn) for n, field in enumerate(fields)]
    with connection.cursor() as cursor:
        cursor.executemany(sql, list(zip(*columns, strict=True)))


def _db_column(field: models.Field, values: list[Any], conn: Any) -> list[Any]:
    """``values`` as ``field.get_db_prep_save`` makes them, for one column of ``insert_rows``."""
    # A str in a text column, an int in an integer or foreign-key column, a bool in a boolean one
    # (or None) is its own database form on every backend.
    kind = next((t for base, t in _PLAIN if isinstance(field, base)), None)
    if kind is not None and set(map(type, values)) <= {kind, type(None)}:
        return values
    to_db = getattr(field, "db_values", None)
    if to_db is not None:  # a field that converts a whole column at once (FastJSONField)
        return to_db(values, conn)
    converted: dict[int, Any] = {}  # a value repeated down a column (the batch's timestamp) once

    def one(value: Any) -> Any:
        if kind is not None and (value is None or type(value) is kind):
            return value
        key = id(value)
        if key not in converted:
            converted[key] = field.get_db_prep_save(value, conn)
        return converted[key]

    return [one(value) for value in values]
