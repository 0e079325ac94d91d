"""Matches to referees, the database steps: claims, START_MATCH, starts settled, matches given
back, referee failures. The ``Dispatcher`` (league/conductor/dispatcher.py) sends what they claim.

A claim locks the round's SCHEDULED matches with ``select_for_update(skip_locked=True)`` and the
league's live referees with ``select_for_update()`` (capacity is counted under that lock), so two
conductors never dispatch the same match nor overfill a referee. SQLite has no row locks, but its
writers are serialised (IMMEDIATE transactions), which gives the same guarantee.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from league.conductor.common import (
    COOLDOWN_MAX,
    EMBEDDED_REFEREE,
    IN_PLAY,
    LIVE,
    SUSPEND_AFTER,
    Delivery,
    Dispatch,
    match_token,
    message_to,
    timeouts_of,
)
from league.conductor.delivery_log import delivery_row
from league.conductor.reachability import decide_unreachable
from league.events import EventValues, append_events, broadcast_all, event_values, record_event
from league.models import AgentStatus, League, Match, MatchResult, Referee, Round
from leagueproto.endpoint_policy import network_names
from leagueproto.envelope import deadline_in, format_timestamp
from leagueproto.scoring import record_field

log = logging.getLogger("league.conductor")

Records = dict[str, dict[str, int]]  # player_id → {wins, losses, draws}
NO_RECORD = {"wins": 0, "losses": 0, "draws": 0}


def records_before(rnd: Round, player_ids: Iterable[str]) -> Records:
    """The {wins, losses, draws} of these players from the rounds before ``rnd``: their records
    while ``rnd`` is played (a round starts once the previous one is complete, so they are final).
    One query for the players' own results only. Technical losses count as losses."""
    wanted = set(player_ids)
    records = {player_id: dict(NO_RECORD) for player_id in wanted}
    rows = (
        MatchResult.objects.filter(match__round__league_id=rnd.league_id, match__round__number__lt=rnd.number)
        .filter(Q(match__player_a__player_id__in=wanted) | Q(match__player_b__player_id__in=wanted))
        .order_by()
        .values_list("match__player_a__player_id", "match__player_b__player_id", "points_a", "points_b")
    )
    for a, b, points_a, points_b in rows:
        for player_id, points in ((a, points_a), (b, points_b)):
            if player_id in records:
                records[player_id][record_field(points)] += 1
    return records


def records_in(table: list[dict[str, Any]]) -> Records:
    """The {wins, losses, draws} of every player a standings table lists: read after a round's
    last result, they are the ``records_before`` the next round (both count a technical loss as
    a loss), so the claims made as that round is announced need no query of their own."""
    return {row["player_id"]: {key: row[key] for key in NO_RECORD} for row in table}


@dataclass(frozen=True, slots=True)
class MatchToStart:
    """What START_MATCH says of a match: a few columns of its row and its players'."""

    pk: int
    match_id: str
    game_type: str
    attempt: int
    rnd: Round
    player_a: tuple[str, str]  # (player_id, endpoint)
    player_b: tuple[str, str]

    @classmethod
    def of(cls, match: Match) -> MatchToStart:
        a, b = match.player_a, match.player_b
        return cls(
            match.pk,
            match.match_id,
            match.game_type,
            match.attempt,
            match.round,
            (a.player_id, a.endpoint),
            (b.player_id, b.endpoint),
        )


def start_match_message(
    league: League,
    match: MatchToStart,
    referee: Referee,
    records: Records | None = None,
    deadline: datetime | None = None,
) -> dict[str, Any]:
    """``records``: the players' ``records_before`` the round, when the caller has them;
    ``deadline``: the match's deadline (the referee tells no outcome after it)."""
    (a_id, a_endpoint), (b_id, b_endpoint) = match.player_a, match.player_b
    if records is None:
        records = records_before(match.rnd, (a_id, b_id))
    return message_to(
        referee,
        "START_MATCH",
        league_id=league.league_id,
        round_id=match.rnd.number,
        match_id=match.match_id,
        game_type=match.game_type,
        player_A_id=a_id,
        player_B_id=b_id,
        player_A_endpoint=a_endpoint,
        player_B_endpoint=b_endpoint,
        match_token=match_token(league.league_id, match.match_id, match.attempt),
        attempt=match.attempt,
        # After this the conductor no longer waits for the answer (``start_call_budget``): a
        # referee that reads the call later (stopped, cut off) must not play the match.
        start_by=deadline_in(start_call_budget(league) + START_SLACK),
        **({"deadline_at": format_timestamp(deadline)} if deadline is not None else {}),
        timeouts=timeouts_of(league),
        retry={"retries": league.retries, "delay": league.retry_delay},
        max_invalid_moves=league.max_invalid_moves,
        standings={p: dict(records.get(p, NO_RECORD)) for p in (a_id, b_id)},
        # The referee applies the league's endpoint policy when it connects (docs/protocol.md).
        allowed_networks=list(network_names(league.allowed_networks)),
        allow_service_ports=settings.ENDPOINT_ALLOW_SERVICE_PORTS,
    )


# Seconds added to a start_match's call budget in its ``start_by``: the message is built when the
# match is claimed, a moment before it is sent.
START_SLACK = 2.0


def start_call_budget(league: League) -> float:
    """The longest the conductor waits for the answer to one start_match, retries included."""
    return league.default_timeout * (league.retries + 1) + league.retry_delay * league.retries


def dispatch_of(
    league: League,
    match: MatchToStart,
    referee: Referee,
    records: Records | None = None,
    deadline: datetime | None = None,
) -> Dispatch:
    message = start_match_message(league, match, referee, records, deadline)
    return Dispatch(
        match.pk,
        match.match_id,
        referee.pk,
        referee.referee_id,
        match.attempt,
        Delivery(referee.referee_id, referee.endpoint, "start_match", message),
    )


def busy_referees(league_pk: int) -> dict[int, int]:
    """Matches in play per referee of the league: referee pk → count."""
    rows = (
        Match.objects.filter(league_id=league_pk, status__in=IN_PLAY, referee__isnull=False)
        .order_by()
        .values("referee")
        .annotate(n=Count("id"))
        .values_list("referee", "n")
    )
    return dict(rows)


def expected_referees(league_pk: int, count: int) -> list[str | None]:
    """The endpoints of the referees that ``claim_matches`` is expected to give the next ``count``
    unassigned matches, in order: the same choice (most free capacity, then the oldest referee),
    starting again from full capacity once every referee is busy (a wave of matches ends before
    the next is claimed). None each when the league has no live referee (the LM's built-in one
    plays: it has no endpoint of its own)."""
    referees = list(
        Referee.objects.filter(league_id=league_pk, status__in=LIVE)
        .order_by("id")
        .values_list("pk", "endpoint", "max_concurrent_matches")
    )
    if not referees or count <= 0:
        return [None] * max(count, 0)
    busy = busy_referees(league_pk)
    free = {pk: size - busy.get(pk, 0) for pk, _, size in referees}
    expected: list[str | None] = []
    for _ in range(count):
        if max(free.values()) <= 0:
            free = {pk: size for pk, _, size in referees}
        pk, endpoint, _ = max(referees, key=lambda r: (free[r[0]], -r[0]))
        free[pk] -= 1
        expected.append(endpoint)
    return expected


def scheduled_matches(round_pk: int) -> Any:
    """The round's SCHEDULED matches in order, locked where the database can skip rows another
    conductor holds."""
    candidates = Match.objects.filter(round_id=round_pk, status=Match.Status.SCHEDULED).order_by("id")
    if connection.features.has_select_for_update_skip_locked:
        candidates = candidates.select_for_update(skip_locked=True, of=("self",))
    return candidates


def claim_matches(
    league_pk: int,
    round_pk: int,
    avoid: Iterable[int] = (),
    league: League | None = None,
    rnd: Round | None = None,
    records: Records | None = None,
) -> list[Dispatch]:
    """Assign the round's SCHEDULED matches to referees with free capacity (most free first).

    Returns what to send. ``avoid``: referee pks not to use now (they just failed). ``league``
    and ``rnd``: the league's and the round's rows if the caller has just read them;
    ``records``: the players' ``records_before`` the round, if the caller has them.
    """
    avoid = set(avoid)
    with transaction.atomic():
        if league is None:
            league = League.objects.get(pk=league_pk)
        live = Referee.objects.select_for_update().filter(league_id=league_pk, status__in=LIVE).order_by("id")
        referees = [r for r in live if r.pk not in avoid]
        if not referees:
            return []
        for referee in referees:
            referee.league = league  # for its LM token, without a join (and lock) per claim
        busy = busy_referees(league_pk)
        free = {r.pk: r.max_concurrent_matches - busy.get(r.pk, 0) for r in referees}
        capacity = sum(max(0, n) for n in free.values())
        if capacity <= 0:
            return []
        rows = list(
            scheduled_matches(round_pk).values_list(
                "pk",
                "match_id",
                "game_type",
                "attempt",
                "player_a__player_id",
                "player_a__endpoint",
                "player_b__player_id",
                "player_b__endpoint",
                # Not sent: a match with an unreachable player is decided instead.
                "player_a__unreachable_since",
                "player_b__unreachable_since",
            )[:capacity]
        )
        lost = [row[0] for row in rows if row[8] is not None or row[9] is not None]
        if lost:
            decide_unreachable(round_pk, lost)
            rows = [row for row in rows if row[0] not in lost]
        if not rows:
            return []
        if rnd is None or rnd.pk != round_pk:
            rnd = Round.objects.get(pk=round_pk)
        # Claimed, each is one attempt further than its row says.
        matches = [
            MatchToStart(pk, match_id, game_type, attempt + 1, rnd, (a_id, a_endpoint), (b_id, b_endpoint))
            for pk, match_id, game_type, attempt, a_id, a_endpoint, b_id, b_endpoint, *_unreachable in rows
        ]
        now = timezone.now()
        deadline = now + timedelta(seconds=league.match_deadline)
        chosen: dict[int, list[MatchToStart]] = {}
        for match in matches:
            referee = max(referees, key=lambda r: (free[r.pk], -r.pk))
            if free[referee.pk] <= 0:
                break
            free[referee.pk] -= 1
            chosen.setdefault(referee.pk, []).append(match)
        by_pk = {r.pk: r for r in referees}
        if records is None:
            records = records_before(rnd, (p for m in matches for p in (m.player_a[0], m.player_b[0])))
        claimed: list[Dispatch] = []
        events: list[EventValues] = []
        for referee_pk, group in chosen.items():
            referee = by_pk[referee_pk]
            # One UPDATE per referee; the rows are ours (locked, or SQLite's single writer).
            Match.objects.filter(pk__in=[m.pk for m in group]).update(
                status=Match.Status.ASSIGNED,
                referee=referee,
                attempt=F("attempt") + 1,
                assigned_at=now,
                deadline_at=deadline,
            )
            for match in group:
                events.append(
                    event_values(
                        league,
                        "STATE",
                        "match_assigned",
                        agent=referee.referee_id,
                        match_id=match.match_id,
                        payload={"attempt": match.attempt, "deadline_at": deadline.isoformat()},
                    )
                )
                claimed.append(dispatch_of(league, match, referee, records, deadline))
        append_events(events)
    return claimed


def stale_assignments(
    league_pk: int, older_than: float, skip: Iterable[int] = (), skip_referees: Iterable[int] = ()
) -> list[Dispatch]:
    """ASSIGNED matches whose start_match nobody is sending any more (a conductor died
    between claiming and hearing back; a call that may have got through, kept with its referee):
    resend to the same referee (start_match is idempotent), unless it is suspended (the prober
    lets it back once it answers) or in ``skip_referees`` (cooling down after a failure)."""
    league = League.objects.get(pk=league_pk)
    cutoff = timezone.now() - timedelta(seconds=older_than)
    matches = (
        Match.objects.filter(
            league_id=league_pk, status=Match.Status.ASSIGNED, assigned_at__lt=cutoff, referee__status__in=LIVE
        )
        .exclude(pk__in=set(skip))
        .exclude(referee_id__in=set(skip_referees))
        .select_related("round", "player_a", "player_b", "referee__league")
    )
    return [
        replace(dispatch_of(league, MatchToStart.of(m), m.referee, deadline=m.deadline_at), sent_before=True)
        for m in matches  # (each has a referee: the filter on its status)
    ]


def is_accepted(outcome: str, reply: dict[str, Any] | None) -> bool:
    return outcome == "ok" and str((reply or {}).get("status", "")).upper() == "ACCEPTED"


def start_running(accepted: list[Dispatch]) -> set[int]:
    """ASSIGNED → RUNNING for each accepted match still in the assignment it was accepted for
    (same referee, same attempt); the pks started: those moved, and those already FINISHED in
    that assignment (reported before this call; each still gets its ``match_started`` row). A
    match released or reassigned meanwhile does not match and stays as it is. In the caller's
    transaction: the rows read are locked (PostgreSQL) or SQLite's writer lock is held, so none
    changes between the read and the update."""
    # One IN list, the assignment compared here: an OR of one (pk, referee, attempt) term per
    # match costs Django and SQLite far more to build and plan than the rows it reads.
    wanted = {d.match_pk: (d.referee_pk, d.attempt) for d in accepted}
    # Locked in id order, as ``actions.record_results`` locks the matches it records: the reports
    # of a batch's first matches often come in before the batch's start_match calls are all
    # answered, and two transactions locking the same rows in different orders deadlock on
    # PostgreSQL (the one rolled back was this one: a whole batch's start_match and
    # match_started rows were lost).
    rows = (
        Match.objects.select_for_update(of=("self",))
        .filter(pk__in=wanted, status__in=(Match.Status.ASSIGNED, Match.Status.FINISHED))
        .order_by("pk")
        .values_list("pk", "status", "referee_id", "attempt")
    )
    started: set[int] = set()
    moved: set[int] = set()
    for pk, status, referee_pk, attempt in rows:
        if wanted[pk] == (referee_pk, attempt):
            started.add(pk)  # a match already reported (FINISHED) was started all the same
            if status == Match.Status.ASSIGNED:
                moved.add(pk)
    if moved:
        Match.objects.filter(pk__in=moved).update(status=Match.Status.RUNNING)
    return started


def settle_starts(
    league: League, outcomes: list[tuple[Dispatch, str, dict[str, Any] | None]], sent_at: datetime | None = None
) -> set[int]:
    """Record a batch of start_match calls in one transaction: the OUT rows (one insert, each
    with the batch's ``sent_at``), and ASSIGNED → RUNNING for each accepted match still in that
    assignment.

    Returns the pks started (moved to RUNNING, or already FINISHED in that assignment: its
    report came first); each has its ``match_started`` row. Refused or failed ones are left to
    the caller.
    """
    accepted = {d.match_pk: d for d, outcome, reply in outcomes if is_accepted(outcome, reply)}
    with transaction.atomic():
        rows = [delivery_row(league, d.delivery, outcome, reply, sent_at) for d, outcome, reply in outcomes]
        moved: set[int] = set()
        if accepted:
            moved = start_running(list(accepted.values()))
            # Accepting is not succeeding: failures reset only when the referee reports (record_result).
            Referee.objects.filter(pk__in={d.referee_pk for d in accepted.values()}, status__in=LIVE).update(
                last_seen_at=timezone.now(), status=AgentStatus.ACTIVE
            )
        live = []
        for pk in sorted(moved):
            d = accepted[pk]
            rows.append(
                event_values(
                    league,
                    "STATE",
                    "match_started",
                    agent=d.referee_id,
                    match_id=d.match_id,
                    payload={"attempt": d.attempt},
                )
            )
            message = d.delivery.message
            news = {
                "match_id": d.match_id,
                "round_id": message["round_id"],
                "referee_id": d.referee_id,
                "attempt": d.attempt,
                "player_A_id": message["player_A_id"],
                "player_B_id": message["player_B_id"],
            }
            live.append((league.league_id, "match_started", news))
        append_events(rows)
        broadcast_all(live)
    return moved


def referee_cooldown(league: League, failures: int, base: float = 1.0) -> float:
    """Seconds a referee gets no match after its ``failures``-th failure in a row: doubling from
    ``base`` (or the league's retry delay, if longer), at most ``COOLDOWN_MAX``."""
    return min(COOLDOWN_MAX, max(league.retry_delay, base) * 2 ** max(0, failures - 1))


def referee_failed(referee_pk: int, reason: str, *, silent: bool = False) -> tuple[bool, int]:
    """Count a failure; SUSPEND after ``SUSPEND_AFTER`` in a row. Returns (suspended now,
    failures in a row). A referee suspended here is marked unreachable: the conductor probes it
    and lets it back in once it answers (``restore_agent``). The matches it holds are left to
    their deadline either way: it may have reached their outcome already (a referee writes an
    outcome down, reports it once it is back and tells it once recorded), and a match played
    once is not played again for nothing.

    ``silent``: it took a start_match and gave no reply in time (stopped or cut off), or did
    not answer a ping while it held matches. It is suspended at once and gets no new match
    until it answers a ping again; else it would be given a match in most rounds, each waiting
    a call budget before going elsewhere."""
    with transaction.atomic():
        referee = Referee.objects.select_for_update().select_related("league").get(pk=referee_pk)
        referee.failures += 1
        suspend = (silent or referee.failures >= SUSPEND_AFTER) and referee.status in LIVE
        fields = ["failures", "status"]
        if suspend:
            referee.status = AgentStatus.SUSPENDED
            referee.unreachable_since = timezone.now()
            referee.unreachable_reason = reason[:300]
            fields += ["unreachable_since", "unreachable_reason"]
        referee.save(update_fields=fields)
        record_event(
            referee.league,
            "STATE",
            "referee_suspended" if suspend else "referee_failed",
            agent=referee.referee_id,
            payload={"reason": reason, "failures": referee.failures},
        )
        if suspend and silent:
            log.warning("referee %s suspended until it answers a ping: %s", referee.referee_id, reason)
        elif suspend:
            log.warning("referee %s suspended after %d failures: %s", referee.referee_id, referee.failures, reason)
    return suspend, referee.failures


def release_match(match_pk: int, referee_pk: int | None, attempt: int, reason: str) -> bool:
    """Give a match back to the pool (SCHEDULED, no referee) if it is still that assignment."""
    with transaction.atomic():
        match = Match.objects.select_for_update().filter(pk=match_pk).first()
        if match is None or match.referee_id != referee_pk or match.attempt != attempt or match.status not in IN_PLAY:
            return False
        old = match.referee.referee_id if match.referee else EMBEDDED_REFEREE
        match.status = Match.Status.SCHEDULED
        match.referee = None
        match.deadline_at = None
        match.save(update_fields=["status", "referee", "deadline_at"])
        record_event(
            match.league,
            "STATE",
            "match_released",
            agent=old,
            match_id=match.match_id,
            payload={"attempt": attempt, "reason": reason},
        )
    return True


@dataclass(frozen=True)
class InPlay:
    pk: int
    status: str
    referee_pk: int | None
    referee_id: str | None
    attempt: int
    assigned_at: datetime | None
    deadline_at: datetime | None
    match_id: str = ""


def in_play_matches(league_pk: int) -> list[InPlay]:
    """The league's ASSIGNED and RUNNING matches, in id order: what supervision looks at."""
    # Not Match's default ordering (league, round number): it joins the rounds and leads SQLite
    # to walk every match of the league in order instead of the (league, status) index. Sorted here.
    rows = (
        Match.objects.filter(league_id=league_pk, status__in=IN_PLAY)
        .order_by()
        .values_list(
            "pk", "status", "referee_id", "referee__referee_id", "attempt", "assigned_at", "deadline_at", "match_id"
        )
    )
    return sorted((InPlay(*row) for row in rows), key=lambda row: row.pk)


def referee_capacity(league_pk: int) -> int:
    """Matches the league's live referees can run at once."""
    # Unordered: Referee's default ordering (league, id) would join the league to sort a sum.
    sizes = Referee.objects.filter(league_id=league_pk, status__in=LIVE).order_by()
    return sum(sizes.values_list("max_concurrent_matches", flat=True))


def has_live_referee(league_pk: int) -> bool:
    return Referee.objects.filter(league_id=league_pk, status__in=LIVE).exists()
