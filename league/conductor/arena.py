"""The arena driver: a RUNNING arena's free players paired continuously (league/arena.py's
rules) into ordinary matches that go to referees like any league's.

An arena is a league with one round that is announced and never completes (league/actions/
arena.py). Each step of the ``ArenaDriver`` (every ``pair_every`` seconds per arena) reads who
is free, pairs them (``pair_arena``, one transaction holding the arena's row so two conductors
never pair the same players twice), then claims and sends the new matches through the league's
own path (``Dispatcher.dispatch``: referees, or the built-in referee), supervises the matches in
play (``Supervisor``) and probes agents marked unreachable (``Prober``), as for a league.
Results come back through ``actions.record_results``, which rates them in the same transaction."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from league.actions.arena import ARENA_ROUND, arena_of, ensure_seats, start_arena
from league.arena import Entrant, hour_count, pair_free, under_cap
from league.conductor.common import IN_PLAY, LIVE
from league.conductor.dispatcher import Dispatcher
from league.conductor.probing import Prober
from league.conductor.supervision import Supervisor
from league.events import append_events, event_values
from league.models import Arena, ArenaSeat, League, Match, Player, Rating, Round

log = logging.getLogger("league.conductor")

OPEN = (Match.Status.SCHEDULED, *IN_PLAY)


@dataclass(frozen=True)
class Paired:
    """What one pairing step did: the arena's round, and how many matches it made."""

    rnd: Round | None
    created: int
    waiting: int  # SCHEDULED matches of the arena (made now or before), for the referees


def free_players(league: League, arena: Arena, now: datetime) -> tuple[list[Entrant], int]:
    """The arena's players free to play now, as the pairing sees them, and how many of its
    matches are open (scheduled or in play). Free: live, not marked unreachable, in no open
    match, not resting after a failure, and under the hourly cap (house bots have none)."""
    open_rows = list(Match.objects.filter(league=league, status__in=OPEN).values_list("player_a_id", "player_b_id"))
    busy = {pk for row in open_rows for pk in row}
    players = list(
        Player.objects.filter(league=league, status__in=LIVE, unreachable_since__isnull=True)
        .exclude(pk__in=busy)
        .order_by("pk")
    )
    if len(players) < 2:
        return [], len(open_rows)
    seats = ensure_seats(league, players)
    players = [p for p in players if not (seats[p.pk].rested_until and seats[p.pk].rested_until > now)]
    if arena.max_matches_per_hour:
        cap = arena.max_matches_per_hour
        players = [
            p
            for p in players
            if seats[p.pk].house or under_cap(hour_count(seats[p.pk].hour_began, seats[p.pk].hour_matches, now)[1], cap)
        ]
    # The latest match and opponent of each: among the arena's latest matches (an agent whose
    # latest match is older than these has played many others since: it has waited longest, and a
    # rematch is no immediate one).
    last: dict[int, tuple[int, int]] = {}
    recent = Match.objects.filter(league=league).order_by("-pk").values_list("pk", "player_a_id", "player_b_id")
    for pk, a, b in recent[: 4 * len(players) + 8]:
        last.setdefault(a, (pk, b))
        last.setdefault(b, (pk, a))
    identities = {seats[p.pk].identity for p in players}
    ordinals = dict(
        Rating.objects.filter(game_type=league.game_type, identity__in=identities).values_list("identity", "ordinal")
    )
    entrants = [
        Entrant(
            p.pk,
            ordinals.get(seats[p.pk].identity, 0.0),
            last[p.pk][1] if p.pk in last else None,
            seats[p.pk].house,
            last[p.pk][0] if p.pk in last else 0,
        )
        for p in players
    ]
    return entrants, len(open_rows)


def count_hours(player_pks: list[int], now: datetime) -> None:
    """One more match in the hour of each of these players (``league.arena.hour_count``)."""
    seats = list(ArenaSeat.objects.filter(player_id__in=player_pks))
    for seat in seats:
        began, matches = hour_count(seat.hour_began, seat.hour_matches, now)
        seat.hour_began, seat.hour_matches = began or now, matches + 1
    ArenaSeat.objects.bulk_update(seats, ["hour_began", "hour_matches"])


def pair_arena(league_pk: int, capacity: int) -> Paired:
    """Pair the arena's free players into new SCHEDULED matches (A1, A2 …), no more than its
    referees' ``capacity`` has room for beside the matches already open. One transaction, the
    arena's row locked: pairings of two conductors never overlap."""
    with transaction.atomic():
        league = League.objects.get(pk=league_pk)
        if not league.is_arena or league.status != League.Status.RUNNING:
            return Paired(None, 0, 0)
        arena_of(league)
        arena = Arena.objects.select_for_update().get(league=league)
        rnd = Round.objects.get(league=league, number=ARENA_ROUND)
        now = timezone.now()
        entrants, open_count = free_players(league, arena, now)
        room = capacity - open_count
        pairs = pair_free(entrants)[: max(0, room)]
        waiting = Match.objects.filter(league=league, status=Match.Status.SCHEDULED).count()
        if not pairs:
            return Paired(rnd, 0, waiting)
        first = arena.matches_created + 1
        by_pk = {p.pk: p for p in Player.objects.filter(pk__in=[k for pair in pairs for k in pair])}
        matches = [
            Match(
                league=league,
                round=rnd,
                match_id=f"A{first + n}",
                player_a=by_pk[a],
                player_b=by_pk[b],
                game_type=league.game_type,
            )
            for n, (a, b) in enumerate(pairs)
        ]
        Match.objects.bulk_create(matches)
        count_hours([k for pair in pairs for k in pair], now)
        Arena.objects.filter(pk=arena.pk).update(matches_created=arena.matches_created + len(matches))
        append_events(
            [
                event_values(
                    league,
                    "STATE",
                    "match_created",
                    match_id=m.match_id,
                    payload={"player_A_id": m.player_a.player_id, "player_B_id": m.player_b.player_id},
                    clean=True,
                )
                for m in matches
            ]
        )
    return Paired(rnd, len(matches), waiting + len(matches))


@dataclass
class ArenaDriver:
    """The conductor's arena steps (league/conductor/worker.py hands it a league whose
    schedule_format is ``arena``)."""

    prober: Prober
    supervisor: Supervisor
    dispatcher: Dispatcher
    pair_every: float = 0.05  # seconds between pairing steps of one arena
    # league pk → when it was last paired (monotonic)
    _paired: dict[int, float] = field(default_factory=dict, init=False, repr=False)

    async def step(self, league: League, capacity: Callable[[League], Awaitable[int]]) -> None:
        """A REGISTERING arena takes players and waits to be opened; a READY one (started like a
        league) opens; a RUNNING one pairs its free players and sends their matches.
        ``capacity``: the league's referee capacity (the Conductor's, cached)."""
        if league.status == League.Status.READY:
            if not await sync_to_async(start_arena)(league.pk):
                return
            league = await sync_to_async(League.objects.get)(pk=league.pk)
            log.info("arena %s open: pairing its players continuously", league.league_id)
        if league.status != League.Status.RUNNING:
            return
        now = time.monotonic()
        await self.prober.probe(league, now)
        await self.supervisor.supervise(league)
        if now - self._paired.get(league.pk, 0.0) < self.pair_every:
            return
        self._paired[league.pk] = now
        paired = await sync_to_async(pair_arena)(league.pk, await capacity(league))
        if paired.rnd is not None and paired.waiting:
            await self.dispatcher.dispatch(league, paired.rnd)
