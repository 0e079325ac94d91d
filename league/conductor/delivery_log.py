"""The log of what the conductor sent: one OUT Event per delivery, a batch in one insert."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from league.conductor.common import Delivery, Outcome
from league.events import EventValues, append_events, event_values
from league.models import League


def delivery_row(
    league: League, d: Delivery, outcome: str, reply: dict[str, Any] | None, same_as: str | None = None
) -> EventValues:
    """The OUT Event of one delivery: method, outcome and the reply (in short when it is a plain ack).

    ``same_as``: the agent whose row of the same batch holds the message body (a notification sent
    to every player has the same body for all but the envelope): this row keeps only its envelope
    ids, so a round's standings are stored once, not once per player.
    """
    message = d.message
    payload: dict[str, Any] = {"method": d.method, "outcome": outcome}
    if same_as is None:
        payload["message"] = message
    else:
        payload["same_message_as"] = same_as
        payload["conversation_id"] = message.get("conversation_id")
        if "round_id" in message:
            payload["round_id"] = message["round_id"]
    # A row that keeps only ids and a plain ack (most of a round's) has nothing to strip.
    clean = same_as is not None
    if reply is not None:
        status = reply.get("status")
        # Plain: an ack whose status is a word (anything else an agent sends is kept, stripped).
        plain = outcome == "ok" and reply.get("message_type") == "ACK" and same_as is not None
        plain = plain and (status is None or type(status) is str)
        payload["reply"] = {"message_type": "ACK", "status": status} if plain else reply
        clean = clean and plain
    return event_values(
        league,
        "OUT",
        message["message_type"],
        agent=d.agent_id,
        match_id=message.get("match_id", ""),
        payload=payload,
        clean=clean,
    )


def record_deliveries(league: League, batches: list[list[Outcome]]) -> None:
    """One insert for batches of deliveries; each batch shares one body (see ``delivery_row``)."""
    rows: list[EventValues] = []
    for outcomes in batches:
        first = outcomes[0][0].agent_id if outcomes else None
        rows += [
            delivery_row(league, d, outcome, reply, None if d.agent_id == first else first)
            for d, outcome, reply in outcomes
        ]
    with transaction.atomic():  # one commit for the batch (autocommit would commit each row)
        append_events(rows)
