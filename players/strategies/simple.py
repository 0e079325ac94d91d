"""The fixed strategies: the deterministic test agents and the random baseline."""

from __future__ import annotations

from players.strategies.base import (
    PARITIES,
    MoveSituation,
    ParitySituation,
    Strategy,
    number_of_parity,
    opposite,
)


class RandomStrategy(Strategy):
    """Even or odd with equal chance; in bo5 the mixed equilibrium (each parity half the time)."""

    name = "random"
    blocking = False


class AlwaysEven(Strategy):
    name = "always_even"
    blocking = False

    def choose_parity(self, situation: ParitySituation) -> str:
        return "even"

    def choose_move(self, situation: MoveSituation) -> int:
        return number_of_parity("even", self.rng)


class AlwaysOdd(Strategy):
    name = "always_odd"
    blocking = False

    def choose_parity(self, situation: ParitySituation) -> str:
        return "odd"

    def choose_move(self, situation: MoveSituation) -> int:
        return number_of_parity("odd", self.rng)


class Alternate(Strategy):
    """even, odd, even, … over the player's whole life (one instance per player)."""

    name = "alternate"
    blocking = False

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._next = PARITIES[0]

    def _take(self) -> str:
        current = self._next
        self._next = opposite(current)
        return current

    def choose_parity(self, situation: ParitySituation) -> str:
        return self._take()

    def choose_move(self, situation: MoveSituation) -> int:
        return number_of_parity(self._take(), self.rng)
