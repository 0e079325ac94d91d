"""Pydantic models of league messages. Tool argument models subclass :class:`LeagueMessage`,
reply models :class:`LeagueReply`.

The models validate what we receive and generate each tool's ``inputSchema`` and
``outputSchema``. Extra fields are tolerated (students add their own) but never trusted:
handlers read only declared fields.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)


def _objects_as_parsed(value: Any, validate: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
    """A list of JSON objects is taken as parsed; anything else gets pydantic's full check.

    pydantic copies every row of ``list[dict[str, Any]]`` key by key, which cost more than
    the rest of a standings update (60-100 rows, every player, every round) and most of a
    report's check at the LM (its match log). What it checks is only that rows are dicts with
    str keys, and parsed JSON already is.

    Arguments parsed from a request's JSON (``FROM_JSON`` as the validation context) have str
    keys by construction: only the rows' type is checked (3 µs for 100 rows). Others (calls
    made in-process) also have their keys checked, in C: ``set().union`` gathers the distinct
    keys and only those few have their type checked (21 µs for a 100-row table of 9 keys).
    (A str-subclass key may pass when an equal plain str came first: pydantic would have
    turned it into that plain str anyway.)
    """
    rows_are_dicts = type(value) is list and set(map(type, value)) <= _DICT_ONLY
    if rows_are_dicts and (info.context is FROM_JSON or set(map(type, set().union(*value))) <= _STR_ONLY):
        return value
    return validate(value)


_DICT_ONLY = {dict}
_STR_ONLY = {str}
# The validation context of arguments parsed from JSON (``Toolset.checked``): compared by identity.
FROM_JSON: dict[str, bool] = {"parsed_json": True}


JsonObjects = Annotated[list[dict[str, Any]], WrapValidator(_objects_as_parsed)]


def _digits_as_int(value: Any) -> Any:
    """``"1"`` → ``1``: agents write round ids both ways (the course prints numbers)."""
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return value


# A round number as a number or a string of digits (``1`` or ``"1"``), read as an int; strict
# otherwise (``true`` or ``1.5`` are no round). Usable in strict models too.
RoundNumber = Annotated[int, Strict(), BeforeValidator(_digits_as_int)]


class LeagueMessage(BaseModel):
    """The league.v2 envelope (docs/protocol.md, "The envelope"). ``validate_envelope`` checks it first."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    protocol: str = Field("league.v2", description="'league.v2' (the default when left out).")
    message_type: str = Field(description="The league message type, e.g. LEAGUE_REGISTER_REQUEST.")
    sender: str = Field(
        description="'player:<name or id>', 'referee:<name or id>', 'league_manager' or 'league_manager:<id>'."
    )
    timestamp: str | None = Field(None, description="UTC ISO-8601, ending in 'Z' or '+00:00' (may be left out).")
    conversation_id: str = Field(description="Correlates a request with its reply.")
    auth_token: str | None = Field(
        None, description="The token issued at registration (or an 'Authorization: Bearer' header)."
    )


class LeagueReply(BaseModel):
    """What every reply carries: the league.v2 envelope (a tool's ``outputSchema`` starts here)."""

    model_config = ConfigDict(extra="allow")

    protocol: Literal["league.v2"]
    message_type: str
    sender: str
    timestamp: str
    conversation_id: str


class ErrorReply(LeagueReply):
    """LEAGUE_ERROR (the LM) or GAME_ERROR (a referee or player): the reply to a refused call."""

    message_type: Literal["LEAGUE_ERROR", "GAME_ERROR"]
    error_code: str = Field(description="E001 … E021, see docs/protocol.md#error-codes.")
    error_name: str
    error_description: str = Field(description="What was wrong, in words.")
    context: dict[str, Any] = Field(
        description="What was wrong: field, expected, got, and see (the section of docs/protocol.md to read)."
    )
    retryable: bool


class Ack(LeagueReply):
    """ACK: a notification was received."""

    message_type: Literal["ACK"]
    status: str = Field(description="'received'.")


class Pong(LeagueReply):
    """PONG: the answer of the ``ping`` tool (the JSON-RPC method ``ping`` answers ``{}``)."""

    message_type: Literal["PONG"]
    status: Literal["ok"]


class Empty(BaseModel):
    """Arguments of tools that take none (``ping``); anything sent is ignored."""

    model_config = ConfigDict(extra="allow")


def reply_text(reply: dict[str, Any]) -> str:
    from leagueproto.jsonutil import dumps_str

    return dumps_str(reply)


class LeagueSummary(BaseModel):
    """One league of ``list_leagues``: what a referee needs to decide whether to join it."""

    league_id: str
    status: str = Field(description="REGISTERING, READY, RUNNING or PAUSED.")
    game_type: str
    registration_closes_at: str | None = Field(description="UTC ISO-8601, or null (no deadline).")


class LeagueList(LeagueReply):
    """LEAGUE_LIST (list_leagues): the leagues open or in play, oldest first."""

    message_type: Literal["LEAGUE_LIST"]
    leagues: list[LeagueSummary]
