"""Round-robin schedule by the circle method (docs/architecture.md). Pure: no Django, no clock.

Players are taken in id order (P01, P02 … P99, P100). For an odd count a bye is added and the
player drawn against it sits the round out. The second-to-last slot (the bye, if any, is last)
stays fixed and is always player A; everyone else rotates one place per round and the other
pairs swap sides every other round. Within a round, matches are ordered by the lower id of
their two players. This is exactly the spec's four-player table:

    R1: P01-P02, P03-P04   R2: P03-P01, P04-P02   R3: P04-P01, P03-P02

A double round-robin plays the same cycle again with sides swapped, numbering rounds on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from leagueproto.scoring import id_sort_key

Pairing = tuple[str, str]


@dataclass(frozen=True)
class ScheduledMatch:
    round_number: int
    match_id: str
    player_a: str
    player_b: str


def round_robin(player_ids: Iterable[str], double: bool = False) -> list[list[Pairing]]:
    """Rounds of (player A, player B) pairs; n-1 rounds for even n, n for odd n (per cycle)."""
    ids = sorted(set(player_ids), key=id_sort_key)
    if len(ids) < 2:
        return []
    slots: list[str | None] = list(ids)
    if len(slots) % 2:
        slots.append(None)  # the bye
    n = len(slots)
    order = {player_id: index for index, player_id in enumerate(slots)}
    fixed = slots[n - 2]  # never the bye, which is last
    rest = [slot for slot in slots if slot != fixed]

    cycle: list[list[Pairing]] = []
    for round_index in range(n - 1):
        arrangement = [fixed, *rest]
        pairs: list[Pairing] = []
        for i in range(n // 2):
            a, b = arrangement[i], arrangement[n - 1 - i]
            if a is None or b is None:
                continue  # the bye
            if i > 0 and round_index % 2 == 1:
                a, b = b, a
            pairs.append((a, b))
        pairs.sort(key=lambda pair: min(order[pair[0]], order[pair[1]]))
        cycle.append(pairs)
        rest = rest[1:] + rest[:1]

    if double:
        cycle += [[(b, a) for a, b in pairs] for pairs in cycle]
    return cycle


def schedule_matches(player_ids: Iterable[str], double: bool = False) -> list[ScheduledMatch]:
    """The whole schedule as matches with ids ``R{round}M{n}`` (rounds and matches from 1)."""
    return [
        ScheduledMatch(round_number, f"R{round_number}M{number}", a, b)
        for round_number, pairs in enumerate(round_robin(player_ids, double=double), start=1)
        for number, (a, b) in enumerate(pairs, start=1)
    ]


def round_count(player_count: int, double: bool = False) -> int:
    if player_count < 2:
        return 0
    per_cycle = player_count - 1 if player_count % 2 == 0 else player_count
    return per_cycle * (2 if double else 1)


def pairs_of(rounds: Sequence[Sequence[Pairing]]) -> list[Pairing]:
    return [pair for pairs in rounds for pair in pairs]
