"""Game rules, one module per game. Adding a game: write a :class:`GameRules` subclass in a
new module, add it to :data:`GAMES` and its name to ``leagueproto.envelope.GAME_TYPES`` (the
protocol's list, which the players read: tests/referee/test_games.py checks the two agree); the
runner, the referee and the LM do not change."""

from __future__ import annotations

from random import Random

from referee.games.base import GameRules, InvalidMove, MoveContext, Outcome, Request
from referee.games.even_odd import EvenOdd
from referee.games.even_odd_bo5 import EvenOddBestOf5

GAMES: dict[str, type[GameRules]] = {
    EvenOdd.game_type: EvenOdd,
    EvenOddBestOf5.game_type: EvenOddBestOf5,
}


def get_game(game_type: str, rng: Random | None = None) -> GameRules:
    """The rules of ``game_type``; KeyError when no such game is registered."""
    return GAMES[game_type](rng)


__all__ = ["GAMES", "GameRules", "InvalidMove", "MoveContext", "Outcome", "Request", "get_game"]
