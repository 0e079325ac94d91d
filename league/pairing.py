"""Swiss and knockout pairing rules (docs/operations.md, "Round-robin, Swiss or knockout").

Pure: no Django, no clock, no I/O. The same input always gives the same pairing.

Swiss (the Dutch system, simplified):

- Players are ranked by points, then rating (higher first; no rating ranks below any rating),
  then player id (:func:`leagueproto.scoring.id_sort_key`).
- When the count is odd, one player sits the round out with a bye: the lowest-ranked player
  among those with the fewest byes, so nobody has a second bye while someone has none. The bye
  scores :data:`leagueproto.scoring.BYE_POINTS` (3, a win, like a technical win against an
  opponent who never came), configurable per :meth:`SwissHistory.record_bye`.
- Score groups (players on equal points) are paired from the top. Inside a group, the top half
  meets the bottom half (1 v m/2+1, 2 v m/2+2 …), adjusted by networkx's maximum-weight matching
  (``max_weight_matching(maxcardinality=True)``): most pairs first, then the lowest-ranked players
  left over (they float down), then the smallest score difference, then roles, then the nearest
  to the top-half/bottom-half order. Players met before are no edge at all, so no rematch.
- Whoever a group cannot pair floats down to the next group and is paired first there.
- A large group is matched in blocks of :data:`BLOCK_PAIRS` pairs of that order (the top-half
  slice with the matching bottom-half slice, leftovers carried into the next block), since the
  blossom algorithm is cubic in pure Python. When blocks leave more players over than the whole
  group would, the group is matched again in growing windows up to the whole group, so blocks
  never add a floater.
- If players are still unpaired at the bottom (only rematches left for them), the lowest groups
  are paired again (1, 2, 4 … groups from the bottom, as many as it takes), each group looking
  ahead: the most pairs inside the group such that the players it floats and everyone below can
  still all be paired without a rematch (one matching over the group and everyone below it).
  Only when the whole field has no pairing without a rematch are rematches allowed: the fewest,
  then the smallest score gaps (one matching over the whole field: slow for hundreds of
  players, and only reached when a small event plays nearly as many rounds as it has players).
- Roles: in our games player A takes the first seat (ODD in even_odd_bo5). The player who has
  been B more often gets A; when equal, each alternates from its last role. Each group's bottom
  half is reordered so that top players face players owed the other role, and a pair owed the
  same role weighs less (the more they are owed, the less), below score groups and floaters:
  as in the Dutch system, roles never move a player out of its score group. In such a pair the
  player owed more gets its role (the higher-ranked one when equal).

A Swiss event needs :func:`swiss_rounds` rounds by default: ceil(log2(n)).

Knockout: :func:`knockout_bracket` seeds 1 v N, 2 v N-1 … in the standard bracket order, with
byes to the top seeds when N is not a power of two; :func:`knockout_next_round` advances the
winners (seeds from :func:`knockout_seeds`). A knockout match must have a winner: even_odd_bo5
(best of five) never draws, so it is the natural knockout game; even_odd (one game) can draw,
and a drawn match is decided for the higher seed (the lower seed number), so a bracket always
finishes without replays.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from leagueproto.scoring import BYE_POINTS, id_sort_key

Role = Literal["A", "B"]
Pair = tuple[str, str]  # (player A, player B)

BLOCK_PAIRS = 6
_FLOATS = "\x00floats"  # the stand-in opponent of an odd block's floater (no player id is empty-led)


@dataclass(frozen=True)
class Entrant:
    player_id: str
    rating: float | None = None


@dataclass
class PlayerRecord:
    """What pairing needs to know of one player's past rounds."""

    points: int = 0
    opponents: set[str] = field(default_factory=set)
    byes: int = 0
    as_a: int = 0
    as_b: int = 0
    last_role: Role | None = None

    def wanted_role(self) -> Role:
        if self.as_a != self.as_b:
            return "A" if self.as_a < self.as_b else "B"
        if self.last_role is None:
            return "A"
        return "B" if self.last_role == "A" else "A"

    def role_strength(self) -> int:
        """How strongly it wants its role: the imbalance, or 0 when it only wants to alternate."""
        return abs(self.as_a - self.as_b)


@dataclass
class SwissHistory:
    """Points, opponents, byes and roles of every player so far, one round at a time."""

    records: dict[str, PlayerRecord] = field(default_factory=dict)

    def record(self, player_id: str) -> PlayerRecord:
        return self.records.setdefault(player_id, PlayerRecord())

    def record_match(self, player_a: str, player_b: str, points_a: int, points_b: int) -> None:
        a, b = self.record(player_a), self.record(player_b)
        a.points += points_a
        b.points += points_b
        a.opponents.add(player_b)
        b.opponents.add(player_a)
        a.as_a += 1
        b.as_b += 1
        a.last_role, b.last_role = "A", "B"

    def record_bye(self, player_id: str, points: int = BYE_POINTS) -> None:
        record = self.record(player_id)
        record.points += points
        record.byes += 1


@dataclass(frozen=True)
class SwissPairing:
    pairs: list[Pair]
    bye: str | None
    rematches: int = 0


def swiss_rounds(player_count: int) -> int:
    """The default number of Swiss rounds: enough for one winner to emerge, ceil(log2(n))."""
    return math.ceil(math.log2(player_count)) if player_count > 1 else 0


def swiss_round(players: Iterable[Entrant], history: SwissHistory) -> SwissPairing:
    """The next round's pairs (player A, player B) and bye, by the rules in the module docstring."""
    entrants = {entrant.player_id: entrant for entrant in players}
    records = {player_id: history.records.get(player_id, PlayerRecord()) for player_id in entrants}

    def rank_key(player_id: str) -> tuple[int, int, float, tuple[str, int, str]]:
        rating = entrants[player_id].rating
        return (-records[player_id].points, rating is None, -(rating or 0.0), id_sort_key(player_id))

    ranked = sorted(entrants, key=rank_key)
    bye = None
    if len(ranked) % 2:
        fewest = min(records[p].byes for p in ranked)
        bye = next(p for p in reversed(ranked) if records[p].byes == fewest)
        ranked.remove(bye)
    pairer = _Pairer(ranked, records)
    matched = pairer.pair()
    pairs = sorted(
        (pairer.orient(x, y) for x, y in matched), key=lambda pair: min(pairer.rank[pair[0]], pairer.rank[pair[1]])
    )
    rematches = sum(1 for a, b in pairs if b in records[a].opponents)
    return SwissPairing(pairs=pairs, bye=bye, rematches=rematches)


class _Pairer:
    """One round's matching over the ranked players (ranked: best first, bye removed)."""

    def __init__(self, ranked: list[str], records: Mapping[str, PlayerRecord]) -> None:
        self.ranked = ranked
        self.records = records
        self.rank = {player_id: index for index, player_id in enumerate(ranked)}
        # Score groups, best first, each in rank order.
        self.groups: list[list[str]] = []
        for player_id in ranked:
            if self.groups and records[self.groups[-1][0]].points == records[player_id].points:
                self.groups[-1].append(player_id)
            else:
                self.groups.append([player_id])

    def pair(self) -> list[Pair]:
        by_group: list[list[Pair]] = []
        floaters_into: list[list[str]] = []
        floaters: list[str] = []
        for group in self.groups:
            floaters_into.append(floaters)
            group_pairs, floaters = self._pair_group(floaters, group)
            by_group.append(group_pairs)
        if not floaters:
            return [pair for group_pairs in by_group for pair in group_pairs]
        # Players are left at the bottom whom only a rematch could pair: a group above floated
        # the wrong players. Pair the lowest groups again, each looking ahead at everyone below
        # it, reopening more groups (1, 2, 4 … from the bottom) until that succeeds.
        count = 1
        while True:
            start = max(0, len(self.groups) - count)
            again = self._pair_looking_ahead(start, floaters_into[start])
            if again is not None:
                return [pair for group_pairs in by_group[:start] for pair in group_pairs] + again
            if start == 0:
                return self._matching(self.ranked, rematch=True, head=0, by_rank=False)
            count *= 2

    def _facing(self, top: list[str], bottom: list[str]) -> list[str]:
        """The bottom half reordered so that each top player faces, in its block, the next bottom
        player wanting the other role (the Dutch system's transpositions for colour, simplified)."""
        queues: dict[Role, deque[str]] = {"A": deque(), "B": deque()}
        for player_id in bottom:
            queues[self.records[player_id].wanted_role()].append(player_id)
        facing: list[str] = []
        for player_id in top:
            wanted = self.records[player_id].wanted_role()
            other = queues["B" if wanted == "A" else "A"]
            facing.append((other or queues[wanted]).popleft())
        taken = set(facing)
        return facing + [p for p in bottom if p not in taken]

    def _pair_looking_ahead(self, start: int, floaters: list[str]) -> list[Pair] | None:
        """Groups ``start`` onwards (``floaters`` coming in), one by one: the most pairs inside
        the group such that the players it floats and everyone below can still all be paired
        without a rematch. None when even the first group cannot be completed so."""
        pairs: list[Pair] = []
        for index in range(start, len(self.groups)):
            pool = floaters + self.groups[index]
            below = [p for lower in self.groups[index + 1 :] for p in lower]
            players = pool + below
            matching = self._matching(players, rematch=False, head=len(floaters), by_rank=True, inside=set(pool))
            if 2 * len(matching) < len(players):
                return None  # only on the first group: each later one is completed by this one
            inside = [(x, y) for x, y in matching if x in pool and y in pool]
            pairs.extend(inside)
            paired = {p for pair in inside for p in pair}
            floaters = [p for p in pool if p not in paired]
        return pairs

    def _pair_group(self, floaters: list[str], group: list[str]) -> tuple[list[Pair], list[str]]:
        """Pairs inside one score group (floaters from above first) and who floats down."""
        half = len(group) // 2
        top, bottom = group[:half], self._facing(group[:half], group[half:])
        pairs: list[Pair] = []
        carried = list(floaters)
        for start in range(0, max(len(top), len(bottom)), BLOCK_PAIRS):
            block = carried + top[start : start + BLOCK_PAIRS] + bottom[start : start + BLOCK_PAIRS]
            block_pairs = self._match(block, rematch=False, head=len(carried))
            pairs.extend(block_pairs)
            paired = {p for pair in block_pairs for p in pair}
            carried = [p for p in block if p not in paired]
        everyone = floaters + group
        if not carried or len(carried) <= len(everyone) % 2:
            return pairs, carried
        # Blocks left more over than parity: rematch in growing windows from the bottom of the
        # group, up to the whole group, whose matching has the fewest leftovers there are.
        window = 1
        pairs.sort(key=lambda pair: max(self.rank[pair[0]], self.rank[pair[1]]))
        while True:
            kept, reopened = pairs[: max(0, len(pairs) - window)], pairs[max(0, len(pairs) - window) :]
            players = sorted(carried + [p for pair in reopened for p in pair], key=self.rank.__getitem__)
            again = self._match(players, rematch=False, head=0)
            paired = {p for pair in again for p in pair}
            left = [p for p in players if p not in paired]
            if len(left) <= len(everyone) % 2 or not kept:
                return kept + again, left
            window *= 2

    def _match(self, players: list[str], rematch: bool, head: int) -> list[Pair]:
        """Maximum-cardinality, maximum-weight matching of ``players`` (in rank order).

        The first ``head`` players floated in: each is best paired with the top of the rest, and
        the rest top half against bottom half.

        Who is left over must be the lowest-ranked players. Weighing every pair by rank makes the
        blossom algorithm many times slower, so first an odd count gets a stand-in opponent whose
        partner floats (preferring the lowest-ranked); only if more are left over than parity is
        the matching redone with every pair weighed by rank."""
        pairs = self._matching(players, rematch, head, by_rank=False)
        if 2 * len(pairs) >= len(players) - len(players) % 2:
            return pairs
        return self._matching(players, rematch, head, by_rank=True)

    def _matching(
        self, players: list[str], rematch: bool, head: int, by_rank: bool, inside: set[str] | None = None
    ) -> list[Pair]:
        count = len(players)
        if count < 2:
            return []
        records = self.records
        position = {p: i for i, p in enumerate(players)}
        half = (count - head) // 2
        # Weight tiers, each worth more than everything below it can add up to over a matching.
        w_order = 1
        w_role = w_order * (count * count + 1)
        wants = {p: records[p].wanted_role() for p in players}
        strength = {p: records[p].role_strength() for p in players}
        w_score = w_role * (count * (2 * max(strength.values()) + 1) + 1)
        max_diff = records[players[0]].points - records[players[-1]].points
        w_keep = w_score * (count * (max_diff + 1) + 1)
        w_inside = w_keep * (2 * count * count + 1)
        w_rematch = w_inside * (count + 1)
        base = w_rematch * (count + 1)
        # Imported here, not with the module: every process that reads standings imports this
        # module (through league.formats), and networkx costs ~0.2 s of CPU to import; only the
        # conductor pairing a Swiss round needs it.
        import networkx as nx

        graph = nx.Graph()
        graph.add_nodes_from(players)
        for i, x in enumerate(players):
            opponents = records[x].opponents
            points = records[x].points
            for j in range(i + 1, count):
                y = players[j]
                met = y in opponents
                if met and not rematch:
                    continue
                same_wish = wants[x] == wants[y]
                both_in = inside is not None and x in inside and y in inside
                weight = (
                    base
                    - w_rematch * met
                    # Keeping the higher-ranked players paired makes the lowest-ranked float down.
                    + (w_keep * ((count - i) + (count - j)) if by_rank and (inside is None or both_in) else 0)
                    + (w_inside if both_in else 0)
                    - w_score * abs(points - records[y].points)
                    # One of a pair wishing the same role gets the other: the more it is owed, the worse.
                    - w_role * same_wish * (1 + 2 * min(strength[x], strength[y]))
                    - w_order * (j - head if i < head else abs(j - i - half))
                )
                graph.add_edge(x, y, weight=weight)
        if count % 2 and not by_rank:
            for i, x in enumerate(players):
                graph.add_edge(_FLOATS, x, weight=base + w_keep * i)
        matching = nx.max_weight_matching(graph, maxcardinality=True)
        return [(x, y) if position[x] < position[y] else (y, x) for x, y in matching if _FLOATS not in (x, y)]

    def orient(self, x: str, y: str) -> Pair:
        """(player A, player B): A to who wants it more; the higher-ranked player's wish wins a tie."""
        if self.rank[y] < self.rank[x]:
            x, y = y, x
        rx, ry = self.records[x], self.records[y]
        if rx.wanted_role() != ry.wanted_role():
            return (x, y) if rx.wanted_role() == "A" else (y, x)
        wisher = x if rx.role_strength() >= ry.role_strength() else y
        other = y if wisher == x else x
        return (wisher, other) if self.records[wisher].wanted_role() == "A" else (other, wisher)


# Knockout ---------------------------------------------------------------------------------------


def _bracket_order(size: int) -> list[int]:
    """Seed numbers (1-based) in bracket order for a power-of-two size: 1, size, …, 2, size-1."""
    order = [1]
    while len(order) < size:
        total = 2 * len(order) + 1
        order = [seed for s in order for seed in (s, total - s)]
    return order


KnockoutMatch = tuple[str, str | None]  # (higher seed, lower seed or None for a bye)


def knockout_rounds(player_count: int) -> int:
    """How many rounds a knockout of ``player_count`` players plays: ceil(log2(n)), byes included."""
    return math.ceil(math.log2(player_count)) if player_count > 1 else 0


def knockout_seeds(players: Iterable[Entrant]) -> dict[str, int]:
    """Seed numbers from 1: by rating (higher first), unrated after rated, then player id."""
    seeded = sorted(players, key=lambda e: (e.rating is None, -(e.rating or 0.0), id_sort_key(e.player_id)))
    return {entrant.player_id: index + 1 for index, entrant in enumerate(seeded)}


def knockout_bracket(players_seeded: Sequence[Entrant]) -> list[KnockoutMatch]:
    """The first round of a single-elimination bracket, seeded by :func:`knockout_seeds`.

    Seed 1 meets seed N, 2 meets N-1 …, placed so that 1 and 2 can only meet in the final.
    When N is not a power of two, the top seeds get byes (``None`` as the opponent)."""
    seeds = knockout_seeds(players_seeded)
    if len(seeds) < 2:
        return []
    size = 1 << (len(seeds) - 1).bit_length()
    by_seed = {seed: player_id for player_id, seed in seeds.items()}
    order = _bracket_order(size)
    return [(by_seed[order[i]], by_seed.get(order[i + 1])) for i in range(0, size, 2)]


def knockout_next_round(
    previous_round_results: Sequence[tuple[KnockoutMatch, str | None]], seeds: Mapping[str, int]
) -> list[KnockoutMatch]:
    """The next round from the previous one's matches, in bracket order, each with its winner.

    A bye advances its player; a draw (winner ``None``) advances the higher seed (the lower seed
    number). Neighbouring winners meet, the higher seed first. An empty list: that was the final."""
    advancing = [knockout_advancing(match, winner, seeds) for match, winner in previous_round_results]
    if len(advancing) < 2:
        return []
    pairs = zip(advancing[::2], advancing[1::2], strict=True)
    return [(x, y) if seeds[x] < seeds[y] else (y, x) for x, y in pairs]


def knockout_positions(seeds: Mapping[str, int]) -> dict[str, int]:
    """Each player's place in the first round's bracket order (0 first). A round's matches and
    byes in bracket order are those sorted by their players' lowest place: the winners of
    neighbouring entries meet next, so this is all a later round needs of the bracket."""
    if not seeds:
        return {}
    size = 1 << (len(seeds) - 1).bit_length()
    place = {seed: index for index, seed in enumerate(_bracket_order(size))}
    return {player_id: place[seed] for player_id, seed in seeds.items()}


def knockout_advancing(match: KnockoutMatch, winner: str | None, seeds: Mapping[str, int]) -> str:
    """Who goes through from one bracket entry: the bye's player, the winner, or on a draw (or
    when both lost technically) the higher seed."""
    high, low = match
    if low is None:
        return high
    if winner is None:
        return min(high, low, key=seeds.__getitem__)
    if winner not in (high, low):
        raise ValueError(f"{winner} did not play {high} v {low}")
    return winner


def knockout_stages(
    played_rounds: Sequence[Sequence[tuple[KnockoutMatch, str | None]]], seeds: Mapping[str, int]
) -> dict[str, int]:
    """How many rounds each player got through, from the rounds played so far (each a list of
    bracket entries with their winner): the knockout's first ranking key. The champion got
    through every round; a player knocked out in round r got through r-1."""
    stages = dict.fromkeys(seeds, 0)
    for entries in played_rounds:
        for match, winner in entries:
            through = knockout_advancing(match, winner, seeds)
            stages[through] = stages.get(through, 0) + 1
    return stages
