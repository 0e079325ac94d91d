"""The append-only event log and live broadcasts to the dashboard (contract 6).

``record_event`` stores one protocol message or state transition (tokens stripped);
``broadcast`` sends a live event to the league's Channels group after the current
transaction commits, so the dashboard never shows a state that was rolled back.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

import orjson
from asgiref.sync import SyncToAsync, async_to_sync
from django.db import transaction
from django.utils import timezone

from league.models import Event, League

log = logging.getLogger(__name__)

# Bearer secrets never reach the log: agent tokens, LM tokens, per-match tokens, referee keys.
SECRET_FIELDS = frozenset({"auth_token", "league_manager_token", "match_token", "referee_key"})


# How a secret field's key reads in compact JSON: a key is always followed by its colon.
_SECRET_KEYS = tuple(f'"{name}":'.encode() for name in SECRET_FIELDS)


def strip_secrets(value: Any) -> Any:
    """``value`` with every secret field removed, at any depth.

    A copy where something is removed; ``value`` itself when it holds no secret. Whether it
    does is read from its JSON (orjson, in C), which costs a fraction of walking a match log's
    hundreds of nodes in Python; only a value with a secret key somewhere is walked.
    """
    if not isinstance(value, dict | list):
        return value
    text = _encoded(value)
    return value if text is not None and not _has_secret(text) else _stripped(value)


def without_secrets(value: Any) -> Any:
    """``strip_secrets(value)`` for a FastJSONField column: when nothing is stripped, the JSON
    encoded to look for secrets, as an ``orjson.Fragment`` that the field writes as it is. A match
    log was encoded twice, here and again for its column (~18 µs each, per report)."""
    if not isinstance(value, dict | list):
        return value
    text = _encoded(value)
    if text is None or _has_secret(text):
        return _stripped(value)
    return orjson.Fragment(text)


def _encoded(value: Any) -> bytes | None:
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
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


def event_row(
    league: League | None,
    direction: str,
    kind: str,
    *,
    agent: str = "",
    match_id: str = "",
    payload: dict[str, Any] | None = None,
) -> Event:
    """An unsaved Event (for ``bulk_create``): the row of ``event_values`` as a model instance."""
    _, direction, kind, agent, match_id, payload = event_values(
        league, direction, kind, agent=agent, match_id=match_id, payload=payload
    )
    return Event(league=league, direction=direction, kind=kind, agent=agent, match_id=match_id, payload=payload)


# An Event row to append without a model instance: (league pk or None, direction, kind, agent,
# match_id, payload). What the report path writes per call; see ``append_events``.
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
    """The row ``event_row`` would make (same limits, secrets stripped), as plain values.

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


_EVENT_COLUMNS = ("league", "at", "direction", "kind", "agent", "match_id", "payload")


def append_events(rows: list[EventValues]) -> None:
    """Insert ``rows`` in order, with one timestamp, in one statement (in the caller's
    transaction): ``dbexec.insert_rows``, without a model instance per row."""
    from league.dbexec import insert_rows

    now = timezone.now()
    insert_rows(Event, _EVENT_COLUMNS, [(league, now, *rest) for league, *rest in rows])


def record_event(
    league: League | None,
    direction: str,
    kind: str,
    *,
    agent: str = "",
    match_id: str = "",
    payload: dict[str, Any] | None = None,
) -> Event:
    """Append one event: ``direction`` IN/OUT for protocol messages, STATE for transitions."""
    row = event_row(league, direction, kind, agent=agent, match_id=match_id, payload=payload)
    row.save(force_insert=True)
    return row


def group_name(league_id: str) -> str:
    return f"league_{league_id}"


def broadcast(league_id: str, event: str, data: dict[str, Any]) -> None:
    """Send ``event`` to the league's dashboard group once the current transaction commits."""
    transaction.on_commit(lambda: send_now(league_id, event, data))


def send_now(league_id: str, event: str, data: dict[str, Any]) -> None:
    """Send now (from sync code). A dashboard outage never breaks the league.

    From a thread that serves an event loop (sync_to_async: the LM's DB threads, the conductor's),
    the send is handed to that loop and not waited for, so the database thread goes on at once;
    sends keep their order (the loop runs them first come, first served). Elsewhere (commands,
    plain sync code) it is sent before returning.
    """
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    if layer is None or not heard(layer, league_id):
        return
    message = {"type": "league.event", "event": event, "data": data}
    loop = _serving_loop()
    if loop is not None:
        future = asyncio.run_coroutine_threadsafe(layer.group_send(group_name(league_id), message), loop)
        future.add_done_callback(lambda f: _log_failure(f, event, league_id))
        return
    try:
        async_to_sync(layer.group_send)(group_name(league_id), message)
    except Exception:
        log.exception("broadcast of %s to league %s failed", event, league_id)


def broadcast_all(messages: list[tuple[str, str, dict[str, Any]]]) -> None:
    """``broadcast`` for several ``(league_id, event, data)`` at once: sent in this order once the
    current transaction commits, handed to the event loop in one piece (a batch of reports)."""
    if messages:
        transaction.on_commit(lambda: send_all(messages))


def send_all(messages: list[tuple[str, str, dict[str, Any]]]) -> None:
    """``send_now`` for each message, in order; from a DB thread, one hand-off to the loop."""
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    if layer is None:
        return
    messages = [m for m in messages if heard(layer, m[0])]
    if not messages:
        return
    loop = _serving_loop()
    if loop is None:
        for league_id, event, data in messages:
            send_now(league_id, event, data)
        return

    async def send_in_order() -> None:
        for league_id, event, data in messages:
            try:
                await layer.group_send(group_name(league_id), {"type": "league.event", "event": event, "data": data})
            except Exception as exc:  # one failed send does not stop the others
                log.error("broadcast of %s to league %s failed: %r", event, league_id, exc)

    asyncio.run_coroutine_threadsafe(send_in_order(), loop)


def heard(layer: Any, league_id: str) -> bool:
    """Whether a send to the league's group can reach anyone.

    The in-memory layer's groups live in this process, so a group none of this process's
    dashboards has joined hears nothing: a conductor on the embedded default, or an LM nobody
    is watching. Its sends were work for no one: a task and a hand-off per message, for 4,950
    match_started in a 100-player league (2.3 % of the conductor's samples in a league;
    0.05-0.07 CPU-s alone, 0.008 with this check). The pages of other processes read their
    snapshots again instead (league.js). Other layers reach other processes: they always send.
    """
    from channels.layers import InMemoryChannelLayer

    if isinstance(layer, InMemoryChannelLayer):
        return bool(layer.groups.get(group_name(league_id)))
    return True


def _serving_loop() -> asyncio.AbstractEventLoop | None:
    """The running event loop this sync thread was called from (via sync_to_async), if any."""
    loop = getattr(SyncToAsync.threadlocal, "main_event_loop", None)
    if getattr(SyncToAsync.threadlocal, "main_event_loop_pid", None) != os.getpid():
        return None
    if loop is None or loop.is_closed() or not loop.is_running():
        return None
    return loop


def _log_failure(future: Any, event: str, league_id: str) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.error("broadcast of %s to league %s failed: %r", event, league_id, future.exception())
