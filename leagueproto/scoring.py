"""The scoring and ranking rules, in one place (docs/protocol.md, "Asking the league").

Pure: no Django, no HTTP, no clock. The referee scores a match with :func:`match_score`, the
League Manager checks a reported score with it, and the standings, the export and the pages rank
with :func:`compute_standings` / :class:`StandingsTable`.

Scoring: a win is 3 points, a draw 1, a loss 0. A technical loss is a loss (0 points) that also
counts in ``technical_losses``; when both players fail, both lose.

Ranking: points, then wins, then draws (all descending), then head-to-head points among exactly
the group of players tied on those three, then player id ascending (numerically for
``P<number>``, so P100 sorts after P99). The final key is unique, so ranks are 1..n without gaps.

Swiss events rank with :data:`SWISS_TIE_BREAKS` instead: points, then Buchholz (the sum of the
points of the opponents a player met, which rewards having met stronger opposition when every
player did not meet every other), then wins, draws, head-to-head and player id. A bye (a round a
Swiss player sits out because the player count is odd, league/pairing.py) scores
:data:`BYE_POINTS`, the points of a win, like a technical win the opponent never showed up for;
it is not a match played, not a win in the record, and adds nothing to Buchholz: there was no
opponent whose points could count.

Knockout events rank with :data:`KNOCKOUT_TIE_BREAKS`: first the stage (how many rounds a player
got through, league/pairing.py ``knockout_stages``), so the champion is first and the finalist
second whatever their points, then points, wins, draws, head-to-head and player id.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Literal

WIN_POINTS, DRAW_POINTS, LOSS_POINTS = 3, 1, 0
BYE_POINTS = WIN_POINTS

# The League Manager's stored outcomes (MatchResult.Outcome) and the points (A, B) each scores.
OUTCOME_POINTS: dict[str, tuple[int, int]] = {
    "WIN_A": (WIN_POINTS, LOSS_POINTS),
    "WIN_B": (LOSS_POINTS, WIN_POINTS),
    "DRAW": (DRAW_POINTS, DRAW_POINTS),
    "BOTH_LOSE": (LOSS_POINTS, LOSS_POINTS),
}

# The order in which ties are broken; a standings row's ``decided_by`` names one.
TieBreak = Literal["stage", "points", "buchholz", "wins", "draws", "head_to_head", "player_id"]
TIE_BREAKS: tuple[TieBreak, ...] = ("points", "wins", "draws", "head_to_head", "player_id")
SWISS_TIE_BREAKS: tuple[TieBreak, ...] = ("points", "buchholz", "wins", "draws", "head_to_head", "player_id")
KNOCKOUT_TIE_BREAKS: tuple[TieBreak, ...] = ("stage", "points", "wins", "draws", "head_to_head", "player_id")
# The rules that may come before head-to-head, compared as numbers (more is better).
_COUNTED: frozenset[str] = frozenset({"stage", "points", "buchholz", "wins", "draws"})
TIE_BREAK_RULE = (
    f"Ranked by points (win {WIN_POINTS}, draw {DRAW_POINTS}, loss {LOSS_POINTS}), then wins, then draws, "
    "then head-to-head (points taken in the games between the tied players), then player id."
)
TIE_BREAK_TEXT: dict[str, str] = {
    "points": "more points",
    "wins": "same points, more wins",
    "draws": "same points and wins, more draws",
    "head_to_head": "level on points, wins and draws: more points in their games against each other",
    "player_id": "level on everything, head-to-head included: the lower player id",
    "buchholz": "same points, higher Buchholz: the sum of your opponents' points",
    "stage": "went further in the knockout",
}
SWISS_TIE_BREAK_RULE = (
    f"Ranked by points (win {WIN_POINTS}, draw {DRAW_POINTS}, loss {LOSS_POINTS}, bye {BYE_POINTS}), "
    "then Buchholz (the sum of your opponents' points), then wins, then draws, "
    "then head-to-head (points taken in the games between the tied players), then player id."
)
KNOCKOUT_TIE_BREAK_RULE = (
    "Ranked by how far each player went in the knockout (the rounds it got through; a drawn match "
    "sends the higher seed through), then points, then wins, then draws, then head-to-head, then player id."
)


def match_score(player_a: str, player_b: str, winner: str | None, technical: Collection[str] = ()) -> dict[str, int]:
    """The points each player takes from a finished match.

    ``winner`` wins (its opponent loses, technically or not); with no winner it is a draw,
    unless players lost technically (``technical``): then both failed and both lose."""
    if winner is not None:
        return {p: WIN_POINTS if p == winner else LOSS_POINTS for p in (player_a, player_b)}
    if technical:
        return {player_a: LOSS_POINTS, player_b: LOSS_POINTS}
    return {player_a: DRAW_POINTS, player_b: DRAW_POINTS}


RecordField = Literal["wins", "draws", "losses"]


def record_field(points: int) -> RecordField:
    """Which count of a player's record a match worth ``points`` to it adds to."""
    if points == WIN_POINTS:
        return "wins"
    if points == DRAW_POINTS:
        return "draws"
    return "losses"


_MARKS: dict[RecordField, str] = {"wins": "W", "draws": "D", "losses": "L"}


def result_mark(points: int) -> str:
    """ "W", "D" or "L": how a match worth ``points`` to a player reads in its form and history."""
    return _MARKS[record_field(points)]


_NUMBERED_ID = re.compile(r"^([A-Za-z_:]*)(\d+)$")


def id_sort_key(agent_id: str) -> tuple[str, int, str]:
    """Sort key for agent ids: ``P2`` < ``P10`` < ``P99`` < ``P100``; other ids sort by text."""
    match = _NUMBERED_ID.match(agent_id)
    if match:
        return (match.group(1), int(match.group(2)), agent_id)
    return (agent_id, -1, agent_id)


@dataclass(frozen=True)
class ResultRow:
    """One recorded match, as the ranking needs it."""

    match_id: str
    player_a: str
    player_b: str
    points_a: int
    points_b: int
    technical_loss_a: bool = False
    technical_loss_b: bool = False


@dataclass(frozen=True)
class StandingRow:
    """One ranked row. ``decided_by``: the rule that placed it below the row above (None first)."""

    rank: int
    player_id: str
    played: int
    wins: int
    draws: int
    losses: int
    technical_losses: int
    points: int
    decided_by: TieBreak | None = None
    buchholz: int = 0
    byes: int = 0
    stage: int = 0


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
        field_name = record_field(points)
        setattr(self, field_name, getattr(self, field_name) + 1)
        if technical_loss:
            self.technical_losses += 1


@dataclass
class StandingsTable:
    """Standings kept up to date one result at a time.

    ``rows()`` always equals ``compute_standings(players, every result added so far)``.
    Adding the same match twice, or a result of a player not in the table, raises ``ValueError``.
    ``tie_breaks`` is :data:`TIE_BREAKS` (round-robin) or :data:`SWISS_TIE_BREAKS`: any order of
    points, buchholz, wins and draws, then head_to_head, then player_id.
    """

    tallies: dict[str, _Tally] = field(default_factory=dict)
    # head_to_head[(x, y)] = points x took from matches against y
    head_to_head: dict[tuple[str, str], int] = field(default_factory=dict)
    match_ids: set[str] = field(default_factory=set)
    opponents: dict[str, list[str]] = field(default_factory=dict)
    byes: dict[str, int] = field(default_factory=dict)
    stages: dict[str, int] = field(default_factory=dict)  # knockout: rounds each player got through
    tie_breaks: tuple[TieBreak, ...] = TIE_BREAKS

    def __post_init__(self) -> None:
        counted, tail = self.tie_breaks[:-2], self.tie_breaks[-2:]
        if tail != ("head_to_head", "player_id") or not set(counted) <= _COUNTED or len(set(counted)) != len(counted):
            raise ValueError(
                f"unsupported tie-breaks {self.tie_breaks}: stage/points/buchholz/wins/draws, then head_to_head, "
                "player_id"
            )

    @classmethod
    def for_players(cls, player_ids: Iterable[str], tie_breaks: tuple[TieBreak, ...] = TIE_BREAKS) -> StandingsTable:
        table = cls(tie_breaks=tie_breaks)
        for player_id in player_ids:
            table.add_player(player_id)
        return table

    def add_player(self, player_id: str) -> None:
        self.tallies.setdefault(player_id, _Tally())
        self.opponents.setdefault(player_id, [])

    def add_bye(self, player_id: str, points: int = BYE_POINTS) -> None:
        """A round ``player_id`` sat out (Swiss, odd player count): ``points``, no match played."""
        if player_id not in self.tallies:
            raise ValueError(f"bye: {player_id} is not in the standings")
        self.tallies[player_id].points += points
        self.byes[player_id] = self.byes.get(player_id, 0) + 1

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
        self.opponents[result.player_a].append(result.player_b)
        self.opponents[result.player_b].append(result.player_a)
        for me, other, points in (
            (result.player_a, result.player_b, result.points_a),
            (result.player_b, result.player_a, result.points_b),
        ):
            self.head_to_head[(me, other)] = self.head_to_head.get((me, other), 0) + points

    def rows(self) -> list[StandingRow]:
        tallies = self.tallies
        counted = self.tie_breaks[:-2]
        buchholz = {p: sum(tallies[o].points for o in opponents) for p, opponents in self.opponents.items()}
        values = {
            player_id: {
                "points": t.points,
                "wins": t.wins,
                "draws": t.draws,
                "buchholz": buchholz[player_id],
                "stage": self.stages.get(player_id, 0),
            }
            for player_id, t in tallies.items()
        }
        primary = {player_id: tuple(values[player_id][rule] for rule in counted) for player_id in tallies}
        groups: dict[tuple[int, ...], list[str]] = {}
        for player_id, key in primary.items():
            groups.setdefault(key, []).append(player_id)

        # Head-to-head points each player took from the others of its tied group. Either from the
        # pairs within each tied group or from every pair that met, whichever is fewer: early on
        # large groups have met little, late in a league the groups are small but 100 players
        # have met in 9,900 pairs.
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
            # Head-to-head only among exactly this tied group.
            ordered.extend(sorted(groups[key], key=lambda p: (-h2h[p], id_sort_key(p))))

        rows: list[StandingRow] = []
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
                    decided_by=_decided_by(counted, ordered[rank - 2], player_id, primary, h2h) if rank > 1 else None,
                    buchholz=buchholz[player_id],
                    byes=self.byes.get(player_id, 0),
                    stage=self.stages.get(player_id, 0),
                )
            )
        return rows


def _decided_by(
    counted: tuple[TieBreak, ...], above: str, me: str, primary: dict[str, tuple[int, ...]], h2h: dict[str, int]
) -> TieBreak:
    """The first rule, in ranking order, on which ``me`` differs from the player ranked above it."""
    for rule, mine, theirs in zip(counted, primary[me], primary[above], strict=True):
        if mine != theirs:
            return rule
    return "head_to_head" if h2h[me] != h2h[above] else "player_id"


def compute_standings(
    player_ids: Iterable[str],
    results: Iterable[ResultRow],
    *,
    tie_breaks: tuple[TieBreak, ...] = TIE_BREAKS,
    byes: Iterable[str] = (),
    bye_points: int = BYE_POINTS,
) -> list[StandingRow]:
    """Ranked standings of ``player_ids`` (players without results appear with zeros).

    ``byes`` names the player of each bye (once per bye); each scores ``bye_points``."""
    table = StandingsTable.for_players(player_ids, tie_breaks)
    for result in results:
        table.add(result)
    for player_id in byes:
        table.add_bye(player_id, bye_points)
    return table.rows()
