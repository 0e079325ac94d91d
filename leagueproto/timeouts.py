"""The protocol's default timeouts: the one place they are written (docs/protocol.md).

The League's fields default to them, the referee falls back on them for any value a START_MATCH
leaves out or gets wrong, and the agent check shortens some of them. Each is seconds to wait for
one kind of reply.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class Timeouts:
    """Seconds to wait for each kind of reply; the LM sends its league's values in START_MATCH."""

    join: float = 5.0  # GAME_JOIN_ACK
    move: float = 30.0  # a parity choice or a move
    game_over: float = 5.0  # GAME_OVER delivered
    report: float = 10.0  # MATCH_RESULT_REPORT delivered
    default: float = 10.0  # any other call

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None) -> Timeouts:
        """The timeouts a START_MATCH names; a missing, non-numeric or non-positive one is the default."""
        known = {}
        for name in NAMES:
            value = values.get(name) if isinstance(values, Mapping) else None  # any JSON may come
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
            known[name] = float(value) if ok else getattr(DEFAULT_TIMEOUTS, name)
        return cls(**known)

    @classmethod
    def every(cls, seconds: float) -> Timeouts:
        """The same limit for every kind of reply (``checkagent --timeout``)."""
        return cls(**dict.fromkeys(NAMES, seconds))


NAMES: tuple[str, ...] = tuple(f.name for f in fields(Timeouts))
# The calls the ``move`` timeout covers: a parity choice (even/odd) or a move (the other games).
MOVE_CALLS: frozenset[str] = frozenset({"CHOOSE_PARITY_CALL", "MOVE_REQUEST"})
DEFAULT_TIMEOUTS = Timeouts()
