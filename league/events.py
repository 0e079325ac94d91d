"""The append-only event log and the live broadcasts to the dashboard (docs/architecture.md).

Writing: ``append_events`` inserts rows (``event_values``: limits applied, tokens stripped) with
one ``executemany``; ``record_event`` is the one-row form. Broadcasting: ``broadcast`` /
``broadcast_all`` send live events to the league's Channels group once the current transaction
commits, so a dashboard never shows a state that was rolled back.
"""

from __future__ import annotations

import logging
from collections import Counter
from functools import partial
from typing import Any

import orjson
from asgiref.sync import async_to_sync
from django.db import connection, transaction
from django.utils import timezone

from league.models import Event, League
from league.sql import column, table
from leagueproto.jsonutil import dumps, dumps_str

log = logging.getLogger(__name__)

# Bearer secrets never reach the log: agent tokens, LM tokens, per-match tokens, referee keys.
SECRET_FIELDS = frozenset({"auth_token", "league_manager_token", "match_token", "referee_key"})


# How a secret field's key reads in compact JSON: a key is always followed by its colon.
_SECRET_KEYS = tuple(f'"{name}":'.encode() for name in SECRET_FIELDS)


def strip_secrets(value: Any) -> Any:
    """``value`` with every secret field removed, at any depth.

    A copy where something is removed; ``value`` itself when it holds no secret. Whether it
    does is read from its JSON (orjson, in C), which costs a fraction of walking a match log's
    hundreds of nodes in Python; only a value with a secret key somewhere is walked, and that
    walk starts from the JSON decoded again, so a part encoded already (an ``orjson.Fragment``,
    such as a round's standings shared by every player's message) comes out as plain values
    that the JSON column can store.
    """
    if not isinstance(value, dict | list):
        return value
    text = _encoded(value)
    if text is None:
        return _stripped(value)
    return _stripped(orjson.loads(text)) if _has_secret(text) else value


def _encoded(value: Any) -> bytes | None:
    try:
        return dumps(value)
    except (TypeError, orjson.JSONEncodeError):
        return None  # what orjson cannot encode is walked in Python


def _has_secret(text: bytes) -> bool:
    return any(key in text for key in _SECRET_KEYS)


def _stripped(value: Any) -> Any:
    # Leaves are taken as they are, without a call each: most of a match log's nodes are leaves.
    if isinstance(value, dict):
        return {
            k: _stripped(v) if isinstance(v, dict | list) else v for k, v in value.items() if k not in SECRET_FIELDS
        }
    if isinstance(value, list):
        return [_stripped(v) if isinstance(v, dict | list) else v for v in value]
    return value


# An Event row to append: (league pk or None, direction, kind, agent, match_id, payload).
EventValues = tuple[int | None, str, str, str, str, Any]


def event_values(
    league: League | None,
    direction: str,
    kind: str,
    *,
    agent: str = "",
    match_id: str = "",
    payload: dict[str, Any] | None = None,
    clean: bool = False,
) -> EventValues:
    """An Event row's values: ``direction`` IN/OUT for protocol messages, STATE for transitions;
    fields cut to their columns' lengths, secrets stripped from ``payload``.

    ``clean``: the caller built ``payload`` from fields that are never secret (ids, statuses),
    so it is not searched for secrets (a round boundary writes 300 such rows)."""
    return (
        league.pk if league is not None else None,
        direction,
        str(kind)[:40],
        str(agent or "")[:40],
        str(match_id or "")[:16],
        (payload or {}) if clean else strip_secrets(payload or {}),
    )


# Events are inserted with SQL of our own, not ``bulk_create``: a league appends six rows a match
# (~30,000 for 100 players), and building a model and compiling its fields cost ~43 µs a row
# against ~9 µs for this (a 50-row batch of START_MATCH rows, SQLite; docs/benchmarks.md).
_COLUMNS = tuple(column(Event, name) for name in ("league", "at", "direction", "kind", "agent", "match_id", "payload"))
_INSERT = f"INSERT INTO {table(Event)} ({', '.join(_COLUMNS)}) VALUES ({', '.join(['%s'] * len(_COLUMNS))})"


def append_events(rows: list[EventValues]) -> None:
    """Insert ``rows`` in order, with one timestamp, in one ``executemany`` (in the caller's
    transaction). The payloads are written as orjson writes them (an ``orjson.Fragment`` as it is)."""
    if not rows:
        return
    at = Event._meta.get_field("at").get_db_prep_value(timezone.now(), connection)
    values = [
        (league, at, direction, kind, agent, match_id, dumps_str(payload))
        for league, direction, kind, agent, match_id, payload in rows
    ]
    with connection.cursor() as cursor:
        cursor.executemany(_INSERT, values)


def record_event(
    league: League | None,
    direction: str,
    kind: str,
    *,
    agent: str = "",
    match_id: str = "",
    payload: dict[str, Any] | None = None,
) -> None:
    """Append one event (``append_events`` of one row)."""
    append_events([event_values(league, direction, kind, agent=agent, match_id=match_id, payload=payload)])


# -- live broadcasts ------------------------------------------------------------------------------
LEAGUES_GROUP = "leagues"  # the league lists: a league created or deleted


def group_name(league_id: str) -> str:
    """The Channels group of a league's dashboards."""
    return f"league_{league_id}"


# Groups that websockets of this process joined (``LeagueConsumer`` and ``LeagueListConsumer``
# keep it): on the in-memory channel layer nobody else can hear a send.
_joined: Counter[str] = Counter()


def joined(group: str) -> None:
    _joined[group] += 1


def left(group: str) -> None:
    _joined[group] -= 1
    if _joined[group] <= 0:
        del _joined[group]


def broadcast(league_id: str, event: str, data: dict[str, Any]) -> None:
    """Send ``event`` to the league's dashboards once the current transaction commits."""
    broadcast_all([(league_id, event, data)])


def broadcast_all(messages: list[tuple[str, str, dict[str, Any]]]) -> None:
    """``broadcast`` for several ``(league_id, event, data)``, sent in this order once the current
    transaction commits."""
    if messages:
        transaction.on_commit(
            partial(send, [(group_name(league_id), event, data) for league_id, event, data in messages])
        )


def announce_leagues(change: str, league_id: str) -> None:
    """Tell league lists that a league was created or deleted, once the transaction commits.
    (Every other change of a league reaches them through the league's own group.)"""
    transaction.on_commit(partial(send, [(LEAGUES_GROUP, change, {"league_id": league_id})]))


def send(messages: list[tuple[str, str, dict[str, Any]]]) -> None:
    """Send ``(group, event, data)`` messages now, in order, from sync code (what ``broadcast``
    does after the commit). A dashboard outage never breaks the league: failures are logged.

    On the in-memory layer (no Redis) only this process's websockets can hear: a group none of
    them joined is skipped, so a conductor process or an LM nobody watches sends nothing (the
    pages of other processes read their snapshots again instead, see static/league/league.js)."""
    from channels.layers import InMemoryChannelLayer, get_channel_layer

    layer = get_channel_layer()
    if layer is None:
        return
    if isinstance(layer, InMemoryChannelLayer):
        messages = [m for m in messages if _joined[m[0]] > 0]
    if messages:
        try:
            async_to_sync(_send_in_order)(layer, messages)
        except Exception:
            log.exception("broadcast of %d events failed", len(messages))


# The most events one layer message carries (``layer_messages``).
EVENTS_PER_MESSAGE = 100


def layer_messages(messages: list[tuple[str, str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """``(group, layer message)`` for ``(group, event, data)`` messages, in order: a run of events
    to one group (a commit's: a batch of reports finishes 20 matches) is one "league.events"
    message of up to ``EVENTS_PER_MESSAGE``, ``{"events": [{"event", "data"}, …]}``, so that each
    process listening hears the commit once (with Redis, a send and a receive each), not once per
    event. A lone event is a run of one: every layer message of the league's groups has this shape."""
    runs: list[tuple[str, list[dict[str, Any]]]] = []
    for group, event, data in messages:
        if runs and runs[-1][0] == group and len(runs[-1][1]) < EVENTS_PER_MESSAGE:
            runs[-1][1].append({"event": event, "data": data})
        else:
            runs.append((group, [{"event": event, "data": data}]))
    return [(group, {"type": "league.events", "events": items}) for group, items in runs]


def events_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``{"event", "data"}`` a layer message carries (``layer_messages``), in order."""
    return list(message.get("events") or [])


async def _send_in_order(layer: Any, messages: list[tuple[str, str, dict[str, Any]]]) -> None:
    for group, message in layer_messages(messages):
        try:
            await layer.group_send(group, message)
        except Exception as exc:  # one failed send does not stop the others
            log.error("broadcast of %d events to %s failed: %r", len(events_of(message)), group, exc)
