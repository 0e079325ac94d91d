"""The interface every game's rules implement, so that the match runner knows no rules.

A rules object is pure: no HTTP, no clock, and any randomness comes from the ``rng`` it was
built with. The runner asks it what to send next, hands it the players' replies, and reads
the outcome; adding a game is one module implementing :class:`GameRules` plus a registry
entry in :mod:`referee.games`.
"""

from __future__ import annotations

import secrets
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from random import Random
from typing import Any, ClassVar

from leagueproto.errors import ErrorCode


class InvalidMove(Exception):
    """A reply that is not a legal move; the player is told (GAME_ERROR) and asked again."""

    def __init__(
        self, description: str, *, code: ErrorCode = ErrorCode.INVALID_PARITY_CHOICE, expected: str = ""
    ) -> None:
        super().__init__(description)
        self.code = code
        self.description = description
        self.expected = expected


@dataclass(frozen=True)
class Request:
    """A message the runner sends to a player: the tool (dialect A method) and its fields.

    The runner adds the envelope and the match fields (league_id, round_id, match_id,
    player_id, auth_token).
    """

    tool: str
    message_type: str
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MoveContext:
    """What the runner knows about a move request besides the game state."""

    round_id: int
    opponent_id: str
    time_limit_seconds: float
    standings: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Outcome:
    """How a game that was played to the end finished: ``status`` is WIN or DRAW."""

    status: str
    winner: str | None
    reason: str


class GameRules(ABC):
    """One game's rules. ``player_a`` and ``player_b`` are player ids; A is listed first."""

    game_type: ClassVar[str]
    docs_anchor: ClassVar[str]  # its section of docs/protocol.md ("Games"), which fixes point to

    def __init__(self, rng: Random | None = None) -> None:
        # SystemRandom draws from the OS CSPRNG (the same source as ``secrets``).
        self.rng: Random = rng if rng is not None else secrets.SystemRandom()

    @abstractmethod
    def new_state(self, player_a: str, player_b: str) -> Any:
        """The state of a game that has not started."""

    def start_notice(self, state: Any, player_id: str, time_limit_seconds: float) -> Request | None:
        """A notification sent to each player once both joined (GAME_START), or None."""
        return None

    @abstractmethod
    def move_request(self, state: Any, player_id: str, context: MoveContext) -> Request:
        """The request for ``player_id``'s next move."""

    @abstractmethod
    def validate_move(self, state: Any, player_id: str, reply: Mapping[str, Any]) -> Any:
        """The move carried by a player's reply; raises :class:`InvalidMove`."""

    @abstractmethod
    def apply(self, state: Any, moves: Mapping[str, Any]) -> Request | None:
        """Resolve one turn with both players' moves; returns a notice for both players or None."""

    def replay(self, state: Any, moves: Mapping[str, Any], resolved: Mapping[str, Any]) -> None:
        """``apply`` again from a match log: ``resolved`` is what the log recorded once the turn
        was resolved (``details``), the source of any chance outcome (the drawn number). A game
        without chance just applies the moves; ValueError when the log's record is impossible."""
        self.apply(state, moves)

    @abstractmethod
    def is_finished(self, state: Any) -> bool: ...

    @abstractmethod
    def outcome(self, state: Any) -> Outcome:
        """The result of a finished game."""

    @abstractmethod
    def details(self, state: Any) -> dict[str, Any]:
        """Game-specific result details (also for a game cut short by a technical loss)."""
