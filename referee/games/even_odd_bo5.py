"""``even_odd_bo5`` (docs/protocol.md, "Games"): best of five rounds of summed numbers.

PLAYER_A plays ODD and PLAYER_B plays EVEN. In each round both pick an integer 1-5; an odd
sum gives the round to ODD, an even sum to EVEN. Every round has a winner, so the first to
3 round wins takes the match within 5 rounds; a match of this game is never drawn.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from leagueproto.errors import ErrorCode
from referee.games.base import GameRules, InvalidMove, MoveContext, Outcome, Request

ROUNDS_TO_WIN = 3
MAX_ROUNDS = 5
LOWEST, HIGHEST = 1, 5


@dataclass
class Bo5State:
    player_a: str  # ODD
    player_b: str  # EVEN
    scores: dict[str, int] = field(default_factory=dict)
    rounds: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.scores = self.scores or {self.player_a: 0, self.player_b: 0}

    def role(self, player_id: str) -> str:
        return "ODD" if player_id == self.player_a else "EVEN"


class EvenOddBestOf5(GameRules):
    game_type = "even_odd_bo5"
    docs_anchor = "even_odd_bo5-best-of-five"

    def new_state(self, player_a: str, player_b: str) -> Bo5State:
        return Bo5State(player_a, player_b)

    def start_notice(self, state: Bo5State, player_id: str, time_limit_seconds: float) -> Request:
        return Request(
            "notify_game_start",
            "GAME_START",
            {
                "game_config": {
                    "game_type": self.game_type,
                    "rounds_to_win": ROUNDS_TO_WIN,
                    "max_rounds": MAX_ROUNDS,
                    "time_limit_seconds": time_limit_seconds,
                },
                "players": [
                    {"player_id": state.player_a, "role": "ODD"},
                    {"player_id": state.player_b, "role": "EVEN"},
                ],
            },
        )

    def move_request(self, state: Bo5State, player_id: str, context: MoveContext) -> Request:
        return Request(
            "make_move",
            "MOVE_REQUEST",
            {
                "game_type": self.game_type,
                "game_round": len(state.rounds) + 1,
                "game_state": {
                    "your_role": state.role(player_id),
                    "scores": dict(state.scores),
                    "previous_rounds": [dict(r) for r in state.rounds],
                },
                "time_limit_seconds": context.time_limit_seconds,
            },
        )

    def validate_move(self, state: Bo5State, player_id: str, reply: Mapping[str, Any]) -> int:
        move = reply.get("move")
        number = move.get("number") if isinstance(move, Mapping) else move
        if move is None:
            raise InvalidMove("move is missing (expected {'number': 1..5})", code=ErrorCode.INVALID_PARITY_CHOICE)
        # bool is an int in Python; true is not a number on the wire.
        if not isinstance(number, int) or isinstance(number, bool) or not LOWEST <= number <= HIGHEST:
            raise InvalidMove(
                f"move.number must be an integer from {LOWEST} to {HIGHEST}, got {number!r}",
                expected=f"an integer {LOWEST}-{HIGHEST}",
            )
        return number

    def apply(self, state: Bo5State, moves: Mapping[str, Any]) -> Request:
        total = moves[state.player_a] + moves[state.player_b]
        sum_type = "ODD" if total % 2 else "EVEN"
        winner = state.player_a if sum_type == "ODD" else state.player_b
        state.scores[winner] += 1
        played = {
            "game_round": len(state.rounds) + 1,
            "moves": {state.player_a: moves[state.player_a], state.player_b: moves[state.player_b]},
            "sum": total,
            "sum_type": sum_type,
            "round_winner": winner,
        }
        state.rounds.append(played)
        return Request("notify_round_result", "ROUND_RESULT", {**played, "scores": dict(state.scores)})

    def is_finished(self, state: Bo5State) -> bool:
        return max(state.scores.values()) >= ROUNDS_TO_WIN or len(state.rounds) >= MAX_ROUNDS

    def outcome(self, state: Bo5State) -> Outcome:
        a, b = state.scores[state.player_a], state.scores[state.player_b]
        if a == b:  # cannot happen with 5 decisive rounds; kept so the rules stay total
            return Outcome("DRAW", None, f"rounds tied {a}-{b}")
        winner, loser = (state.player_a, state.player_b) if a > b else (state.player_b, state.player_a)
        return Outcome(
            "WIN",
            winner,
            f"{winner} ({state.role(winner)}) won {state.scores[winner]}-{state.scores[loser]} in rounds",
        )

    def details(self, state: Bo5State) -> dict[str, Any]:
        return {
            "roles": {state.player_a: "ODD", state.player_b: "EVEN"},
            "scores": dict(state.scores),
            "rounds": [dict(r) for r in state.rounds],
        }
