"""Pydantic models of the messages a player receives (they also give tools/list its schemas).

Liberal on purpose: fields a referee or LM may leave out have defaults, extra fields are
allowed (league.v2 agents add their own), and ids accept int or str (course examples send either).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from leagueproto.messages import JsonObjects, LeagueMessage, LeagueReply

RoundId = int | str | None
AgentId = str | int | None


class RefereeMessage(LeagueMessage):
    league_id: str | None = None
    round_id: RoundId = None
    match_id: str = Field(description="The match, e.g. R1M1.")
    player_id: AgentId = Field(None, description="The addressee (this player's id).")


class GameInvitation(RefereeMessage):
    game_type: str = Field("even_odd", description="even_odd or even_odd_bo5.")
    role_in_match: str | None = Field(None, description="PLAYER_A or PLAYER_B.")
    opponent_id: str | None = None


class ParityContext(BaseModel):
    model_config = ConfigDict(extra="allow")

    opponent_id: str | None = None
    round_id: RoundId = None
    your_standings: dict[str, Any] = Field(default_factory=dict)


class ChooseParityCall(RefereeMessage):
    game_type: str = "even_odd"
    context: ParityContext = Field(default_factory=ParityContext)
    deadline: str | None = Field(None, description="UTC time by which the choice must arrive.")


class GameStart(RefereeMessage):
    game_config: dict[str, Any] = Field(default_factory=dict)
    players: JsonObjects = Field(default_factory=list, description="[{player_id, role ODD|EVEN}]")


class MoveRequest(RefereeMessage):
    game_round: int = 1
    game_state: dict[str, Any] = Field(default_factory=dict, description="{your_role, scores, previous_rounds}")
    time_limit_seconds: float | None = None
    deadline: str | None = None


class RoundResult(RefereeMessage):
    game_round: int | None = None
    moves: dict[str, Any] = Field(default_factory=dict)
    sum: int | None = None
    sum_type: str | None = None
    round_winner: str | None = None
    scores: dict[str, Any] = Field(default_factory=dict)


class GameOver(RefereeMessage):
    game_type: str | None = None
    game_result: dict[str, Any] = Field(description="{status, winner_player_id, drawn_number, choices, …}")


class GameErrorNotice(LeagueMessage):
    match_id: str | None = None
    round_id: RoundId = None
    error_code: str | None = None
    error_name: str | None = None
    error_description: str | None = None
    consequence: str | None = None


class LmMessage(LeagueMessage):
    league_id: str | None = None
    round_id: RoundId = None


class RoundAnnouncement(LmMessage):
    matches: JsonObjects = Field(default_factory=list)


class StandingsUpdate(LmMessage):
    standings: JsonObjects = Field(default_factory=list)


class RoundCompleted(LmMessage):
    matches_completed: int | None = None
    next_round_id: RoundId = None


class LeagueCompleted(LmMessage):
    champion: dict[str, Any] | None = None
    final_standings: JsonObjects = Field(default_factory=list)
    total_rounds: int | None = None
    total_matches: int | None = None


# -- replies (each tool's outputSchema) ---------------------------------------------------------
class GameJoinAck(LeagueReply):
    """GAME_JOIN_ACK."""

    message_type: Literal["GAME_JOIN_ACK"]
    match_id: str
    player_id: str | None
    arrival_timestamp: str
    accept: bool
    reason: str | None = Field(None, description="Why the invitation was declined.")


class ChooseParityResponse(LeagueReply):
    """CHOOSE_PARITY_RESPONSE."""

    message_type: Literal["CHOOSE_PARITY_RESPONSE"]
    match_id: str
    player_id: str | None
    parity_choice: Literal["even", "odd"]


class Move(BaseModel):
    number: int = Field(ge=1, le=5)


class MoveResponse(LeagueReply):
    """MOVE_RESPONSE (best of five)."""

    message_type: Literal["MOVE_RESPONSE"]
    match_id: str
    player_id: str | None
    game_round: int
    move: Move


class PlayerState(LeagueReply):
    """PLAYER_STATE: identity, lifecycle, strategy, statistics and history (no secrets)."""

    message_type: Literal["PLAYER_STATE"]
    player_id: str | None
    display_name: str
    league_id: str | None
    lifecycle: str
    endpoint: str
    strategy: str
    stats: dict[str, Any]
    matches: list[dict[str, Any]]
