"""A JSONField that encodes and decodes with orjson (big payloads: match logs, Event payloads).

Stored text is the same JSON as Django's JSONField writes (a change of class, not of column), so
existing rows read back unchanged. What orjson refuses (e.g. integers beyond 64 bits) falls back
to Django's own encoding.
"""

from __future__ import annotations

from typing import Any

import orjson
from django.db import models
from django.db.models.fields.json import KeyTransform

_OPTIONS = orjson.OPT_NON_STR_KEYS


class FastJSONField(models.JSONField):
    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        if type(value) is orjson.Fragment:  # JSON encoded already (``events.without_secrets``)
            return _column(value, orjson.dumps(value).decode(), connection)
        if not prepared:
            value = self.get_prep_value(value)
        if self.encoder is None and isinstance(value, dict | list) and not hasattr(value, "resolve_expression"):
            try:
                text = orjson.dumps(value, option=_OPTIONS).decode()
            except (TypeError, orjson.JSONEncodeError):
                return connection.ops.adapt_json_value(value, self.encoder)
            return _column(value, text, connection)
        return connection.ops.adapt_json_value(value, self.encoder)

    def db_values(self, values: list[Any], connection: Any) -> list[Any]:
        """``get_db_prep_save`` of each value, for a column of rows at once (``dbexec.insert_rows``):
        a plain dict or list, or JSON already encoded, goes straight to ``get_db_prep_value``, past
        the layers of calls ``get_db_prep_save`` adds per value (the value is its own prepared form)."""
        return [
            self.get_db_prep_value(value, connection, prepared=True)
            if type(value) is dict or type(value) is list or type(value) is orjson.Fragment
            else self.get_db_prep_save(value, connection)
            for value in values
        ]

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        if value is None:
            return value
        if isinstance(expression, KeyTransform) and not isinstance(value, str):
            return value
        if self.decoder is None and isinstance(value, str | bytes):
            try:
                return orjson.loads(value)
            except orjson.JSONDecodeError:
                pass
        return super().from_db_value(value, expression, connection)


def _column(value: Any, text: str, connection: Any) -> Any:
    """What the column takes for ``value`` encoded as ``text``: the text itself, or on PostgreSQL
    its JSON adapter carrying that text."""
    return _jsonb(value, text) if connection.vendor == "postgresql" else text


def _jsonb(value: Any, text: str) -> Any:
    """PostgreSQL's adapter for ``value``, sending the ``text`` already encoded."""
    from psycopg.types.json import Jsonb

    return Jsonb(value, dumps=lambda _obj: text)
