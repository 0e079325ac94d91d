"""The league.v2 message envelope: building messages and validating the ones we receive."""

from __future__ import annotations

import math
import re
import secrets
import time
from datetime import UTC, datetime
from typing import Any

from leagueproto.errors import MISSING, SEE_ENVELOPE, ErrorCode, LeagueError, refusal, see

PROTOCOL_VERSION = "league.v2"
MIN_AGENT_PROTOCOL_VERSION = (2, 0, 0)
# The agent protocol version our own referee and players announce at registration.
AGENT_PROTOCOL_VERSION = "2.1.0"
# The games of the protocol (docs/protocol.md, "Games"): the referee's rules registry
# (referee/games) holds exactly these, and our players can play each.
GAME_TYPES = ("even_odd", "even_odd_bo5")
ENVELOPE_FIELDS = ("protocol", "message_type", "sender", "timestamp", "conversation_id")
# What a received message must carry. ``protocol`` may be left out (it is read as league.v2) and so
# may ``timestamp``: real agents omit both, and neither changes what the message means.
REQUIRED_ENVELOPE_FIELDS = ("message_type", "sender", "conversation_id")
_EXPECTED_FIELD = {
    "message_type": "the league message type, e.g. 'LEAGUE_REGISTER_REQUEST'",
    "sender": "'player:<name or id>', 'referee:<name or id>' or 'league_manager'",
    "conversation_id": "any non-empty string (the reply carries the same one)",
}
EXPECTED_SENDER = "'player:<name or id>', 'referee:<name or id>', 'league_manager' or 'league_manager:<id>'"
EXPECTED_TIMESTAMP = "an ISO-8601 time in UTC ending in 'Z' or '+00:00', e.g. '2025-01-15T10:30:00Z'"

# ``league_manager`` alone or with an id (``league_manager:LM01``); players and referees by name
# before registration, by id after.
_SENDER_RE = re.compile(r"^(league_manager(:[A-Za-z0-9_.\-]{1,64})?|(player|referee):[A-Za-z0-9_.\-]{1,64})$")
# ISO-8601 date-time; the zone is checked separately so that we can tell E021 from garbage.
_TS_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(?P<zone>Z|z|[+-]\d{2}:?\d{2})?$")


# Characters that show as nothing (or nearly) but make a string another string: text copied from
# the course's PDF carries soft hyphens (U+00AD) where a line could break, inside timestamps and
# ids. Removed from the envelope and the ids of every message received (``validate_envelope``).
INVISIBLE = {
    "\u00ad": "SOFT HYPHEN",
    "\u200b": "ZERO WIDTH SPACE",
    "\u200c": "ZERO WIDTH NON-JOINER",
    "\u200d": "ZERO WIDTH JOINER",
    "\u200e": "LEFT-TO-RIGHT MARK",
    "\u200f": "RIGHT-TO-LEFT MARK",
    "\u2060": "WORD JOINER",
    "\ufeff": "ZERO WIDTH NO-BREAK SPACE",
}
_INVISIBLE_RE = re.compile(f"[{''.join(INVISIBLE)}]")
# The fields cleaned: the envelope's, and the ids a message names.
CLEANED_FIELDS = (*ENVELOPE_FIELDS, "auth_token", "league_id", "round_id", "match_id", "player_id")


def strip_invisible(value: Any) -> Any:
    """``value`` without the characters of ``INVISIBLE`` when it is a string; else as it is."""
    if isinstance(value, str) and _INVISIBLE_RE.search(value):
        return _INVISIBLE_RE.sub("", value)
    return value


def invisible_in(value: Any) -> list[str]:
    """The names of the invisible characters in ``value`` (U+00AD SOFT HYPHEN …), for a hint."""
    if not isinstance(value, str):
        return []
    return [f"U+{ord(c):04X} {INVISIBLE[c]}" for c in dict.fromkeys(_INVISIBLE_RE.findall(value))]


def utc_now() -> str:
    """Now as the spec writes it: whole seconds, UTC, ending in ``Z``."""
    return _format_epoch_second(int(time.time()))


def format_timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def deadline_in(seconds: float) -> str:
    return _format_epoch_second(math.floor(time.time() + seconds))


# Every message carries a timestamp and most calls fall in a second already formatted, so each
# second is formatted once (a few seconds are in use at a time: now, and deadlines ahead).
_formatted_seconds: dict[int, str] = {}


def _format_epoch_second(second: int) -> str:
    text = _formatted_seconds.get(second)
    if text is None:
        if len(_formatted_seconds) >= 64:
            _formatted_seconds.clear()
        text = _formatted_seconds[second] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))
    return text


def new_conversation_id(prefix: str = "conv") -> str:
    # 64 random bits as 16 hex digits, as uuid4().hex[:16] gave, at a fifth of its cost (~1 µs
    # against ~5 here): every message the league sends makes one, 300 a round boundary.
    return f"{prefix}-{secrets.token_hex(8)}"


def new_conversation_ids(count: int, prefix: str = "conv") -> list[str]:
    """``count`` ids as ``new_conversation_id`` makes them, from one read of the random source
    (a round boundary sends 300 messages: one system call instead of 300)."""
    digits = secrets.token_hex(8 * count)
    return [f"{prefix}-{digits[i : i + 16]}" for i in range(0, 16 * count, 16)]


def make_message(
    message_type: str,
    sender: str,
    *,
    conversation_id: str | None = None,
    auth_token: str | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A flat league.v2 message with the envelope first, exactly as the spec's examples."""
    msg: dict[str, Any] = {
        "protocol": PROTOCOL_VERSION,
        "message_type": message_type,
        "sender": sender,
        "timestamp": utc_now(),
        "conversation_id": conversation_id or new_conversation_id(),
    }
    if auth_token is not None:
        msg["auth_token"] = auth_token
    msg.update(fields)
    return msg


_parsed_timestamps: dict[str, datetime] = {}


def parse_timestamp(value: Any) -> datetime:
    """Parse a UTC timestamp (``Z`` or ``+00:00``, fractions allowed); anything else is E021."""
    # Every received message is checked, and most carry one of a few recent seconds.
    if isinstance(value, str):
        known = _parsed_timestamps.get(value)
        if known is not None:
            return known
    match = _TS_RE.match(value) if isinstance(value, str) else None
    if not match:
        hidden = invisible_in(value)
        problem = f"timestamp holds invisible characters ({', '.join(hidden)}): type it again" if hidden else None
        raise refusal(
            ErrorCode.INVALID_TIMESTAMP, "timestamp", EXPECTED_TIMESTAMP, value, SEE_ENVELOPE, problem=problem
        )
    zone = match.group("zone")
    if zone is None or zone.upper() != "Z" and zone.replace(":", "") not in ("+0000", "-0000"):
        raise refusal(
            ErrorCode.INVALID_TIMESTAMP,
            "timestamp",
            EXPECTED_TIMESTAMP,
            value,
            SEE_ENVELOPE,
            problem="timestamp must be UTC" if zone else "timestamp names no time zone",
        )
    try:
        parsed = datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError as exc:
        raise refusal(
            ErrorCode.INVALID_TIMESTAMP, "timestamp", EXPECTED_TIMESTAMP, value, SEE_ENVELOPE, problem=str(exc)
        ) from exc
    if len(_parsed_timestamps) >= 256:
        _parsed_timestamps.clear()
    _parsed_timestamps[value] = parsed
    return parsed


def parse_sender(sender: Any) -> tuple[str, str | None]:
    """``"player:P01"`` → ``("player", "P01")``; ``"league_manager"`` → ``("league_manager", None)``;
    ``"league_manager:LM01"`` → ``("league_manager", "LM01")``."""
    if not isinstance(sender, str) or not _SENDER_RE.match(sender):
        raise refusal(
            ErrorCode.INVALID_MESSAGE_FORMAT,
            "sender",
            EXPECTED_SENDER,
            MISSING if sender is None else sender,
            SEE_ENVELOPE,
        )
    if sender == "league_manager":
        return "league_manager", None
    kind, _, ident = sender.partition(":")
    return kind, ident


def parse_version(text: Any) -> tuple[int, ...] | None:
    if not isinstance(text, str):
        return None
    parts = re.findall(r"\d+", text)
    return tuple(int(p) for p in parts[:3]) if parts else None


def check_agent_protocol_version(version: Any) -> None:
    """E018 when the agent declares a protocol_version below 2.0.0 (or one that is no version
    number); an agent that declares none is welcome (the course's registration has none)."""
    if version is None:
        return
    expected = "a version number of at least 2.0.0, e.g. '2.1.0' (or leave the field out)"
    where = "player_meta.protocol_version"
    parsed = parse_version(version)
    if parsed is None:
        raise refusal(ErrorCode.PROTOCOL_VERSION_MISMATCH, where, expected, version, see("registering"))
    if parsed + (0,) * (3 - len(parsed)) < MIN_AGENT_PROTOCOL_VERSION:
        raise refusal(
            ErrorCode.PROTOCOL_VERSION_MISMATCH,
            where,
            expected,
            version,
            see("registering"),
            problem=f"protocol_version {version} is below the minimum 2.0.0",
            protocol_version=version,
            minimum="2.0.0",
        )


def validate_envelope(message: Any) -> dict[str, Any]:
    """Check the league.v2 envelope of a received message (E003, E018, E021, E002).

    Returns the message, with invisible characters (a soft hyphen copied from the course's PDF)
    removed from its envelope and ids in place; the tool's own model validates the rest. A message
    without ``protocol`` is read as league.v2; one without ``timestamp`` is taken as sent now.
    """
    if not isinstance(message, dict):
        raise refusal(
            ErrorCode.INVALID_MESSAGE_FORMAT,
            "params",
            "a JSON object: the league message",
            message,
            see("wire-format"),
        )
    _clean(message)
    missing = [f for f in REQUIRED_ENVELOPE_FIELDS if message.get(f) in (None, "")]
    if missing:
        first = missing[0]
        raise refusal(
            ErrorCode.MISSING_REQUIRED_FIELD,
            first,
            _EXPECTED_FIELD[first],
            message.get(first, MISSING),
            SEE_ENVELOPE,
            problem=f"missing required envelope field(s): {', '.join(missing)}",
            missing_fields=missing,
        )
    protocol = message.get("protocol")
    if protocol is not None and protocol != PROTOCOL_VERSION:
        raise refusal(
            ErrorCode.PROTOCOL_VERSION_MISMATCH,
            "protocol",
            f"'{PROTOCOL_VERSION}' (or leave the field out)",
            protocol,
            SEE_ENVELOPE,
            protocol=protocol,
        )
    if message.get("timestamp") not in (None, ""):
        parse_timestamp(message["timestamp"])
    parse_sender(message["sender"])
    return message


def _clean(message: dict[str, Any]) -> None:
    """Remove invisible characters (``INVISIBLE``) from the envelope and ids of ``message``, in
    place: ``2025-01-15T10:\u00ad30:00Z`` copied from a PDF is the time it shows."""
    for name in CLEANED_FIELDS:
        value = message.get(name)
        if isinstance(value, str):
            cleaned = strip_invisible(value)
            if cleaned is not value:
                message[name] = cleaned


def league_error_message(err: LeagueError, *, sender: str, conversation_id: str | None = None) -> dict[str, Any]:
    return make_message("LEAGUE_ERROR", sender, conversation_id=conversation_id, **err.fields())


def game_error_message(
    err: LeagueError,
    *,
    sender: str,
    match_id: str | None,
    conversation_id: str | None = None,
    affected_player: str | None = None,
    action_required: str | None = None,
    retry_count: int = 0,
    max_retries: int = 0,
    consequence: str | None = None,
    auth_token: str | None = None,
) -> dict[str, Any]:
    return make_message(
        "GAME_ERROR",
        sender,
        conversation_id=conversation_id,
        auth_token=auth_token,
        match_id=match_id,
        affected_player=affected_player,
        action_required=action_required,
        retry_count=retry_count,
        max_retries=max_retries,
        consequence=consequence,
        **err.fields(),
    )
