"""A league's state transitions, each its own transaction, each recorded in the Event log.

REGISTERING → READY (enough players when the window closes) → RUNNING (schedule stored: every
round of a round-robin, the first of a Swiss or knockout league, whose next round is drawn by
``draw_next_round`` once the one before is PLAYED, before that one's boundary is sent); per
round PENDING → ANNOUNCED (ROUND_ANNOUNCEMENT sent) → PLAYED (its last result recorded, by
``actions.record_results``) → COMPLETED (standings and ROUND_COMPLETED sent); the last round
COMPLETED → league COMPLETED with its champion. The database is the single source of truth, so
a conductor killed at any moment and started again (anywhere) carries on from what it reads.

A match's own changes (claim, start, release, result) are in ``dispatch`` and
``actions.record_results``; docs/architecture.md ("A match's states") draws them all with the
invariants they keep (at most one result per match, the first valid one, from a log that bears
it out). Each change here is one transaction with its Event row.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from league import actions, formats, standings
from league.conductor.common import IN_PLAY, WORKING, Delivery, Dispatch, Outcome, players_of
from league.conductor.delivery_log import record_deliveries
from league.conductor.dispatch import Records, claim_matches, records_in
from league.conductor.notices import announcement, finished_in_round, next_round_after, round_matches
from league.events import append_events, broadcast, event_values, record_event
from league.models import AgentStatus, Bye, Event, League, Match, Player, Round
from league.schedule import schedule_matches
from league.sql import column, table
from leagueproto.scoring import BYE_POINTS

log = logging.getLogger("league.conductor")


def check_registration(league_pk: int) -> str | None:
    """Start a REGISTERING league whose window has closed, if it has enough players; below the
    minimum it stays REGISTERING (one ``start_refused`` event says why) so an admin can reopen it."""
    league = League.objects.get(pk=league_pk)
    now = timezone.now()
    if league.status != League.Status.REGISTERING or not league.registration_closes_at:
        return None
    if league.registration_closes_at > now:
        return None
    try:
        actions.start_league(league)
    except ValueError as exc:
        marker = league.registration_closes_at.isoformat()
        with transaction.atomic():
            already = Event.objects.filter(league=league, kind="start_refused", payload__closes_at=marker).exists()
            if not already:
                log.warning("%s", exc)
                record_event(league, "STATE", "start_refused", payload={"reason": str(exc), "closes_at": marker})
        return None
    return League.Status.READY


def create_schedule(league_pk: int) -> bool:
    """READY → schedule stored → RUNNING. Idempotent: a league that has rounds is not rescheduled."""
    with transaction.atomic():
        league = League.objects.select_for_update().get(pk=league_pk)
        if league.status != League.Status.READY:
            return False
        players = [p for p in players_of(league) if p.status not in (AgentStatus.SUSPENDED, AgentStatus.REMOVED)]
        by_id = {p.player_id: p for p in players}
        if not league.rounds.exists() and league.draws_rounds:
            first = _draw_round(league)
            record_event(
                league,
                "STATE",
                "schedule_created",
                payload={"rounds": 1 if first else 0, "format": league.schedule_format, "drawn": "round by round"},
            )
        elif not league.rounds.exists():
            planned = schedule_matches(by_id, double=league.schedule_format == League.ScheduleFormat.DOUBLE)
            numbers = sorted({m.round_number for m in planned})
            rounds = {n: Round.objects.create(league=league, number=n) for n in numbers}
            Match.objects.bulk_create(
                Match(
                    league=league,
                    round=rounds[m.round_number],
                    match_id=m.match_id,
                    player_a=by_id[m.player_a],
                    player_b=by_id[m.player_b],
                    game_type=league.game_type,
                )
                for m in planned
            )
            record_event(
                league,
                "STATE",
                "schedule_created",
                payload={"rounds": len(numbers), "matches": len(planned), "format": league.schedule_format},
            )
        league.status = League.Status.RUNNING
        league.started_at = league.started_at or timezone.now()
        league.current_round = 1 if league.rounds.exists() else 0
        league.save(update_fields=["status", "started_at", "current_round"])
        record_event(league, "STATE", "league_running", payload={"status": league.status})
        broadcast(league.league_id, "league_status", {"league_id": league.league_id, "status": league.status})
    return True


def draw_next_round(league_pk: int) -> Round | None:
    """A Swiss or knockout league's next round, drawn from the results so far once its latest
    round is PLAYED (``league.formats.next_round_draw``): the Round, its matches and byes (and a
    knockout's seeds, at its first draw) and a ``round_drawn`` Event, in one transaction under
    the league's lock. The drawn round, or None when there is nothing to draw (not such a
    league, not RUNNING, its latest round still being played or already followed by a drawn one,
    or no round left: the last Swiss round, the final).

    Idempotent: a conductor killed after the draw commits finds the new round PENDING as the
    latest and draws nothing; one killed before finds the played round still the latest and
    draws it (the lock, and the unique (league, number) of rounds, keep two from both drawing)."""
    with transaction.atomic():
        league = League.objects.select_for_update().get(pk=league_pk)
        if not league.draws_rounds or league.status != League.Status.RUNNING:
            return None
        return _draw_round(league)


def _draw_round(league: League) -> Round | None:
    """Draw and store the round after the league's latest (in the caller's transaction, the
    league locked), if that one is played; see ``draw_next_round``."""
    latest = Round.objects.filter(league_id=league.pk).order_by("-number").first()
    if latest is not None and latest.status not in (Round.Status.PLAYED, Round.Status.COMPLETED):
        return None
    number = 1 if latest is None else latest.number + 1
    drawn = formats.next_round_draw(league, number)
    if drawn is None or not drawn.pairs:
        return None
    players = {p.player_id: p for p in league.players.all()}
    rnd = Round.objects.create(league=league, number=number)
    Match.objects.bulk_create(
        Match(
            league=league,
            round=rnd,
            match_id=f"R{number}M{index}",
            player_a=players[a],
            player_b=players[b],
            game_type=league.game_type,
        )
        for index, (a, b) in enumerate(drawn.pairs, start=1)
    )
    Bye.objects.bulk_create(
        Bye(league=league, round=rnd, player=players[player_id], points=BYE_POINTS) for player_id in drawn.byes
    )
    for player_id, seed in drawn.seeds.items():
        players[player_id].seed = seed
    Player.objects.bulk_update([players[player_id] for player_id in drawn.seeds], ["seed"])
    League.objects.filter(pk=league.pk).changed()  # its byes and a knockout's seeds
    record_event(
        league,
        "STATE",
        "round_drawn",
        payload={
            "round_id": number,
            "format": league.schedule_format,
            "matches": [{"player_A_id": a, "player_B_id": b} for a, b in drawn.pairs],
            "byes": drawn.byes,
            "rematches": drawn.rematches,
        },
    )
    return rnd


def current_round(league: League) -> Round | None:
    return league.rounds.exclude(status=Round.Status.COMPLETED).order_by("number").first()


def pausing_between_rounds(league: League, rnd: Round) -> bool:
    """True while the league's round_pause since the previous round's completion has not passed."""
    if league.round_pause <= 0 or rnd.number <= 1:
        return False
    previous = Round.objects.filter(league_id=league.pk, number=rnd.number - 1).values_list("completed_at", flat=True)
    done_at = previous.first()
    return done_at is not None and (timezone.now() - done_at).total_seconds() < league.round_pause


@dataclass(frozen=True)
class RoundProgress:
    """A round being played as a tick reads it: its status, and its matches waiting and in play."""

    status: str
    scheduled: int
    in_play: int


# The two reads of every tick (100 a second) in SQL of their own: the ORM builds the round's
# aggregate in ~700 µs where the database answers it in ~30, and the leagues' query in ~280 µs
# more than ``raw`` takes to read the same rows (SQLite, a 100-player league; docs/benchmarks.md).
def _working_sql(one_league: bool) -> str:
    only = f" AND {column(League, 'league_id')} = %s" if one_league else ""
    marks = ", ".join(["%s"] * len(WORKING))
    return (
        f"SELECT * FROM {table(League)} WHERE {column(League, 'status')} IN ({marks}){only} "
        f"ORDER BY {column(League, 'pk')}"
    )


_WORKING = {False: _working_sql(False), True: _working_sql(True)}  # every league; one league


def working_leagues(league_id: str | None = None) -> list[League]:
    """The leagues in progress (registering, ready or running), in order; only ``league_id`` if given."""
    params = [*WORKING, league_id] if league_id else list(WORKING)
    return list(League.objects.raw(_WORKING[bool(league_id)], params))


_PROGRESS = (
    "SELECT r.{round_status}, "
    "SUM(CASE WHEN m.{match_status} = %s THEN 1 ELSE 0 END), "
    "SUM(CASE WHEN m.{match_status} IN (%s, %s) THEN 1 ELSE 0 END) "
    "FROM {rounds} r LEFT JOIN {matches} m ON m.{round_of_match} = r.{round_pk} "
    "WHERE r.{round_pk} = %s GROUP BY r.{round_status}"
).format(
    rounds=table(Round),
    matches=table(Match),
    round_pk=column(Round, "pk"),
    round_status=column(Round, "status"),
    match_status=column(Match, "status"),
    round_of_match=column(Match, "round"),
)


def round_progress(round_pk: int) -> RoundProgress:
    """The round's status (PLAYED once ``actions.record_results`` has recorded its last result)
    and how many of its matches wait for a referee or are in play: one query (every tick makes it)."""
    with connection.cursor() as cursor:
        cursor.execute(_PROGRESS, [Match.Status.SCHEDULED, *IN_PLAY, round_pk])
        row = cursor.fetchone()
    # A round gone (its league deleted) reads as PENDING: nothing to finish, the next tick looks afresh.
    return (
        RoundProgress(row[0], int(row[1]), int(row[2]))
        if row is not None
        else RoundProgress(Round.Status.PENDING, 0, 0)
    )


def locked_round(round_pk: int) -> Round:
    """The round with its league, locked (PostgreSQL) for a transition in the caller's transaction."""
    return Round.objects.select_for_update().select_related("league").get(pk=round_pk)


def mark_round_announced(round_pk: int, matches: list[dict[str, Any]] | None = None) -> Round:
    """PENDING → ANNOUNCED; the round as it stands after (announced now, or as it was when not
    PENDING). ``matches``: the round's ``round_matches`` if the caller has them."""
    with transaction.atomic():
        rnd = locked_round(round_pk)
        if rnd.status != Round.Status.PENDING:
            return rnd
        rnd.status = Round.Status.ANNOUNCED
        rnd.announced_at = timezone.now()
        rnd.save(update_fields=["status", "announced_at"])
        League.objects.filter(pk=rnd.league_id).update(current_round=rnd.number)
        league = rnd.league
        append_events([event_values(league, "STATE", "round_started", payload={"round_id": rnd.number})])
        if matches is None:
            matches = round_matches(rnd)
        pairs = [{k: m[k] for k in ("match_id", "player_A_id", "player_B_id")} for m in matches]
        broadcast(league.league_id, "round_started", {"round_id": rnd.number, "matches": pairs})
    return rnd


def mark_round_completed(
    round_pk: int, table: list[dict[str, Any]] | None = None, *, notices_owed: bool = False
) -> bool:
    """PLAYED → COMPLETED (False if it already was). ``notices_owed``: the round's standings and
    ROUND_COMPLETED have not been sent yet (``advance_round``)."""
    with transaction.atomic():
        rnd = locked_round(round_pk)
        if rnd.status == Round.Status.COMPLETED:
            return False
        rnd.status = Round.Status.COMPLETED
        rnd.completed_at = timezone.now()
        rnd.notices_owed = notices_owed
        rnd.save(update_fields=["status", "completed_at", "notices_owed"])
        league = rnd.league
        if league.draws_rounds:  # a Swiss or knockout table moves on with it (byes, stages)
            League.objects.filter(pk=league.pk).changed()
        nxt = next_round_after(league.pk, rnd.number)
        if nxt is not None:
            League.objects.filter(pk=league.pk).update(current_round=nxt.number)
        finished = finished_in_round(rnd.pk)
        append_events(
            [event_values(league, "STATE", "round_completed", payload={"round_id": rnd.number, "matches": finished})]
        )
        broadcast(
            league.league_id,
            "round_completed",
            {
                "round_id": rnd.number,
                "matches_completed": finished,
                "next_round_id": nxt.number if nxt else None,
                "standings": standings.standings(league) if table is None else table,
            },
        )
    return True


@dataclass
class NextRound:
    """The league's current round as a tick finds it, and what to do with it."""

    rnd: Round | None  # None: every round is COMPLETED
    deliveries: list[Delivery] | None = None  # ROUND_ANNOUNCEMENTs, when PENDING and not pausing
    matches: list[dict[str, Any]] | None = None  # its ``round_matches`` (with ``deliveries``)
    claimed: list[Dispatch] = field(default_factory=list)  # claimed as it was announced
    started: bool = False  # its first matches are already being sent (``finish_round``)
    owed: Round | None = None  # a round whose boundary notices are owed (``owed_round``)


def owed_round(league: League) -> Round | None:
    """The league's round whose boundary notices are owed (a conductor stopped between
    ``advance_round`` and ``notices_sent``), if any."""
    return Round.objects.filter(league_id=league.pk, notices_owed=True).order_by("number").first()


def next_round(league: League) -> NextRound:
    """The league's current round and, if it is PENDING and not pausing, its ROUND_ANNOUNCEMENTs
    and matches (none while the round_pause runs): what a tick reads before announcing."""
    rnd = current_round(league)
    if rnd is None and league.draws_rounds and draw_next_round(league.pk) is not None:
        # Every round completed and yet one more to play: drawn now (a guarded step; the usual
        # draw is ``draw_next_round`` before the previous round's boundary).
        rnd = current_round(league)
    owed = owed_round(league)
    if rnd is None or rnd.status != Round.Status.PENDING or pausing_between_rounds(league, rnd):
        return NextRound(rnd, owed=owed)
    matches = round_matches(rnd)
    return NextRound(rnd, announcement(league, rnd, matches), matches, owed=owed)


def announce_round(
    league: League,
    round_pk: int,
    matches: list[dict[str, Any]] | None,
    avoid: Iterable[int] = (),
    records: Records | None = None,
) -> NextRound:
    """Mark the round ANNOUNCED and claim its first matches (``claim_matches``, with the players'
    ``records`` if the caller has them) in the same transaction: the referees get start_match
    without another trip. Nothing is claimed for a league without live referees (the embedded
    referee's path claims on the next step)."""
    with transaction.atomic():
        rnd = mark_round_announced(round_pk, matches)
        announced = rnd.status == Round.Status.ANNOUNCED
        claimed = claim_matches(league.pk, rnd.pk, avoid, league, rnd, records) if announced else []
    return NextRound(rnd, claimed=claimed)


def advance_round(
    league: League,
    round_pk: int,
    table: list[dict[str, Any]],
    upcoming_pk: int,
    matches: list[dict[str, Any]] | None,
    avoid: Iterable[int] = (),
) -> NextRound:
    """One transaction: the round COMPLETED with its notices owed, the next ANNOUNCED and its
    first matches claimed (``announce_round``). It runs while the boundary is being sent
    (``Conductor.finish_round``); a conductor that stops before ``notices_sent`` leaves the
    notices owed, and the next one sends them again (``Conductor.resend_boundary``). The claims
    take the players' records from ``table`` (``records_in``): the standings after this round
    are the records before the next."""
    with transaction.atomic():
        mark_round_completed(round_pk, table, notices_owed=True)
        return announce_round(league, upcoming_pk, matches, avoid, records_in(table))


def notices_sent(league: League, round_pk: int, outcomes: list[list[Outcome]]) -> None:
    """The boundary's deliveries recorded (``record_deliveries``) and the round's notices no
    longer owed, in one transaction."""
    with transaction.atomic():
        if outcomes:
            record_deliveries(league, outcomes)
        Round.objects.filter(pk=round_pk).update(notices_owed=False)


def extend_deadlines(league_id: str | None, seconds: float) -> int:
    """The database was away for ``seconds``: every match in play (of ``league_id``, else of
    every league in progress) gets that much longer before its deadline, one
    ``deadlines_extended`` Event per league. A referee could not report while the database was
    away, so the time lost is not its fault; without this, matches played during an outage were
    given back at their deadline and played again. How many matches were extended."""
    if seconds <= 0:
        return 0
    extended = 0
    with transaction.atomic():
        leagues = League.objects.filter(status=League.Status.RUNNING)
        if league_id:
            leagues = leagues.filter(league_id=league_id)
        rows = []
        for league in leagues:
            count = Match.objects.filter(league=league, status__in=IN_PLAY, deadline_at__isnull=False).update(
                deadline_at=F("deadline_at") + timedelta(seconds=seconds)
            )
            if count:
                extended += count
                rows.append(
                    event_values(
                        league, "STATE", "deadlines_extended", payload={"seconds": round(seconds, 1), "matches": count}
                    )
                )
        append_events(rows)
    return extended


def complete_league(league_pk: int, champion: dict[str, Any] | None, table: list[dict[str, Any]]) -> bool:
    """RUNNING → COMPLETED with its champion (False if it was not RUNNING)."""
    with transaction.atomic():
        league = League.objects.select_for_update().get(pk=league_pk)
        if league.status != League.Status.RUNNING:
            return False
        league.status = League.Status.COMPLETED
        league.completed_at = timezone.now()
        if champion:
            league.champion = league.players.filter(player_id=champion["player_id"]).first()
        league.save(update_fields=["status", "completed_at", "champion"])
        record_event(league, "STATE", "league_completed", payload={"champion": champion})
        broadcast(
            league.league_id,
            "league_completed",
            {"league_id": league.league_id, "champion": champion, "final_standings": table},
        )
        broadcast(league.league_id, "league_status", {"league_id": league.league_id, "status": league.status})
    return True
