"""Standings: pure functions from match results to ranked rows (PROTOCOL.md §7).

No Django, no HTTP, no clock: the LM feeds in ``ResultRow``s built from ``MatchResult`` rows.

Counting rules:
- every result counts one ``played`` for both players;
- 3 points is a win, 1 a draw, anything else a loss;
- a technical loss is a loss (0 points) *and* counts in ``technical_losses``, so
  ``losses`` includes technical losses; when both players fail, both get a (technical) loss.

Ranking: points, then wins, then draws (all descending), then head-to-head points among exactly
the group of players tied on those three, then player id ascending (numerically for ``P<number>``,
so P100 sorts after P99). The final key is unique, so ranks are 1..n without gaps or ties.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

_NUMBERED_ID = re.compile(r"^([A-Za-z_:]*)(\d+)$")


def id_sort_key(agent_id: str) -> tuple[str, int, str]:
    """Sort key for agent ids: ``P2`` < ``P10`` < ``P99`` < ``P100``; other ids sort by text."""
    match = _NUMBERED_ID.match(agent_id)
    if match:
        return (match.group(1), int(match.group(2)), agent_id)
    return (agent_id, -1, agent_id)


@dataclass(frozen=True)
class ResultRow:
    match_id: str
    player_a: str
    player_b: str
    points_a: int
    points_b: int
    technical_loss_a: bool = False
    technical_loss_b: bool = False


@dataclass(frozen=True)
class StandingRow:
    rank: int
    player_id: str
    played: int
    wins: int
    draws: int
    losses: int
    technical_losses: int
    points: int


@dataclass
class _Tally:
    played: int = 0
    wins: int = 0
    draws: int = 0
    losses: int = 0
    technical_losses: int = 0
    points: int = 0

    def add(self, points: int, technical_loss: bool) -> None:
        self.played += 1
        self.points += points
        if points == 3:
            self.wins += 1
        elif points == 1:
            self.draws += 1
        else:
            self.losses += 1
        if technical_loss:
            self.technical_losses += 1


@dataclass
class StandingsTable:
    """Standings kept up to date one result at a time.

    ``rows()`` always equals ``compute_standings(players, every result added so far)``.
    Adding the same match twice raises ``ValueError``: a result counts once.
    """

    tallies: dict[str, _Tally] = field(default_factory=dict)
    # head_to_head[(x, y)] = points x took from matches against y
    head_to_head: dict[tuple[str, str], int] = field(default_factory=dict)
    match_ids: set[str] = field(default_factory=set)

    @classmethod
    def for_players(cls, player_ids: Iterable[str]) -> StandingsTable:
        table = cls()
        for player_id in player_ids:
            table.add_player(player_id)
        return table

    def add_player(self, player_id: str) -> None:
        self.tallies.setdefault(player_id, _Tally())

    def add(self, result: ResultRow) -> None:
        if result.match_id in self.match_ids:
            raise ValueError(f"match {result.match_id} is already counted")
        if result.player_a == result.player_b:
            raise ValueError(f"match {result.match_id}: a player cannot play itself")
        for player_id in (result.player_a, result.player_b):
            if player_id not in self.tallies:
                raise ValueError(f"match {result.match_id}: {player_id} is not in the standings")
        self.match_ids.add(result.match_id)
        self.tallies[result.player_a].add(result.points_a, result.technical_loss_a)
        self.tallies[result.player_b].add(result.points_b, result.technical_loss_b)
        for me, other, points in (
            (result.player_a, result.player_b, result.points_a),
            (result.player_b, result.player_a, result.points_b),
        ):
            self.head_to_head[(me, other)] = self.head_to_head.get((me, other), 0) + points

    def rows(self) -> list[StandingRow]:
        tallies = self.tallies
        primary = {player_id: (t.points, t.wins, t.draws) for player_id, t in tallies.items()}
        groups: dict[tuple[int, int, int], list[str]] = {}
        for player_id, key in primary.items():
            groups.setdefault(key, []).append(player_id)

        # Head-to-head points each player took from the others of its tied group. Either from the
        # pairs within each tied group or from every pair that met, whichever is fewer: early on
        # large groups have met little, late in a league the groups are small but 100 players
        # have met in 9,900 pairs (walking those every round was most of the standings' cost).
        h2h: dict[str, int] = dict.fromkeys(tallies, 0)
        tied = [group for group in groups.values() if len(group) > 1]
        met = self.head_to_head
        if sum(len(group) * len(group) for group in tied) < len(met):
            for group in tied:
                for me in group:
                    h2h[me] = sum(met.get((me, other), 0) for other in group if other != me)
        else:
            for (me, other), points in met.items():
                if me != other and primary[me] == primary[other]:
                    h2h[me] += points

        ordered: list[str] = []
        for key in sorted(groups, reverse=True):
            group = groups[key]
            if len(group) == 1:
                ordered.extend(group)
                continue
            # Head-to-head only among exactly this tied group.
            ordered.extend(sorted(group, key=lambda p: (-h2h[p], id_sort_key(p))))

        rows = []
        for rank, player_id in enumerate(ordered, start=1):
            t = tallies[player_id]
            rows.append(
                StandingRow(
                    rank=rank,
                    player_id=player_id,
                    played=t.played,
                    wins=t.wins,
                    draws=t.draws,
                    losses=t.losses,
                    technical_losses=t.technical_losses,
                    points=t.points,
                )
            )
        return rows


def compute_standings(player_ids: Iterable[str], results: Iterable[ResultRow]) -> list[StandingRow]:
    """Ranked standings of ``player_ids`` (players without results appear with zeros)."""
    table = StandingsTable.for_players(player_ids)
    for result in results:
        table.add(result)
    return table.rows()
