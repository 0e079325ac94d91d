"""The one strategy interface: what a player knows when it must decide, and what it answers.

A strategy is an object with two methods, ``choose_parity`` (even_odd) and ``choose_move``
(even_odd_bo5). Each may be a plain function or a coroutine; the player runs it under a time
budget and falls back to a safe random answer when it is slow, raises or answers nonsense, so a
strategy never has to worry about deadlines itself (the LLM strategy does, to fall back well).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

PARITIES = ("even", "odd")
MOVES = (1, 2, 3, 4, 5)
ODD_MOVES = (1, 3, 5)
EVEN_MOVES = (2, 4)


@dataclass(frozen=True)
class ParitySituation:
    """Everything an even_odd strategy may use (histories oldest first)."""

    player_id: str
    opponent_id: str | None
    match_id: str
    round_id: Any = None
    game_type: str = "even_odd"
    your_standings: Mapping[str, Any] = field(default_factory=dict)
    opponent_history: Sequence[str] = ()  # this opponent's parity choices against us
    my_history: Sequence[str] = ()  # our choices against this opponent
    recent_matches: Sequence[Mapping[str, Any]] = ()  # our last few match records, any opponent
    league_standings: Sequence[Mapping[str, Any]] = ()
    budget: float = 1.0  # seconds the strategy may think


@dataclass(frozen=True)
class MoveSituation:
    """Everything an even_odd_bo5 strategy may use. ``role`` is "ODD" or "EVEN"."""

    player_id: str
    opponent_id: str | None
    match_id: str
    role: str
    game_round: int = 1
    scores: Mapping[str, int] = field(default_factory=dict)
    opponent_moves: Sequence[int] = ()  # this opponent's numbers against us: earlier matches, then this one
    my_moves: Sequence[int] = ()
    recent_matches: Sequence[Mapping[str, Any]] = ()
    budget: float = 1.0


def opposite(parity: str) -> str:
    return "odd" if parity == "even" else "even"


def number_of_parity(parity: str, rng: random.Random) -> int:
    return rng.choice(EVEN_MOVES if parity == "even" else ODD_MOVES)


def wanted_parity(role: str, opponent_parity: str) -> str:
    """The parity of our number that wins the round against a number of ``opponent_parity``.

    ODD wins when the sum is odd (parities differ); EVEN wins when it is even (parities agree).
    """
    return opposite(opponent_parity) if role.upper() == "ODD" else opponent_parity


class Strategy:
    """Base class: subclasses override one or both methods (sync or ``async def``)."""

    name = "base"
    # A strategy that may block (sleep, file or network I/O in a plain function) runs in a
    # thread so the deadline can be kept. The built-in ones are pure and quick: they say False
    # and run inline, saving a thread hop per decision.
    blocking = True

    def __init__(self, rng: random.Random | None = None, **options: Any) -> None:
        self.rng = rng or random.Random()
        self.options = options

    def choose_parity(self, situation: ParitySituation) -> str | Awaitable[str]:
        return self.rng.choice(PARITIES)

    def choose_move(self, situation: MoveSituation) -> int | Awaitable[int]:
        # The equilibrium of the bo5 round: each parity half the time (a uniform 1-5 would be
        # odd 3/5 of the time, which an opponent can exploit).
        return number_of_parity(self.rng.choice(PARITIES), self.rng)
