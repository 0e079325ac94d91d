"""The practice arena's state changes (league/arena.py has its rules): opening an arena, its
players' seats, and the rating update that goes with each of its results.

``rate_results`` runs inside ``actions.record_results``' transaction: a result and the rating
change it makes commit together or not at all, and since a match has at most one result (its
one-to-one key) and a rating at most one change per match (``one_change_per_match``), replaying
a report never moves a rating twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from league import ratings
from league.arena import identity_of, rest_seconds
from league.events import EventValues, broadcast, event_values, record_event
from league.models import Arena, ArenaSeat, League, Match, MatchResult, Player, Rating, RatingChange, Round

OPENABLE = (League.Status.INITIALIZING, League.Status.REGISTERING, League.Status.READY, League.Status.PAUSED)
ARENA_ROUND = 1  # an arena's matches all belong to its one round, which never completes


def arena_of(league: League) -> Arena:
    """The arena's settings, made with their defaults the first time they are needed."""
    arena, _ = Arena.objects.get_or_create(league=league)
    return arena


def start_arena(league_pk: int) -> bool:
    """An arena READY (or opened by ``open_arena``) → RUNNING, with its one round ANNOUNCED: from
    then on the conductor pairs its free players continuously. False if it was not an arena in
    an openable status."""
    with transaction.atomic():
        league = League.objects.select_for_update().get(pk=league_pk)
        if not league.is_arena or league.status not in OPENABLE:
            return False
        arena_of(league)
        now = timezone.now()
        Round.objects.get_or_create(
            league=league, number=ARENA_ROUND, defaults={"status": Round.Status.ANNOUNCED, "announced_at": now}
        )
        previous = league.status
        league.status = League.Status.RUNNING
        league.started_at = league.started_at or now
        league.current_round = ARENA_ROUND
        league.registration_opens_at = league.registration_opens_at or now
        league.registration_closes_at = None  # an arena takes players for as long as it runs
        league.save(
            update_fields=["status", "started_at", "current_round", "registration_opens_at", "registration_closes_at"]
        )
        record_event(league, "STATE", "arena_running", payload={"status": league.status, "previous": previous})
        broadcast(league.league_id, "league_status", {"league_id": league.league_id, "status": league.status})
    return True


def open_arena(league: League) -> League:
    """Open an arena (admin): it takes players and plays at once, until paused or cancelled.
    A paused arena opens again the same way."""
    if not league.is_arena:
        raise ValueError(f"league {league.league_id} is not an arena")
    if not start_arena(league.pk):
        league.refresh_from_db()
        raise ValueError(f"arena {league.league_id} is {league.status}: it cannot be opened")
    league.refresh_from_db()
    return league


def ensure_seats(league: League, players: Iterable[Player]) -> dict[int, ArenaSeat]:
    """Every one of ``players`` with its arena seat (made on first sight): player pk → seat."""
    players = list(players)
    seats = {s.player_id: s for s in ArenaSeat.objects.filter(player__in=players)}
    missing = [p for p in players if p.pk not in seats]
    if missing:
        prefix = arena_of(league).house_prefix
        ArenaSeat.objects.bulk_create(
            [
                ArenaSeat(
                    player=p,
                    league=league,
                    identity=identity_of(p.connection, p.canonical_endpoint, p.display_name),
                    house=bool(prefix) and p.display_name.lower().startswith(prefix.lower()),
                )
                for p in missing
            ],
            ignore_conflicts=True,  # another conductor made it meanwhile: theirs is the same
        )
        seats.update({s.player_id: s for s in ArenaSeat.objects.filter(player__in=missing)})
    return seats


@dataclass(frozen=True)
class _Side:
    player: Player
    seat: ArenaSeat
    technical: bool
    result: str  # RatingChange.Result


def _sides(result: MatchResult, match: Match) -> tuple[_Side, _Side]:
    a_won = result.outcome == MatchResult.Outcome.WIN_A
    b_won = result.outcome == MatchResult.Outcome.WIN_B
    res_a = "W" if a_won else "L" if b_won or result.technical_loss_a else "D"
    res_b = "W" if b_won else "L" if a_won or result.technical_loss_b else "D"
    seat_a, seat_b = match.player_a.arena_seat, match.player_b.arena_seat
    return (
        _Side(match.player_a, seat_a, result.technical_loss_a, res_a),
        _Side(match.player_b, seat_b, result.technical_loss_b, res_b),
    )


def _locked_ratings(keys: set[tuple[str, str]], names: dict[str, str], now: datetime) -> dict[tuple[str, str], Rating]:
    """The ratings of these (identity, game type) keys, made at the model's default when new,
    locked in id order (two batches rating the same agents never wait on each other crosswise)."""
    fresh = ratings.initial()
    Rating.objects.bulk_create(
        [
            Rating(
                identity=identity,
                game_type=game,
                display_name=names[identity],
                mu=fresh.mu,
                sigma=fresh.sigma,
                ordinal=fresh.ordinal,
                updated_at=now,
            )
            for identity, game in keys
        ],
        ignore_conflicts=True,  # most exist already
    )
    identities = {identity for identity, _ in keys}
    games = {game for _, game in keys}
    rows = Rating.objects.filter(identity__in=identities, game_type__in=games).order_by("pk")
    if transaction.get_connection().features.has_select_for_update:
        rows = rows.select_for_update()
    return {(r.identity, r.game_type): r for r in rows if (r.identity, r.game_type) in keys}


def rate_results(results: list[MatchResult]) -> tuple[list[tuple[str, str, dict[str, Any]]], list[EventValues]]:
    """Rate each arena result of a batch ``record_results`` has just stored, in its transaction:
    both players' ratings move (``league.ratings.rate``; a match both lost technically moves
    none), one ``RatingChange`` each, and each player's rest after a technical loss (doubling
    with failures in a row; a match played properly ends it). Results of other leagues are
    left alone. Returns the broadcasts for after the commit and the Event rows for the caller to
    insert (one ``rating_updated`` of each per rated match)."""
    pks = [r.match_id for r in results]
    matches = {
        m.pk: m
        for m in Match.objects.filter(pk__in=pks, league__schedule_format=League.ScheduleFormat.ARENA).select_related(
            "league", "player_a", "player_b"
        )
    }
    if not matches:
        return [], []
    now = timezone.now()
    by_league: dict[int, list[Match]] = {}
    for match in matches.values():
        by_league.setdefault(match.league_id, []).append(match)
    arenas = {league_pk: arena_of(group[0].league) for league_pk, group in by_league.items()}
    for group in by_league.values():  # one read of the seats per arena, not one per match
        seats = ensure_seats(group[0].league, [p for m in group for p in (m.player_a, m.player_b)])
        for match in group:
            match.player_a.arena_seat, match.player_b.arena_seat = seats[match.player_a.pk], seats[match.player_b.pk]
    mine = [r for r in results if r.match_id in matches]
    keys: set[tuple[str, str]] = set()
    names: dict[str, str] = {}
    for result in mine:
        match = matches[result.match_id]
        for player in (match.player_a, match.player_b):
            keys.add((player.arena_seat.identity, match.game_type))
            names[player.arena_seat.identity] = player.display_name
    held = _locked_ratings(keys, names, now)
    changes: list[RatingChange] = []
    seats_changed: dict[int, ArenaSeat] = {}
    news: list[tuple[str, str, dict[str, Any]]] = []
    events: list[EventValues] = []
    for result in sorted(mine, key=lambda r: r.match_id):
        match = matches[result.match_id]
        a, b = _sides(result, match)
        arena = arenas[match.league_id]
        ra, rb = held[(a.seat.identity, match.game_type)], held[(b.seat.identity, match.game_type)]
        for side in (a, b):
            seat = side.seat
            seat.failures = seat.failures + 1 if side.technical else 0
            wait = rest_seconds(seat.failures, arena.rest_base, arena.rest_max)
            seat.rested_until = now + timedelta(seconds=wait) if wait else None
            seats_changed[seat.pk] = seat
        if result.outcome == MatchResult.Outcome.BOTH_LOSE or ra.pk == rb.pk:
            continue  # nobody played: nothing to learn of either (or an agent met itself)
        before_a, before_b = ratings.Rating(ra.mu, ra.sigma), ratings.Rating(rb.mu, rb.sigma)
        if b.result == "W":
            after_b, after_a = ratings.rate(before_b, before_a)
        else:
            after_a, after_b = ratings.rate(before_a, before_b, draw=a.result == "D")
        for side, row, after, opponent in ((a, ra, after_a, b), (b, rb, after_b, a)):
            row.mu, row.sigma, row.ordinal = after.mu, after.sigma, after.ordinal
            row.matches += 1
            row.wins += side.result == "W"
            row.draws += side.result == "D"
            row.losses += side.result == "L"
            row.display_name = side.player.display_name
            row.updated_at = now
            changes.append(
                RatingChange(
                    rating=row,
                    match=match,
                    league=match.league,
                    player=side.player,
                    result=side.result,
                    technical=side.technical,
                    opponent=opponent.player.display_name,
                    mu=after.mu,
                    sigma=after.sigma,
                    ordinal=after.ordinal,
                    at=now,
                )
            )
        summary = {
            "match_id": match.match_id,
            match.player_a.player_id: round(after_a.ordinal, 2),
            match.player_b.player_id: round(after_b.ordinal, 2),
        }
        events.append(event_values(match.league, "STATE", "rating_updated", match_id=match.match_id, payload=summary))
        news.append((match.league.league_id, "rating_updated", summary))
    if changes:
        # A second change of one match for one rating would break ``one_change_per_match`` and
        # roll the whole batch back: a match is rated once or its result is not recorded.
        RatingChange.objects.bulk_create(changes)
        Rating.objects.bulk_update(
            {id(r): r for r in held.values()}.values(),
            ["mu", "sigma", "ordinal", "matches", "wins", "draws", "losses", "display_name", "updated_at"],
        )
    if seats_changed:
        ArenaSeat.objects.bulk_update(list(seats_changed.values()), ["failures", "rested_until"])
    return news, events
