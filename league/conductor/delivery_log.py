"""The log of what the conductor sent, in the Event log, and how it reads back.

A delivery to one agent (a referee's START_MATCH, a retried notice) is one OUT row with its
agent. A batch of the same notice to several agents (a round's ROUND_ANNOUNCEMENT to every
player) is one OUT row for the whole batch: the body once, and each recipient's envelope id,
outcome and reply under ``to``, so a round boundary of 100 players writes three rows, not 300.
What the referee told each player in a match is in its match log (``MatchResult.log``).
``sent`` reads both shapes back as one row per delivery.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet

from league.conductor.common import Delivery, Outcome
from league.events import EventValues, append_events, event_values, strip_secrets
from league.models import Event, League

# The agent column of a batch's row: it went to the agents under ``to``.
BATCH_AGENT = ""


def _reply(outcome: str, reply: dict[str, Any]) -> dict[str, Any]:
    """A reply as the log keeps it: a plain ack (its status a word) in short, anything else an
    agent sends as it is, without secrets."""
    status = reply.get("status")
    if outcome == "ok" and reply.get("message_type") == "ACK" and (status is None or type(status) is str):
        return {"message_type": "ACK", "status": status}
    return strip_secrets(reply)


def delivery_row(
    league: League, d: Delivery, outcome: str, reply: dict[str, Any] | None, sent_at: datetime | None = None
) -> EventValues:
    """The OUT Event of one delivery: its agent, method, outcome, the message and the reply.
    ``sent_at``: when the call went out, for a call that can outlast what happens meanwhile (a
    start_match that times out is recorded when it gives up, after the referee may have been
    suspended for another reason)."""
    message = d.message
    payload: dict[str, Any] = {"method": d.method, "outcome": outcome, "message": strip_secrets(message)}
    if sent_at is not None:
        payload["sent_at"] = sent_at.isoformat()
    if reply is not None:
        payload["reply"] = _reply(outcome, reply)
    match_id = message.get("match_id", "")
    # Each part stripped of secrets where it can hold one (the message, an agent's reply), so the
    # row is not searched again as a whole.
    kind = message["message_type"]
    return event_values(league, "OUT", kind, agent=d.agent_id, match_id=match_id, payload=payload, clean=True)


def batch_row(league: League, outcomes: list[Outcome]) -> EventValues:
    """The OUT Event of one notice sent to several agents: the first one's message, and under
    ``to`` each agent's conversation id (and sender, where it differs), outcome and reply."""
    first = outcomes[0][0].message
    to: dict[str, dict[str, Any]] = {}
    for d, outcome, reply in outcomes:
        entry: dict[str, Any] = {"outcome": outcome, "conversation_id": d.message.get("conversation_id")}
        if d.message.get("sender") != first.get("sender"):
            entry["sender"] = d.message.get("sender")
        if reply is not None:
            entry["reply"] = _reply(outcome, reply)
        to[d.agent_id] = entry
    payload = {"method": outcomes[0][0].method, "message": strip_secrets(first), "to": to}
    # Stripped where a secret can be (the message, the replies): ``to`` is otherwise our own ids.
    return event_values(league, "OUT", first["message_type"], agent=BATCH_AGENT, payload=payload, clean=True)


def record_deliveries(league: League, batches: list[list[Outcome]]) -> None:
    """One insert for batches of deliveries: a row per batch of several agents, a row per lone
    delivery."""
    rows = [
        batch_row(league, outcomes) if len(outcomes) > 1 else delivery_row(league, *outcomes[0])
        for outcomes in batches
        if outcomes
    ]
    with transaction.atomic():  # one commit for the batch (autocommit would commit each row)
        append_events(rows)


@dataclass(frozen=True)
class Sent:
    """One delivery as the log holds it."""

    at: datetime
    kind: str
    agent: str
    method: str
    outcome: str
    match_id: str = ""
    reply: dict[str, Any] | None = None
    round_id: int | None = None  # the message's round, where it names one
    message: dict[str, Any] | None = None  # the body (a batch's first); not read for one agent
    event_id: int = 0  # its row in the Event log (a batch's deliveries share one)


def sent(
    league: League | int, *, agent: str | None = None, kind: str | None = None, since: datetime | None = None
) -> Iterator[Sent]:
    """What the conductor sent in ``league`` (to ``agent``, of ``kind``, from ``since``), one
    ``Sent`` per delivery, in the order they were recorded. One query; for one agent it reads
    only that agent's part of each batch's row, not the bodies (a round's standings each)."""
    rows = Event.objects.filter(league=league, direction=Event.Direction.OUT)
    if kind is not None:
        rows = rows.filter(kind=kind)
    if since is not None:
        rows = rows.filter(at__gte=since)
    if agent is not None:
        yield from _sent_to(rows.filter(Q(agent=agent) | Q(agent=BATCH_AGENT)), agent)
        return
    for pk, at, row_kind, row_agent, match_id, payload in rows.values_list(
        "pk", "at", "kind", "agent", "match_id", "payload"
    ).iterator(chunk_size=500):
        if not isinstance(payload, dict):
            continue
        method = str(payload.get("method") or row_kind)
        message = _dict(payload.get("message"))
        round_id = _round((message or {}).get("round_id"))
        to = payload.get("to")
        if isinstance(to, dict):
            for who, entry in to.items():
                if isinstance(entry, dict):
                    reply = _dict(entry.get("reply"))
                    outcome = str(entry.get("outcome"))
                    yield Sent(at, row_kind, who, method, outcome, match_id, reply, round_id, message, pk)
        elif "outcome" in payload:  # a delivery, not the LM's reply to an agent's call
            outcome, reply = str(payload["outcome"]), _dict(payload.get("reply"))
            yield Sent(at, row_kind, row_agent, method, outcome, match_id, reply, round_id, message, pk)


def _sent_to(rows: QuerySet[Event], agent: str) -> Iterator[Sent]:
    """``sent`` for one agent: the database takes its entry out of each batch's row (JSON key
    transforms), so the bodies are neither sent nor parsed."""
    fields = ("payload__method", "payload__outcome", "payload__reply", "payload__message__round_id")
    for pk, at, row_kind, row_agent, match_id, method, outcome, reply, round_id, mine in rows.values_list(
        "pk", "at", "kind", "agent", "match_id", *fields, f"payload__to__{agent}"
    ).iterator(chunk_size=500):
        if row_agent == BATCH_AGENT:
            if not isinstance(mine, dict):
                continue  # a batch without this agent
            outcome, reply = mine.get("outcome"), mine.get("reply")
        elif outcome is None:
            continue  # the LM's reply to the agent's call, not a delivery
        method, outcome, reply, round_id = str(method or row_kind), str(outcome), _dict(reply), _round(round_id)
        yield Sent(at, row_kind, row_agent or agent, method, outcome, match_id, reply, round_id, None, pk)


def _dict(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _round(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
