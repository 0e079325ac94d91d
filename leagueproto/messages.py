"""Pydantic models of league messages. Tool argument models subclass :class:`LeagueMessage`.

The models validate what we receive and generate each tool's ``inputSchema``. Extra fields
are tolerated (students add their own) but never trusted: handlers read only declared fields.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, ValidatorFunctionWrapHandler, WrapValidator


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


class LeagueMessage(BaseModel):
    """The league.v2 envelope (PROTOCOL.md §3). ``validate_envelope`` checks it first."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    protocol: str = Field("league.v2", description="Always 'league.v2'.")
    message_type: str = Field(description="The league message type, e.g. LEAGUE_REGISTER_REQUEST.")
    sender: str = Field(description="'league_manager', 'player:<id>' or 'referee:<id>'.")
    timestamp: str = Field(description="UTC ISO-8601, ending in 'Z' or '+00:00'.")
    conversation_id: str = Field(description="Correlates a request with its reply.")
    auth_token: str | None = Field(
        None, description="The token issued at registration (or an 'Authorization: Bearer' header)."
    )


class Empty(BaseModel):
    """Arguments of tools that take none (``ping``); anything sent is ignored."""

    model_config = ConfigDict(extra="allow")


def reply_text(reply: dict[str, Any]) -> str:
    from leagueproto.jsonutil import dumps_str

    return dumps_str(reply)
