"""The league.v2 error catalog (the LEAGUE_ERROR / GAME_ERROR messages are built in envelope.py).

The codes follow the course's league.v2 catalog, so that every error we answer has a specific
code (docs/protocol.md, "Error codes", lists them all). A refusal of something an agent sent
says what to fix: :func:`refusal` names the field, what we expected, what we got and the section
of docs/protocol.md to read, in ``context`` and in the description text alike.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from leagueproto.jsonutil import dumps_str


class ErrorCode(StrEnum):
    TIMEOUT_ERROR = "E001"
    INVALID_MESSAGE_FORMAT = "E002"
    MISSING_REQUIRED_FIELD = "E003"
    INVALID_PARITY_CHOICE = "E004"
    PLAYER_NOT_REGISTERED = "E005"
    MATCH_NOT_FOUND = "E006"
    ROUND_NOT_ACTIVE = "E007"
    LEAGUE_NOT_FOUND = "E008"
    CONNECTION_ERROR = "E009"
    INTERNAL_SERVER_ERROR = "E010"
    AUTH_TOKEN_MISSING = "E011"
    AUTH_TOKEN_INVALID = "E012"
    REFEREE_NOT_REGISTERED = "E013"
    DUPLICATE_REGISTRATION = "E014"
    INVALID_GAME_STATE = "E015"
    CONVERSATION_ID_MISMATCH = "E016"
    RATE_LIMIT_EXCEEDED = "E017"
    PROTOCOL_VERSION_MISMATCH = "E018"
    GAME_TYPE_NOT_SUPPORTED = "E019"
    LEAGUE_FULL = "E020"
    INVALID_TIMESTAMP = "E021"

    @property
    def error_name(self) -> str:
        return self.name


# Only transport-level failures are worth retrying (docs/protocol.md, "Error codes"); a rate limit clears
# by itself.
RETRYABLE = frozenset({ErrorCode.TIMEOUT_ERROR, ErrorCode.CONNECTION_ERROR, ErrorCode.RATE_LIMIT_EXCEEDED})


def see(anchor: str) -> str:
    """A section of the protocol reference, as refusals cite it."""
    return f"docs/protocol.md#{anchor}"


# The sections refusals point to (their anchors are the headings of docs/protocol.md).
SEE_ENVELOPE = see("the-envelope")
SEE_WIRE = see("wire-format")
SEE_LIMITS = see("limits")
SEE_COMPATIBILITY = see("compatibility")
SEE_ERRORS = see("error-codes")

MISSING: Any = object()  # ``got`` of a field that is not there at all
_SHOWN_MAX = 120


def shown(value: Any) -> Any:
    """``value`` as a refusal's context repeats it: small values as they are, others cut short."""
    if value is MISSING:
        return None
    if value is None or isinstance(value, bool | int | float):
        return value
    text = value if isinstance(value, str) else dumps_str(value)
    return text if len(text) <= _SHOWN_MAX else text[: _SHOWN_MAX - 1] + "…"


def _quoted(value: Any) -> str:
    if value is MISSING:
        return "nothing (the field is missing)"
    small = shown(value)
    return repr(small) if isinstance(small, str) else dumps_str(small)


def refusal(
    code: ErrorCode | str,
    field: str,
    expected: str,
    got: Any,
    see: str,
    *,
    problem: str | None = None,
    **context: Any,
) -> LeagueError:
    """A LeagueError for a field an agent got wrong: ``context`` holds ``field``, ``expected``,
    ``got`` and ``see`` (plus anything given), and the description says the same in words."""
    text = f"{field}: expected {expected}, got {_quoted(got)}; see {see}"
    description = f"{problem} ({text})" if problem else text
    fields = {"field": field, "expected": expected, "got": shown(got), "see": see, **context}
    return LeagueError(code, description, context=fields)


class LeagueError(Exception):
    """An error a league handler detects; it is answered as a LEAGUE_ERROR/GAME_ERROR reply.

    ``http_status`` lets the transport pick a status other than 200 (429 for rate limits).
    """

    def __init__(
        self,
        code: ErrorCode | str,
        description: str,
        *,
        context: dict[str, Any] | None = None,
        retryable: bool | None = None,
        http_status: int = 200,
    ) -> None:
        super().__init__(f"{code}: {description}")
        self.code = ErrorCode(code)
        self.description = description
        self.context = context or {}
        self.retryable = self.code in RETRYABLE if retryable is None else retryable
        self.http_status = http_status

    def fields(self) -> dict[str, Any]:
        """The error-specific fields of a LEAGUE_ERROR / GAME_ERROR message."""
        return {
            "error_code": self.code.value,
            "error_name": self.code.error_name,
            "error_description": self.description,
            "context": self.context,
            "retryable": self.retryable,
        }
