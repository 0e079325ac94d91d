"""Swiss and knockout leagues as the database records them: what their next round is, and what
their standings add to the results (byes, how far each player went in a knockout).

The rules are league/pairing.py's (pure); this module reads the rounds played so far and hands
them over. ``league.conductor.transitions.draw_next_round`` stores what :func:`next_round_draw`
returns; :mod:`league.standings` ranks with :func:`table_format`.

- Swiss: every player not suspended or removed is paired (``pairing.swiss_round``) from all
  results and byes so far, ranked inside each score group by arena rating as it stands when the
  round is drawn (the same ordinal as a knockout's seeds), the players never rated after the
  rated ones by player id; player A of a match is the player who takes the first seat.
- Knockout: seeded by arena rating (each player's ordinal in the league's game, the one the
  league page shows beside its standing: ``Rating.objects.of_players``), highest first, then the
  players never rated in registration (player id) order; 1 v N, 2 v N-1 … with byes to the top
  seeds when the count is not a power of two (``pairing.knockout_bracket``); player A is the
  higher seed. The seeds are fixed at the first draw (``Player.seed``): the later rounds and the
  standings read them back, so a rating that moves during the knockout changes no bracket. A
  match's winner goes through; a drawn match (even_odd's single game can draw), or one both
  players lost technically, sends the higher seed through, so a bracket always finishes without
  replays. The league ends after the final.
- A bye scores :data:`leagueproto.scoring.BYE_POINTS` (a win's 3 points, like a walkover), counted
  once its round is played; it is not a match played, not a win, and adds nothing to Buchholz.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from django.db.models import QuerySet

from league import pairing
from league.models import AgentStatus, Bye, League, Match, MatchResult, Player, Rating, Round
from leagueproto.scoring import KNOCKOUT_TIE_BREAKS, SWISS_TIE_BREAKS, TIE_BREAKS, TieBreak, id_sort_key

# Rounds whose every match has a result: their byes count, and a knockout's winners went through.
PLAYED_ROUNDS = (Round.Status.PLAYED, Round.Status.COMPLETED)


@dataclass(frozen=True)
class Drawn:
    """One round's draw: (player A, player B) pairs and the players given a bye."""

    pairs: list[pairing.Pair]
    byes: list[str] = field(default_factory=list)
    rematches: int = 0
    seeds: dict[str, int] = field(default_factory=dict)  # a knockout's first round: every player's seed


@dataclass(frozen=True)
class TableFormat:
    """What a league's format adds to its results when it is ranked (``league.standings``)."""

    tie_breaks: tuple[TieBreak, ...] = TIE_BREAKS
    byes: tuple[tuple[str, int, int], ...] = ()  # (player id, points, round) of each bye of a played round
    stages: Mapping[str, int] = field(default_factory=dict)  # knockout: rounds each player got through


ROUND_ROBIN = TableFormat()


def playing(league: League) -> QuerySet[Player]:
    """The players a round is drawn for: every one not suspended or removed."""
    return league.players.exclude(status__in=(AgentStatus.SUSPENDED, AgentStatus.REMOVED)).order_by()


def rated_entrants(league: League) -> list[pairing.Entrant]:
    """The players to draw, each with its arena rating's ordinal in the league's game (None:
    never rated): the Swiss ranking inside a score group and the knockout seeds both read it."""
    players: list[Player] = list(playing(league))
    ratings = Rating.objects.of_players(league.game_type, players)
    return [pairing.Entrant(p.player_id, ratings[p.pk].ordinal if p.pk in ratings else None) for p in players]


def swiss_history(league: League) -> pairing.SwissHistory:
    """Every result and bye so far, round by round (the roles' alternation reads their order)."""
    history = pairing.SwissHistory()
    events: list[tuple[int, int, str, str | None, int, int]] = []
    for number, pk, a, b, points_a, points_b in (
        MatchResult.objects.filter(league=league)
        .order_by()
        .values_list(
            "match__round__number",
            "match_id",
            "match__player_a__player_id",
            "match__player_b__player_id",
            "points_a",
            "points_b",
        )
    ):
        events.append((number, pk, a, b, points_a, points_b))
    for number, pk, player_id, points in (
        Bye.objects.filter(league=league).order_by().values_list("round__number", "pk", "player__player_id", "points")
    ):
        events.append((number, pk, player_id, None, points, 0))
    for _, _, a, b, points_a, points_b in sorted(events, key=lambda e: (e[0], e[1])):
        if b is None:
            history.record_bye(a, points_a)
        else:
            history.record_match(a, b, points_a, points_b)
    return history


@dataclass(frozen=True)
class Bracket:
    """A knockout as played so far: the seeds and each round's entries (bracket order) with the
    winner of each (None: a draw, both lost, or not played yet), and which rounds are played."""

    seeds: dict[str, int]
    rounds: list[list[tuple[pairing.KnockoutMatch, str | None]]]
    played: list[bool]


def knockout_bracket(league: League) -> Bracket:
    """The league's knockout rounds read back from its matches, results and byes, with the
    seeds stored at its first draw."""
    by_round: dict[int, list[tuple[pairing.KnockoutMatch, str | None]]] = defaultdict(list)
    statuses = dict(Round.objects.filter(league=league).order_by().values_list("number", "status"))
    rows = (
        Match.objects.filter(league=league)
        .order_by()
        .values_list("round__number", "player_a__player_id", "player_b__player_id", "result__outcome")
    )
    for number, a, b, outcome in rows:
        by_round[number].append(((a, b), winner_of(a, b, outcome)))
    byes = Bye.objects.filter(league=league).order_by().values_list("round__number", "player__player_id")
    for number, player_id in byes:
        by_round[number].append(((player_id, None), None))
    seeds = dict(league.players.filter(seed__isnull=False).order_by().values_list("player_id", "seed"))
    return bracket_of(by_round, {n for n, status in statuses.items() if status in PLAYED_ROUNDS}, seeds)


def winner_of(a: str, b: str, outcome: str | None) -> str | None:
    """The winner of a match by its stored outcome (None: a draw, both lost, or no result)."""
    return a if outcome == MatchResult.Outcome.WIN_A else b if outcome == MatchResult.Outcome.WIN_B else None


def bracket_of(
    by_round: Mapping[int, list[tuple[pairing.KnockoutMatch, str | None]]],
    played: set[int],
    stored_seeds: Mapping[str, int],
) -> Bracket:
    """A :class:`Bracket` from each round's entries in any order, the numbers of the rounds
    played and the seeds stored at the first draw (:func:`first_round_seeds`)."""
    first = {p for (a, b), _ in by_round.get(1, []) for p in (a, b) if p is not None}
    seeds = first_round_seeds(first, stored_seeds)
    place = pairing.knockout_positions(seeds)
    numbers = sorted(by_round)
    rounds = [sorted(by_round[n], key=lambda entry: min(place[p] for p in entry[0] if p is not None)) for n in numbers]
    return Bracket(seeds, rounds, [n in played for n in numbers])


def first_round_seeds(players: Iterable[str], stored: Mapping[str, int]) -> dict[str, int]:
    """The seeds (1, 2 …) of the first round's players: in the order of their stored seeds,
    then those without one (a league export that lists none) by player id."""
    ordered = sorted(players, key=lambda p: (p not in stored, stored.get(p, 0), id_sort_key(p)))
    return {player_id: index + 1 for index, player_id in enumerate(ordered)}


def knockout_format(bracket: Bracket, byes: tuple[tuple[str, int, int], ...]) -> TableFormat:
    """A knockout's table format: its byes and each player's stage from the rounds played."""
    played = [entries for entries, done in zip(bracket.rounds, bracket.played, strict=True) if done]
    return TableFormat(KNOCKOUT_TIE_BREAKS, byes, pairing.knockout_stages(played, bracket.seeds))


def next_round_draw(league: League, number: int) -> Drawn | None:
    """Round ``number`` of a Swiss or knockout league (every round before it played), or None
    when the league has no such round: its Swiss rounds are all played, or the knockout's final is."""
    if league.schedule_format == League.ScheduleFormat.SWISS:
        if number > league.swiss_rounds:
            return None
        drawn = pairing.swiss_round(rated_entrants(league), swiss_history(league))
        return Drawn(drawn.pairs, [drawn.bye] if drawn.bye else [], drawn.rematches)
    if league.schedule_format == League.ScheduleFormat.KNOCKOUT:
        if number == 1:
            entrants = rated_entrants(league)
            first = pairing.knockout_bracket(entrants)
            seeds = pairing.knockout_seeds(entrants)
            return Drawn([(a, b) for a, b in first if b is not None], [a for a, b in first if b is None], seeds=seeds)
        bracket = knockout_bracket(league)
        pairs = pairing.knockout_next_round(bracket.rounds[-1], bracket.seeds)
        return Drawn([(a, b) for a, b in pairs if b is not None]) if pairs else None
    return None


def table_format(league: League) -> TableFormat:
    """The tie-breaks of the league's format and what its table adds to the results."""
    if league.schedule_format not in (League.ScheduleFormat.SWISS, League.ScheduleFormat.KNOCKOUT):
        return ROUND_ROBIN
    byes = tuple(
        Bye.objects.filter(league=league, round__status__in=PLAYED_ROUNDS)
        .order_by("pk")
        .values_list("player__player_id", "points", "round__number")
    )
    if league.schedule_format == League.ScheduleFormat.SWISS:
        return TableFormat(SWISS_TIE_BREAKS, byes)
    return knockout_format(knockout_bracket(league), byes)
