"""``even_odd``, the default game (docs/protocol.md, "Games"): one parity choice each, then a number
1-10 is drawn.

Same choice by both players is a draw whatever the number; otherwise the player whose
choice matches the number's parity wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from referee.games.base import GameRules, InvalidMove, MoveContext, Outcome, Request

CHOICES = ("even", "odd")
LOWEST, HIGHEST = 1, 10  # the drawn number's range


def parity_of(number: int) -> str:
    return "even" if number % 2 == 0 else "odd"


@dataclass
class EvenOddState:
    player_a: str
    player_b: str
    choices: dict[str, str] = field(default_factory=dict)
    drawn_number: int | None = None


class EvenOdd(GameRules):
    game_type = "even_odd"
    docs_anchor = "even_odd-default"

    def new_state(self, player_a: str, player_b: str) -> EvenOddState:
        return EvenOddState(player_a, player_b)

    def move_request(self, state: EvenOddState, player_id: str, context: MoveContext) -> Request:
        return Request(
            "choose_parity",
            "CHOOSE_PARITY_CALL",
            {
                "game_type": self.game_type,
                "context": {
                    "opponent_id": context.opponent_id,
                    "round_id": context.round_id,
                    "your_standings": dict(context.standings or {"wins": 0, "losses": 0, "draws": 0}),
                },
            },
        )

    def validate_move(self, state: EvenOddState, player_id: str, reply: Mapping[str, Any]) -> str:
        if "parity_choice" not in reply:
            raise InvalidMove("parity_choice is missing", expected="'even' or 'odd'")
        choice = reply["parity_choice"]
        if not isinstance(choice, str) or choice not in CHOICES:
            raise InvalidMove(
                f"parity_choice must be exactly 'even' or 'odd' (lower case), got {choice!r}",
                expected="'even' or 'odd'",
            )
        return choice

    def draw_number(self) -> int:
        return self.rng.randint(LOWEST, HIGHEST)

    def apply(self, state: EvenOddState, moves: Mapping[str, Any]) -> None:
        state.choices = {state.player_a: moves[state.player_a], state.player_b: moves[state.player_b]}
        state.drawn_number = self.draw_number()
        return None

    def replay(self, state: EvenOddState, moves: Mapping[str, Any], resolved: Mapping[str, Any]) -> None:
        number = resolved.get("drawn_number")
        # bool is an int in Python; true is no number on the wire.
        if not isinstance(number, int) or isinstance(number, bool) or not LOWEST <= number <= HIGHEST:
            raise ValueError(f"the drawn number must be an integer from {LOWEST} to {HIGHEST}, got {number!r}")
        state.choices = {state.player_a: moves[state.player_a], state.player_b: moves[state.player_b]}
        state.drawn_number = number

    def is_finished(self, state: EvenOddState) -> bool:
        return state.drawn_number is not None

    def outcome(self, state: EvenOddState) -> Outcome:
        number = state.drawn_number
        assert number is not None, "outcome() of an unfinished game"
        parity = parity_of(number)
        choice_a, choice_b = state.choices[state.player_a], state.choices[state.player_b]
        if choice_a == choice_b:
            return Outcome("DRAW", None, f"both chose {choice_a}: a draw whatever the number ({number}, {parity})")
        winner = state.player_a if choice_a == parity else state.player_b
        return Outcome("WIN", winner, f"{winner} chose {parity}, number was {number} ({parity})")

    def details(self, state: EvenOddState) -> dict[str, Any]:
        number = state.drawn_number
        return {
            "drawn_number": number,
            "number_parity": parity_of(number) if number is not None else None,
            "choices": dict(state.choices),
        }
