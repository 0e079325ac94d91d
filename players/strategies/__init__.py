"""Strategies chosen by name: ``make_strategy("adaptive")``. Add one by adding it to STRATEGIES."""

from __future__ import annotations

import random
from typing import Any

from players.faults import FAULTS, FaultStrategy
from players.strategies.adaptive import Adaptive
from players.strategies.base import MoveSituation, ParitySituation, Strategy
from players.strategies.simple import Alternate, AlwaysEven, AlwaysOdd, RandomStrategy


def _llm(**kwargs: Any) -> Strategy:
    from players.llm import LlmStrategy  # google-genai is imported only when asked for

    return LlmStrategy(**kwargs)


def _fault(fault: str) -> Any:
    def make(**kwargs: Any) -> Strategy:
        return FaultStrategy(fault, **kwargs)

    return make


STRATEGIES: dict[str, Any] = {
    "random": RandomStrategy,
    "always_even": AlwaysEven,
    "always_odd": AlwaysOdd,
    "alternate": Alternate,
    "adaptive": Adaptive,
    "llm": _llm,
    # Fault-injection players (players/faults.py): they misbehave on purpose.
    **{fault: _fault(fault) for fault in FAULTS},
}


def make_strategy(name: str, *, rng: random.Random | None = None, **options: Any) -> Strategy:
    """A new strategy instance (one per player: strategies keep state)."""
    try:
        factory = STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}") from None
    return factory(rng=rng, **options)


__all__ = ["FAULTS", "STRATEGIES", "MoveSituation", "ParitySituation", "Strategy", "make_strategy"]
