"""The league.v2 error catalog and the LEAGUE_ERROR / GAME_ERROR reply builders.

PROTOCOL.md §3 names the codes the seeds use; the remaining numbers follow the course's
full league.v2 catalog so that every error we answer has a specific code (docs/protocol.md
lists them all).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


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


# Only transport-level failures are worth retrying (PROTOCOL.md §5); a rate limit clears by itself.
RETRYABLE = frozenset({ErrorCode.TIMEOUT_ERROR, ErrorCode.CONNECTION_ERROR, ErrorCode.RATE_LIMIT_EXCEEDED})


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


def league_error_message(err: LeagueError, *, sender: str, conversation_id: str | None = None) -> dict[str, Any]:
    from leagueproto.envelope import make_message

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
    from leagueproto.envelope import make_message

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
