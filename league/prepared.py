"""Querysets compiled to SQL once and run again with other values: the LM's hot read paths.

Building a query costs the ORM about as much CPU as running it several times over (a League row
has ~30 columns, each compiled, quoted and given its converters on every ``.filter().first()``).
A ``Prepared`` query is a queryset *shape*: ``build(*samples)`` is compiled once per database
vendor, and each call swaps its own values in where the samples were in the SQL's parameters.
Rows come back converted by the same compiler (SQLite's datetimes, JSON) and, for ``objects``,
as model instances built the way ``ModelIterable`` builds them, ``select_related`` included.

Values are passed in their database form (str, int, bool: what the field would send), since
they skip the field's ``get_prep_value``. Nor is the ORM's check that ``select_for_update`` runs
inside a transaction made here: a locking shape is run inside ``transaction.atomic()`` by its caller.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.query import _get_from_db, get_related_populators
from django.db.models.sql.compiler import SQLCompiler


@dataclass(frozen=True)
class _Compiled:
    compiler: SQLCompiler
    sql: str
    params: list[Any]
    positions: tuple[int, ...]
    wrappers: tuple[type | None, ...]
    converters: list[tuple[int, tuple[list[Callable], Any]]]
    fetch_mode: Any


class Prepared[M: models.Model]:
    """``build(*samples)`` compiled once; ``objects(*values)`` / ``rows(*values)`` run it again.

    Each sample must appear exactly once among the compiled SQL's parameters (pick values no
    query would hold otherwise, in the field's range: the ORM drops a comparison it knows the
    answer to, such as a positive field ``> -1``); a shape whose SQL depends on the values
    (``__in`` lists, optional filters, slices) is not one query and cannot be prepared.
    """

    def __init__(self, build: Callable[..., models.QuerySet[M]], *samples: Any) -> None:
        self._build = build
        self._samples = samples
        self._compiled: dict[str, _Compiled] = {}
        self._lock = threading.Lock()

    def _get(self, conn: BaseDatabaseWrapper) -> _Compiled:
        found = self._compiled.get(conn.vendor)
        if found is None:
            with self._lock:
                queryset = self._build(*self._samples)
                compiler = queryset.query.get_compiler(connection=conn)
                sql, params = compiler.as_sql()
                params = list(params)
                positions = []
                for sample in self._samples:
                    # A backend may wrap a value in a subtype (psycopg's Int4 for an integer
                    # lookup): a value put in its place is wrapped the same way (``_execute``).
                    places = [n for n, p in enumerate(params) if p == sample and isinstance(p, type(sample))]
                    if len(places) != 1:
                        raise ValueError(f"sample {sample!r} appears {len(places)} times in {params!r}")
                    positions.append(places[0])
                wrappers = tuple(
                    type(params[n]) if type(params[n]) is not type(sample) else None
                    for n, sample in zip(positions, self._samples, strict=True)
                )
                # What results_iter would work out again on every call.
                fields = [s[0] for s in compiler.select[0 : compiler.col_count]]
                converters = list(compiler.get_converters(fields).items())
                found = _Compiled(compiler, sql, params, tuple(positions), wrappers, converters, queryset._fetch_mode)
                self._compiled[conn.vendor] = found
        return found

    def _execute(self, values: tuple[Any, ...]) -> tuple[_Compiled, list[list[Any]]]:
        if len(values) != len(self._samples):
            raise TypeError(f"expected {len(self._samples)} values, got {len(values)}")
        conn = connections[DEFAULT_DB_ALIAS]
        prepared = self._get(conn)
        params = prepared.params.copy()
        for position, wrapper, value in zip(prepared.positions, prepared.wrappers, values, strict=True):
            params[position] = value if wrapper is None else wrapper(value)
        with conn.cursor() as cursor:
            cursor.execute(prepared.sql, params)
            rows = [list(row) for row in cursor.fetchall()]
        for row in rows:
            for position, (convs, expression) in prepared.converters:
                value = row[position]
                for converter in convs:
                    value = converter(value, expression, conn)
                row[position] = value
        return prepared, rows

    def rows(self, *values: Any) -> list[tuple[Any, ...]]:
        """The rows of a ``values_list`` shape, converted as the ORM converts them."""
        return [tuple(row) for row in self._execute(values)[1]]

    def objects(self, *values: Any) -> list[M]:
        """Model instances, with their ``select_related`` objects (what iterating the queryset gives)."""
        prepared, rows = self._execute(values)
        compiler, fetch_mode = prepared.compiler, prepared.fetch_mode
        select, klass_info = compiler.select, compiler.klass_info
        start, end = klass_info["select_fields"][0], klass_info["select_fields"][-1] + 1
        init_list = [f[0].target.attname for f in select[start:end]]
        from_db = _get_from_db(klass_info["model"], fetch_mode)
        populators = get_related_populators(klass_info, select, DEFAULT_DB_ALIAS, fetch_mode) if rows else []
        found = []
        for row in rows:
            obj = from_db(DEFAULT_DB_ALIAS, init_list, row[start:end])
            for populator in populators:
                populator.populate(row, obj)
            for name, position in compiler.annotation_col_map.items():
                setattr(obj, name, row[position])
            found.append(obj)
        return found

    def first(self, *values: Any) -> M | None:
        """The first instance, or None (the shape should hold its own ``[:1]`` and ordering)."""
        found = self.objects(*values)
        return found[0] if found else None


_UPDATES: dict[tuple[str, tuple[str, ...], str], tuple[str, list[models.Field]]] = {}


def update_row(model: type[models.Model], pk: Any, **values: Any) -> None:
    """``UPDATE`` one row's ``values`` (field name → value) by primary key, from a statement
    written once per model, field names and database vendor.

    What ``save(update_fields=…)`` or ``filter(pk=…).update(…)`` do, without compiling them on
    every call (90-120 µs of CPU each here, against 14-19 µs; a round's transitions make four).
    Each value goes through its field's ``get_db_prep_save``; no signals are sent and no
    ``auto_now`` field is touched, so name every column that changes.
    """
    conn = connections[DEFAULT_DB_ALIAS]
    key = (model._meta.label, tuple(values), conn.vendor)
    found = _UPDATES.get(key)
    if found is None:
        meta = model._meta
        fields = [meta.get_field(name) for name in values]
        quote = conn.ops.quote_name
        columns = ", ".join(f"{quote(f.column)} = %s" for f in fields)
        found = _UPDATES[key] = (
            f"UPDATE {quote(meta.db_table)} SET {columns} WHERE {quote(meta.pk.column)} = %s",
            fields,
        )
    sql, fields = found
    params = [f.get_db_prep_save(value, conn) for f, value in zip(fields, values.values(), strict=True)]
    with conn.cursor() as cursor:
        cursor.execute(sql, [*params, pk])
