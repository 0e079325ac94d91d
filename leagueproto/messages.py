"""Pydantic models of league messages. Tool argument models subclass :class:`LeagueMessage`.

The models validate what we receive and generate each tool's ``inputSchema``. Extra fields
are tolerated (students add their own) but never trusted: handlers read only declared fields.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


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
