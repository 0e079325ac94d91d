"""The practice arena's rules: who an agent is across leagues, how free agents are paired, how
long a failing agent rests. Pure: no Django, no clock, no I/O (the conductor's arena driver,
league/conductor/arena.py, reads the database and calls these).

An arena is a League whose schedule_format is ``arena`` (docs/operations.md, "The practice
arena"): agents join it with the ordinary registration, and it never completes. As soon as an
agent is free it is paired:

1. with the free agent nearest in rating (ordinal) that it did not play in its latest match;
2. else with a free house bot (the nearest in rating): a house bot is a player the teacher runs
   (``runplayer --name house…``), so that an agent alone in the arena still plays;
3. else with the free agent it just played (a rematch beats waiting);
4. else it waits for the next tick.

Agents are taken longest-waiting first (the oldest latest match; an agent that never played
first of all), each paired with its nearest in rating: when the referees have room for fewer
matches than the free agents would make, the pairs made first are the ones sent, so nobody
waits behind agents rated above it (a newcomer, unrated, would otherwise wait at the bottom for
as long as the busy arena stays full). House bots never play each other.

An agent that loses technically (it did not answer, or answered badly) rests for
``rest_seconds`` (doubling with each failure in a row) and is then paired again: it is never
dropped from the arena. An agent may play at most the arena's ``max_matches_per_hour``
in each hour counted from its first match of that hour (``hour_count``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta


def identity_of(connection: str, seat: str, display_name: str) -> str:
    """Who an agent is across arenas and leagues: the key of its rating.

    A direct player is its seat (``Agent.canonical_endpoint``): the same thing registration
    holds it by and gives it back by (docs/protocol.md, "Registering again"), and the one
    proof of identity that is not per league (tokens are issued per league). A relay player
    has a per-league relay endpoint, so it is its display name, the key registration
    already holds a relay player by (``RELAY_NAME_TAKEN``)."""
    if connection == "relay":
        return f"relay:{display_name}"
    return f"seat:{seat}"


@dataclass(frozen=True, slots=True)
class Entrant:
    """A free agent of the arena as the pairing sees it."""

    key: int  # the player's pk
    ordinal: float  # its rating's ordinal (0 for an agent never rated)
    last_opponent: int | None = None  # the pk of the player it met in its latest match
    house: bool = False
    last_match: int = 0  # the pk of its latest match (0: none), the older the longer it waited


def pair_free(free: Iterable[Entrant]) -> list[tuple[int, int]]:
    """Pairs (player pk, player pk) for the free agents (see the module's docstring), the
    longest-waiting agent's pair first. The higher-rated agent of each pair is first in it. The
    same input gives the same pairs."""
    everyone = sorted(free, key=lambda e: (-e.ordinal, e.key))
    agents = sorted((e for e in everyone if not e.house), key=lambda e: (e.last_match, -e.ordinal, e.key))
    houses = [e for e in everyone if e.house]
    taken: set[int] = set()
    pairs: list[tuple[int, int]] = []

    def nearest(me: Entrant, pool: list[Entrant], *, rematch: bool) -> Entrant | None:
        best: Entrant | None = None
        for other in pool:
            if other.key == me.key or other.key in taken:
                continue
            met = other.key == me.last_opponent or me.key == other.last_opponent
            if met != rematch:
                continue
            if best is None or abs(other.ordinal - me.ordinal) < abs(best.ordinal - me.ordinal):
                best = other
        return best

    for me in agents:
        if me.key in taken:
            continue
        # The order of preference of the module's docstring.
        choices = ((agents, False), (houses, False), (houses, True), (agents, True))
        other = next((o for pool, rematch in choices if (o := nearest(me, pool, rematch=rematch))), None)
        if other is None:
            continue
        taken.update((me.key, other.key))
        first, second = (me, other) if (-me.ordinal, me.key) <= (-other.ordinal, other.key) else (other, me)
        pairs.append((first.key, second.key))
    return pairs


def rest_seconds(failures: int, base: float, longest: float) -> float:
    """How long an agent rests after its ``failures``-th technical loss in a row: ``base``,
    doubling with each further failure, at most ``longest``; 0 after no failure."""
    if failures <= 0:
        return 0.0
    return min(longest, base * 2 ** min(failures - 1, 62))


HOUR = timedelta(hours=1)


def hour_count(began: datetime | None, matches: int, now: datetime) -> tuple[datetime | None, int]:
    """The agent's hour as the cap counts it (its start and its matches) at ``now``: a new hour,
    with none played, once an hour has passed since ``began``."""
    if began is None or now - began >= HOUR:
        return None, 0
    return began, matches


def under_cap(played_this_hour: int, cap: int) -> bool:
    """Whether an agent that played ``played_this_hour`` matches in its hour may play another
    (``cap`` 0: no cap)."""
    return cap <= 0 or played_this_hour < cap
