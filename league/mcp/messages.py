"""The LM's messages: pydantic models of what agents send (they also generate each tool's
``inputSchema``) and of what the LM answers (each tool's ``outputSchema``). docs/protocol.md."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, field_validator

from league.models import check_league_id
from leagueproto.messages import JsonObjects, LeagueMessage, LeagueReply, RoundNumber

# Strict types: "1" is not 1 and 1 is not "1" (no silent coercion); extra fields stay tolerated.
STRICT = ConfigDict(extra="allow", populate_by_name=True, strict=True)
GameType = Annotated[str, StringConstraints(min_length=1, max_length=32)]
LeagueId = Annotated[str, StringConstraints(max_length=64), AfterValidator(check_league_id)]  # the one id rule


# -- requests -----------------------------------------------------------------------------------
class PlayerMeta(BaseModel):
    model_config = STRICT

    display_name: str = Field(min_length=1, max_length=100, description="Shown in standings.")
    version: str = Field("", max_length=32, description="Your agent's version.")
    protocol_version: str | None = Field(
        None, description="Optional: the league protocol version you speak; when given, at least 2.0.0 (e.g. '2.1.0')."
    )
    game_types: list[GameType] | None = Field(
        None, max_length=16, description="Games you can play, e.g. ['even_odd'] (left out: the league's game)."
    )
    contact_endpoint: str = Field(
        max_length=500,
        description="Your POST /mcp URL, e.g. http://127.0.0.1:8101/mcp; or 'connect' to answer over a WebSocket"
        " to /agents/connect instead (docs/protocol.md, 'Playing from behind NAT').",
    )


class RefereeMeta(BaseModel):
    model_config = STRICT

    display_name: str = Field(min_length=1, max_length=100)
    version: str = Field("", max_length=32)
    protocol_version: str | None = Field(None, description="Optional; when given, at least 2.0.0.")
    game_types: list[GameType] = Field(
        max_length=16, description="Games you can referee, e.g. ['even_odd', 'even_odd_bo5']."
    )
    contact_endpoint: str = Field(max_length=500, description="Your POST /mcp URL.")
    max_concurrent_matches: int = Field(2, ge=1, le=10_000, description="Matches you run at once.")


class RegisterPlayerRequest(LeagueMessage):
    """LEAGUE_REGISTER_REQUEST."""

    model_config = STRICT

    league_id: LeagueId | None = Field(None, description="Omit to join the one league open for registration.")
    player_meta: PlayerMeta


class RegisterRefereeRequest(LeagueMessage):
    """REFEREE_REGISTER_REQUEST."""

    model_config = STRICT

    league_id: LeagueId | None = Field(None, description="Omit to join the one league open for registration.")
    referee_meta: RefereeMeta
    referee_key: str | None = Field(
        None, max_length=200, description="The referee key the league's operator gave you (required)."
    )


class ReportedResult(BaseModel):
    model_config = STRICT

    status: Literal["WIN", "DRAW", "TECHNICAL_LOSS"]
    winner: str | None = None
    score: dict[str, int] = Field(description="Points per player: win 3/0, draw 1/1, technical loss 3/0 or 0/0.")
    technical_loss: list[str] = Field(default_factory=list, description="Players who lost technically.")
    details: dict[str, Any] = Field(default_factory=dict, description="Game specific: choices, drawn_number, …")


class MatchResultReport(LeagueMessage):
    """MATCH_RESULT_REPORT, from the referee the match is assigned to."""

    model_config = STRICT

    league_id: LeagueId | None = None
    round_id: RoundNumber | None = None
    match_id: str = Field(min_length=1, max_length=16)
    game_type: GameType | None = None
    result: ReportedResult
    match_log: JsonObjects = Field(default_factory=list, description="The ordered message log.")


class LeagueQuery(LeagueMessage):
    """LEAGUE_QUERY."""

    model_config = STRICT

    league_id: LeagueId | None = None
    query_type: Literal["GET_STANDINGS", "GET_SCHEDULE", "GET_NEXT_MATCH", "GET_PLAYER_STATS", "GET_MATCH_ASSIGNMENT"]
    query_params: dict[str, Any] = Field(
        default_factory=dict,
        description="player_id (GET_NEXT_MATCH, GET_PLAYER_STATS), round_id (GET_SCHEDULE), "
        "match_id (GET_MATCH_ASSIGNMENT).",
    )

    @field_validator("query_type", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("query_params", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return {} if value is None else value


class GetStandings(BaseModel):
    """Arguments of get_standings: an envelope is welcome but not required."""

    model_config = ConfigDict(extra="allow")

    league_id: str | None = Field(None, description="Omit for the league in progress.")
    conversation_id: str | None = None


# -- replies ------------------------------------------------------------------------------------
class RegisterPlayerReply(LeagueReply):
    """LEAGUE_REGISTER_RESPONSE."""

    message_type: Literal["LEAGUE_REGISTER_RESPONSE"]
    league_id: str | None
    player_id: str | None = Field(description="P01, P02, … when ACCEPTED; null when REJECTED.")
    status: Literal["ACCEPTED", "REJECTED"]
    reason: str | None
    auth_token: str | None = Field(description="Shown once: send it in every later message.")
    league_manager_token: str | None = Field(description="What the LM sends as auth_token when it calls you.")


class RegisterRefereeReply(LeagueReply):
    """REFEREE_REGISTER_RESPONSE."""

    message_type: Literal["REFEREE_REGISTER_RESPONSE"]
    league_id: str | None
    referee_id: str | None = Field(description="REF01, REF02, … when ACCEPTED; null when REJECTED.")
    status: Literal["ACCEPTED", "REJECTED"]
    reason: str | None
    auth_token: str | None
    league_manager_token: str | None


class MatchResultAck(LeagueReply):
    """MATCH_RESULT_ACK."""

    message_type: Literal["MATCH_RESULT_ACK"]
    league_id: str
    match_id: str
    status: Literal["RECORDED", "DUPLICATE"]


class LeagueQueryReply(LeagueReply):
    """LEAGUE_QUERY_RESPONSE."""

    message_type: Literal["LEAGUE_QUERY_RESPONSE"]
    league_id: str
    query_type: str
    success: bool
    data: dict[str, Any]


class StandingsReply(LeagueReply):
    """LEAGUE_STANDINGS (get_standings)."""

    message_type: Literal["LEAGUE_STANDINGS"]
    league_id: str
    status: str
    round_id: int
    standings: list[dict[str, Any]]
