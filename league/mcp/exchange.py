"""The Event log of ``/mcp`` calls: every call's request (IN) and reply (OUT), tokens stripped,
bulky parts summarised; and the one check every call's text passes before it may be stored."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction

from league import queries
from league.auth import Identity
from league.events import EventValues, append_events, event_values
from league.models import League
from leagueproto.jsonutil import dumps
from leagueproto.tools import CallContext, Tool

# What a summarised Event payload keeps (``capped``).
SUMMARY_FIELDS = ("protocol", "message_type", "sender", "timestamp", "conversation_id", "league_id", "match_id")

_NUL = b"\\u0000"


def has_nul(arguments: dict[str, Any], ctx: CallContext | None = None) -> bool:
    """Whether a string in ``arguments`` holds a NUL character. JSON can only write one as the
    escape ``\\u0000`` (a raw control character in a string is invalid JSON, refused by the
    parser), so a call whose request body has no such escape (``ctx.body_has_nul``, read once per
    request, however many calls a batch holds) needs no second look: encoding a report's match
    log again for this check would cost ~15 µs."""
    if ctx is not None and ctx.body is not None and not ctx.body_has_nul:
        return False
    return _NUL in dumps(arguments)


def capped(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload``, or a summary of it when it is larger than EVENT_PAYLOAD_MAX_BYTES: what agents
    send is logged, but never more than that per message (extra fields included)."""
    size = len(dumps(payload))
    if size <= settings.EVENT_PAYLOAD_MAX_BYTES:
        return payload
    summary = {k: payload[k] for k in SUMMARY_FIELDS if isinstance(payload.get(k), str | int) and k in payload}
    summary = {k: v[:100] if isinstance(v, str) else v for k, v in summary.items()}
    return {**summary, "truncated": True, "size_bytes": size, "fields": [str(k)[:64] for k in list(payload)[:50]]}


# Tools that only read. They change nothing, so the Event log keeps a read only when its caller's
# token is proven (an agent's league_query): an anonymous read (get_standings, list_leagues, ping,
# a refused query) writes nothing, however many a batch holds. Resources are never logged.
READ_TOOLS = frozenset({"league_query", "get_standings", "list_leagues", "ping"})
# The fields of a read's answer the Event log does not copy.
READ_BULKY = ("data", "standings")


def _lists(value: Any) -> list[list]:
    """The top-level lists of a read answer (standings rows, rounds, history)."""
    found = []
    for item in value.values():
        if isinstance(item, list):
            found.append(item)
        elif isinstance(item, dict):
            found.extend(v for v in item.values() if isinstance(v, list))
    return found


def log_exchange(
    tool: Tool, request: dict[str, Any], reply: dict[str, Any], identity: Identity | None, league_pk: int | None = None
) -> None:
    """Two Event rows (IN request, OUT reply) in one insert (see ``exchange_rows`` for the league)."""
    with transaction.atomic():
        append_events(exchange_rows(tool, request, reply, identity, league_pk))


def exchange_rows(
    tool: Tool,
    request: dict[str, Any],
    reply: dict[str, Any],
    identity: Identity | None,
    league_pk: int | None = None,
) -> list[EventValues]:
    """The two Event rows of a call, to append: the request (IN) and the reply (OUT). The league
    is the caller's, else ``league_pk`` when the caller knows it, else the one the messages name."""
    league = identity.league if identity else None
    if league is None and league_pk is not None:
        league = League(pk=league_pk)  # only its key is written
    if league is None:
        league_id = reply.get("league_id") or request.get("league_id")
        if isinstance(league_id, str) and league_id:
            league = queries.find_league(league_id)
    sender = request.get("sender") if isinstance(request.get("sender"), str) else ""
    if identity is not None:  # the token decides who called, whatever the sender's spelling
        sender = f"{identity.kind}:{identity.agent_id}"
    recipient = sender
    if reply.get("player_id") and reply.get("message_type") == "LEAGUE_REGISTER_RESPONSE":
        recipient = f"player:{reply['player_id']}"
    elif reply.get("referee_id"):
        recipient = f"referee:{reply['referee_id']}"
    match_id = request.get("match_id") if isinstance(request.get("match_id"), str) else ""
    if isinstance(request.get("match_log"), list):
        # The match log is stored once, in MatchResult.log (the match page and the bench read it
        # there); the logged message keeps how many entries it had.
        entries = len(request["match_log"])
        request = {k: v for k, v in request.items() if k != "match_log"}
        request["match_log_entries"] = entries
    if tool.name in READ_TOOLS:
        # A read answer is recomputable from the state; the log keeps what was asked and how big
        # the answer was, not a copy of the table on every call.
        bulky = {k: reply[k] for k in READ_BULKY if k in reply}
        if bulky:
            reply = {k: v for k, v in reply.items() if k not in READ_BULKY}
            reply["answer_bytes"] = len(dumps(bulky))
            reply["answer_rows"] = sum(len(v) for v in _lists(bulky))
    return [
        event_values(
            league,
            "IN",
            request.get("message_type") or tool.name,
            agent=sender,
            match_id=match_id,
            payload=capped(request),
        ),
        event_values(
            league, "OUT", reply.get("message_type", ""), agent=recipient, match_id=match_id, payload=capped(reply)
        ),
    ]
