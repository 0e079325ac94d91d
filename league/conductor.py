"""The conductor: drives leagues from closed registration to champion (docs/architecture.md).

A long-running async worker (``manage.py runleague``). The database is the single source of
truth: every step below is a state transition in its own transaction, recorded in the Event
log, so a conductor killed at any moment and started again (anywhere) carries on.

Per league, each ``tick`` does the next due step:

- REGISTERING, window closed: READY when ``min_players`` registered (``actions.start_league``);
  below the minimum the league stays REGISTERING (one ``start_refused`` event says why) so an
  admin can reopen the window; it is never started short-handed.
- READY: store the round-robin schedule (Rounds + Matches) and go RUNNING.
- RUNNING, current round PENDING: ROUND_ANNOUNCEMENT to every player, round ANNOUNCED.
- ANNOUNCED: claim SCHEDULED matches for referees with free capacity and send ``start_match``;
  a REJECTED or unreachable referee gives the match back (and counts one failure, then gets no
  match for a cooldown that doubles; SUSPENDED after ``SUSPEND_AFTER`` in a row, probed, and
  ACTIVE again once it answers); a match not reported by its ``deadline_at``, whose referee
  stopped answering pings, or that its referee no longer knows (a restarted referee: E006 from
  ``get_match_state``, no failure counted) goes back to SCHEDULED and is dispatched again
  (attempt + 1). A match with a player marked unreachable is decided at once, a technical loss
  for that player (``decide_unreachable``). ``record_result`` only accepts the currently
  assigned referee, so a late report from the old one is refused and nothing counts twice.
- every match FINISHED (round PLAYED): LEAGUE_STANDINGS_UPDATE, then ROUND_COMPLETED, to every
  player; round COMPLETED. When the next round follows at once (no ``round_pause``), each
  player's chain goes on with the next ROUND_ANNOUNCEMENT while, on the database thread, the
  round is COMPLETED with its notices owed (``Round.notices_owed``), the next ANNOUNCED and its
  first matches claimed; the matches start once every player has had its chain (or after
  ``notify_patience``: a slow player's chain goes on in the background), and the notices are
  recorded (no longer owed) as they play.
- last round COMPLETED: LEAGUE_COMPLETED to every player and referee; league COMPLETED with
  its champion.

Notifications are sent concurrently and at least once (a conductor that dies between sending and
recording sends again; one that finds a round's notices owed sends the whole boundary again
before anything else of that league); a player that cannot be reached is logged and never
blocks the league: after ``UNREACHABLE_AFTER`` failed calls in a row it is marked unreachable,
sent nothing more, and probed until it answers. A database outage is waited out (``run``).
Claims lock the candidate matches with ``select_for_update(skip_locked=True)`` and the league's
referees with ``select_for_update()`` (capacity is counted under that lock), so two conductors
never dispatch the same match nor overfill a referee. SQLite has no row locks, but its writers are
serialised (IMMEDIATE transactions), which gives the same guarantee.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import math
import os
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from typing import Any, TypeVar

import orjson
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections, connection, connections, transaction
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from league import actions, queries
from league.auth import lm_token, lm_token_for
from league.endpoints import ConnectPolicy
from league.events import EventValues, append_events, broadcast, broadcast_all, event_values, record_event
from league.models import AgentStatus, Event, League, Match, MatchResult, Player, Referee, Round
from league.prepared import Prepared, update_row
from league.schedule import schedule_matches
from league.standings import RESULT_FIELDS
from leagueproto.client import AgentClient, CallFailed, RetryPolicy
from leagueproto.envelope import make_message, new_conversation_ids
from leagueproto.errors import ErrorCode
from leagueproto.jsonutil import dumps
from leagueproto.scoring import ResultRow, StandingsTable, id_sort_key, record_field

log = logging.getLogger("league.conductor")
T = TypeVar("T")

SENDER = "league_manager"
# Consecutive failures before a referee is SUSPENDED. After each failure the referee gets no match
# for a cooldown that doubles (``referee_cooldown``), so it takes a few seconds of failing to be
# suspended, not one failed batch; a suspended referee is probed until it answers again.
SUSPEND_AFTER = 4
COOLDOWN_MAX = 30.0  # seconds: the longest a failing referee is left alone (and probe backoff cap)
# Consecutive calls to a player that fail at the transport level (no reply in time, refused
# connection, a reply over the size limit) before it is marked unreachable.
UNREACHABLE_AFTER = 2
PROBE_FIRST = 1.0  # seconds before the first probe of an unreachable agent; then doubling
PROBE_MAX = 5.0  # seconds between probes at most: an agent back is back in play within this
# What a lost database connection or a locked SQLite file raises: an outage to ride out, not a bug.
DB_OUTAGE = (OperationalError, InterfaceError)
LIVE = (AgentStatus.REGISTERED, AgentStatus.ACTIVE)
IN_PLAY = (Match.Status.ASSIGNED, Match.Status.RUNNING)
DONE = (Match.Status.FINISHED, Match.Status.CANCELLED)
WORKING = (League.Status.REGISTERING, League.Status.READY, League.Status.RUNNING)
EMBEDDED_REFEREE = "EMBEDDED"  # the LM's built-in referee, used when none is registered
EMBEDDED_CAPACITY = 8  # matches the built-in referee runs at once per conductor


@dataclass(frozen=True)
class Delivery:
    """One message to one agent."""

    agent_id: str
    endpoint: str
    method: str
    message: dict[str, Any]


@dataclass(frozen=True)
class Dispatch:
    """A claimed match and the start_match message for its referee."""

    match_pk: int
    match_id: str
    referee_pk: int
    referee_id: str
    attempt: int
    delivery: Delivery


# -- helpers --------------------------------------------------------------------------------
def retry_policy(league: League) -> RetryPolicy:
    return RetryPolicy(retries=league.retries, delay=league.retry_delay)


def match_token(league_id: str, match_id: str, attempt: int) -> str:
    """The per-match bearer a referee shows the players: derived, so a resent
    start_match carries the same token, and new for each attempt."""
    key = settings.SECRET_KEY.encode()
    return hmac.new(key, f"match:{league_id}:{match_id}:{attempt}".encode(), hashlib.sha256).hexdigest()


def players_of(league: League) -> list[Player]:
    players = list(league.players.exclude(status=AgentStatus.REMOVED).select_related("league"))
    return sorted(players, key=lambda p: id_sort_key(p.player_id))


def message_to(agent: Player | Referee, message_type: str, **fields: Any) -> dict[str, Any]:
    return make_message(message_type, SENDER, auth_token=lm_token_for(agent), **fields)


@dataclass(frozen=True, slots=True)
class Recipient:
    """A player as a round's notifications need it: no model instance (and no League per row)."""

    agent_id: str
    endpoint: str
    lm_token: str
    reachable: bool = True  # False: marked unreachable, sent nothing until it answers a probe


# The queries of every round (boundary, announcement, claims), compiled once (league/prepared.py).
_RECIPIENTS = Prepared(
    lambda league_pk: (
        Player.objects.filter(league_id=league_pk)
        .exclude(status=AgentStatus.REMOVED)
        .order_by()
        .values_list("player_id", "endpoint", "token_hash", "display_name", "unreachable_since")
    ),
    -701,
)
_ROUND_MATCHES = Prepared(
    lambda round_pk: (
        Match.objects.filter(round_id=round_pk)
        .order_by("id")
        .values_list("match_id", "game_type", "player_a__player_id", "player_b__player_id", "referee__endpoint")
    ),
    -701,
)
_NEXT_ROUND = Prepared(
    lambda league_pk, number: Round.objects.filter(league_id=league_pk, number__gt=number).order_by("number")[:1],
    -701,
    1_000_702,  # positive: ``number`` is a PositiveIntegerField, and the ORM drops ``> -702``
)
_ROUND = Prepared(lambda round_pk: Round.objects.filter(pk=round_pk).order_by()[:1], -701)
# Read by every ``next_round`` (each tick of a round_pause among them).
_OWED_ROUND = Prepared(
    lambda league_pk: Round.objects.filter(league_id=league_pk, notices_owed=True).order_by("number")[:1], -701
)
# A round and its league, locked (PostgreSQL) until the transition commits: once a round.
_LOCKED_ROUND = Prepared(
    lambda round_pk: Round.objects.select_for_update().select_related("league").filter(pk=round_pk).order_by()[:1],
    -701,
)
_FINISHED_IN_ROUND = Prepared(
    lambda round_pk: (
        Match.objects.filter(round_id=round_pk, status=Match.Status.FINISHED)
        .order_by()
        .values("round_id")
        .annotate(n=Count("id"))
        .values_list("n")
    ),
    -701,
)
# One round's results, found from the round (its unique league + number index, then its
# matches): filtering the results by league and joining out to the round's number made SQLite
# scan every result of the league so far, twice a round (22 ms a query by the last round of a
# 100-player league, against 0.6 ms this way).
_ROUND_RESULTS = Prepared(
    lambda league_pk, number: (
        MatchResult.objects.filter(match__round__league_id=league_pk, match__round__number=number)
        .order_by()
        .values_list(*RESULT_FIELDS)
    ),
    -701,
    1_000_702,
)


def finished_in_round(round_pk: int) -> int:
    rows = _FINISHED_IN_ROUND.rows(round_pk)
    return rows[0][0] if rows else 0


def recipients(league: League, names: dict[str, str] | None = None) -> list[Recipient]:
    """The players of ``players_of`` (not REMOVED, in id order), from one query of a few columns;
    their display names go into ``names`` when given (the standings need them)."""
    found = []
    for player_id, endpoint, token_hash, display_name, unreachable_since in _RECIPIENTS.rows(league.pk):
        token = lm_token(league.league_id, player_id, token_hash)
        found.append(Recipient(player_id, endpoint, token, unreachable_since is None))
        if names is not None:
            names[player_id] = display_name
    return sorted(found, key=lambda r: id_sort_key(r.agent_id))


def notices(players: list[Recipient], method: str, message_type: str, **fields: Any) -> list[Delivery]:
    """The same message to every player, each with its own envelope (token, conversation id);
    ``fields`` (e.g. a round's standings) are shared, not copied. Players marked unreachable are
    left out (the same ones from every batch built from the same list: batches stay aligned)."""
    players = [p for p in players if p.reachable]
    ids = new_conversation_ids(len(players))
    return [
        Delivery(
            p.agent_id,
            p.endpoint,
            method,
            make_message(message_type, SENDER, conversation_id=cid, auth_token=p.lm_token, **fields),
        )
        for p, cid in zip(players, ids, strict=True)
    ]


def current_round(league: League) -> Round | None:
    return league.rounds.exclude(status=Round.Status.COMPLETED).order_by("number").first()


# -- state transitions (each its own transaction) -------------------------------------------
def check_registration(league_pk: int) -> str | None:
    """Start a REGISTERING league whose window has closed, if it has enough players."""
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
        if not league.rounds.exists():
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
    busy = dict(_BUSY_REFEREES.rows(league_pk))
    free = {pk: size - busy.get(pk, 0) for pk, _, size in referees}
    expected: list[str | None] = []
    for _ in range(count):
        if max(free.values()) <= 0:
            free = {pk: size for pk, _, size in referees}
        pk, endpoint, _ = max(referees, key=lambda r: (free[r[0]], -r[0]))
        free[pk] -= 1
        expected.append(endpoint)
    return expected


def round_matches(rnd: Round) -> list[dict[str, Any]]:
    """The round's matches as ROUND_ANNOUNCEMENT lists them (in id order), each with the
    ``referee_endpoint`` the course's announcement carries: its referee's, once assigned, else the
    one it is expected to get (``expected_referees``)."""
    rows = _ROUND_MATCHES.rows(rnd.pk)
    expected = iter(expected_referees(rnd.league_id, sum(1 for row in rows if row[4] is None)))
    return [
        {
            "match_id": match_id,
            "game_type": game_type,
            "player_A_id": a,
            "player_B_id": b,
            "referee_endpoint": endpoint if endpoint is not None else next(expected),
        }
        for match_id, game_type, a, b, endpoint in rows
    ]


def announcement(
    league: League,
    rnd: Round,
    matches: list[dict[str, Any]] | None = None,
    players: list[Recipient] | None = None,
) -> list[Delivery]:
    """ROUND_ANNOUNCEMENT of ``rnd`` to every player (``players``: the recipients, if the caller has them)."""
    if matches is None:
        matches = round_matches(rnd)
    fields = {"league_id": league.league_id, "round_id": rnd.number, "matches": matches}
    return notices(
        players if players is not None else recipients(league), "notify_round", "ROUND_ANNOUNCEMENT", **fields
    )


def pausing_between_rounds(league: League, rnd: Round) -> bool:
    """True while the league's round_pause since the previous round's completion has not passed."""
    if league.round_pause <= 0 or rnd.number <= 1:
        return False
    previous = Round.objects.filter(league_id=league.pk, number=rnd.number - 1).values_list("completed_at", flat=True)
    done_at = previous.first()
    return done_at is not None and (timezone.now() - done_at).total_seconds() < league.round_pause


def _locked_round(round_pk: int) -> Round:
    """The round with its league, locked for a transition (in the caller's transaction)."""
    rnd = _LOCKED_ROUND.first(round_pk)
    if rnd is None:
        raise Round.DoesNotExist(f"round {round_pk}")
    return rnd


def mark_round_announced(round_pk: int, matches: list[dict[str, Any]] | None = None) -> Round:
    """PENDING → ANNOUNCED; the round as it stands after (announced now, or as it was when not
    PENDING). ``matches``: the round's ``round_matches`` if the caller has them."""
    with transaction.atomic():
        rnd = _locked_round(round_pk)
        if rnd.status != Round.Status.PENDING:
            return rnd
        rnd.status = Round.Status.ANNOUNCED
        rnd.announced_at = timezone.now()
        update_row(Round, rnd.pk, status=rnd.status, announced_at=rnd.announced_at)
        update_row(League, rnd.league_id, current_round=rnd.number)
        league = rnd.league
        append_events([event_values(league, "STATE", "round_started", payload={"round_id": rnd.number})])
        if matches is None:
            matches = round_matches(rnd)
        broadcast(
            league.league_id,
            "round_started",
            {
                "round_id": rnd.number,
                "matches": [
                    {"match_id": m["match_id"], "player_A_id": m["player_A_id"], "player_B_id": m["player_B_id"]}
                    for m in matches
                ],
            },
        )
    return rnd


_NO_RECORD = {"wins": 0, "losses": 0, "draws": 0}


@dataclass(frozen=True)
class _Records:
    key: tuple[int, str]  # (round pk, announced_at)
    number: int
    records: dict[str, dict[str, int]]


_ROUND_RECORDS: dict[int, _Records] = {}  # league pk → the records of its latest round asked for


def round_records(rnd: Round) -> dict[str, dict[str, int]]:
    """Each player's {wins, losses, draws} from the rounds before ``rnd``: the current records
    while ``rnd`` is played (a round starts once the previous one is complete, so they are final).
    Once per round and process; when the previous round's records are at hand, only that round's
    results are read and added to a copy of them (not every result since round 1). Technical
    losses count as losses."""
    key = (rnd.pk, rnd.announced_at.isoformat() if rnd.announced_at else "")
    cached = _ROUND_RECORDS.get(rnd.league_id) if rnd.announced_at else None
    if cached is not None and cached.key == key:
        return cached.records
    if cached is not None and cached.number == rnd.number - 1:
        records = {player_id: dict(record) for player_id, record in cached.records.items()}
        rows = _ROUND_RESULTS.rows(rnd.league_id, rnd.number - 1)
    else:
        records = {}
        rows = (
            MatchResult.objects.filter(league_id=rnd.league_id, match__round__number__lt=rnd.number)
            .order_by()
            .values_list(*RESULT_FIELDS)
        )
    for row in rows:
        result = ResultRow(*row)
        for player_id, points in ((result.player_a, result.points_a), (result.player_b, result.points_b)):
            record = records.setdefault(player_id, dict(_NO_RECORD))
            record[record_field(points)] += 1
    if rnd.announced_at:
        if len(_ROUND_RECORDS) > 256:
            _ROUND_RECORDS.clear()
        _ROUND_RECORDS[rnd.league_id] = _Records(key, rnd.number, records)
    return records


def match_standings(match: Match) -> dict[str, dict[str, int]]:
    """START_MATCH's ``standings``: the two players' records (the referee passes each its own)."""
    return _standings_of(round_records(match.round), match.player_a.player_id, match.player_b.player_id)


def _standings_of(records: dict[str, dict[str, int]], *player_ids: str) -> dict[str, dict[str, int]]:
    return {player_id: dict(records.get(player_id, _NO_RECORD)) for player_id in player_ids}


@dataclass(frozen=True, slots=True)
class MatchToStart:
    """What START_MATCH says of a match: a few columns of its row and its players' (a claim
    reads them as values, with no model instance per match, round and player)."""

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
            match.pk, match.match_id, match.game_type, match.attempt, match.round, (a.player_id, a.endpoint),
            (b.player_id, b.endpoint),
        )  # fmt: skip


def start_match_message(
    league: League, match: MatchToStart, referee: Referee, records: dict[str, dict[str, int]] | None = None
) -> dict[str, Any]:
    """``records``: ``round_records(match.rnd)``, when the caller has them (a claim reads them once)."""
    (a_id, a_endpoint), (b_id, b_endpoint) = match.player_a, match.player_b
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
        timeouts={
            "join": league.join_timeout,
            "move": league.move_timeout,
            "game_over": league.game_over_timeout,
            "report": league.report_timeout,
            "default": league.default_timeout,
        },
        retry={"retries": league.retries, "delay": league.retry_delay},
        max_invalid_moves=league.max_invalid_moves,
        standings=_standings_of(round_records(match.rnd) if records is None else records, a_id, b_id),
    )


def _dispatch_of(
    league: League, match: MatchToStart, referee: Referee, records: dict[str, dict[str, int]] | None = None
) -> Dispatch:
    message = start_match_message(league, match, referee, records)
    return Dispatch(
        match.pk,
        match.match_id,
        referee.pk,
        referee.referee_id,
        match.attempt,
        Delivery(referee.referee_id, referee.endpoint, "start_match", message),
    )


# What START_MATCH needs of a claimed match (``MatchToStart``; the round is read once per claim).
_START_COLUMNS = (
    "pk", "match_id", "game_type", "attempt",
    "player_a__player_id", "player_a__endpoint", "player_b__player_id", "player_b__endpoint",
    # Not sent: a match with an unreachable player is decided instead (``decide_unreachable``).
    "player_a__unreachable_since", "player_b__unreachable_since",
)  # fmt: skip


# The league's live referees, locked (PostgreSQL) until the claim commits.
_LIVE_REFEREES = Prepared(
    lambda league_pk: Referee.objects.select_for_update().filter(league_id=league_pk, status__in=LIVE).order_by("id"),
    -701,
)
# Matches in play per referee of the league: (referee pk, count).
_BUSY_REFEREES = Prepared(
    lambda league_pk: (
        Match.objects.filter(league_id=league_pk, status__in=IN_PLAY, referee__isnull=False)
        .order_by()
        .values("referee")
        .annotate(n=Count("id"))
        .values_list("referee", "n")
    ),
    -701,
)
_CANDIDATES: dict[int, Prepared[Match]] = {}


def _candidates(limit: int) -> Prepared[Match]:
    """The round's first ``limit`` SCHEDULED matches with what START_MATCH needs, locked where
    the database can skip rows another conductor holds. One shape per limit (it is in the SQL);
    the limit is the league's referee capacity, which seldom changes."""

    def build(round_pk: int) -> QuerySet[Match]:
        candidates = Match.objects.filter(round_id=round_pk, status=Match.Status.SCHEDULED).order_by("id")
        if connection.features.has_select_for_update_skip_locked:
            candidates = candidates.select_for_update(skip_locked=True, of=("self",))
        return candidates.values_list(*_START_COLUMNS)[:limit]

    found = _CANDIDATES.get(limit)
    if found is None:
        if len(_CANDIDATES) > 64:
            _CANDIDATES.clear()
        found = _CANDIDATES[limit] = Prepared(build, -701)
    return found


# The claim's assignment and settle_starts' two updates name a varying number of matches, so the
# ORM built each anew for every batch (about 1 ms of CPU a query here, more than running it):
# they are written out, for SQLite and PostgreSQL alike.


def _assign(match_pks: list[int], referee_pk: int, now: Any, deadline: Any) -> None:
    """The matches are ASSIGNED to the referee, one attempt more (one UPDATE)."""
    q = connection.ops.quote_name
    meta = Match._meta
    status, referee, attempt = (q(meta.get_field(name).column) for name in ("status", "referee", "attempt"))
    assigned_at, deadline_at = meta.get_field("assigned_at"), meta.get_field("deadline_at")
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {q(meta.db_table)} SET {status} = %s, {referee} = %s, {attempt} = {attempt} + 1,"
            f" {q(assigned_at.column)} = %s, {q(deadline_at.column)} = %s"
            f" WHERE {q(meta.pk.column)} IN ({', '.join(['%s'] * len(match_pks))})",
            [
                Match.Status.ASSIGNED,
                referee_pk,
                assigned_at.get_db_prep_save(now, connection),
                deadline_at.get_db_prep_save(deadline, connection),
                *match_pks,
            ],
        )


def claim_matches(
    league_pk: int,
    round_pk: int,
    avoid: Iterable[int] = (),
    league: League | None = None,
    rnd: Round | None = None,
) -> list[Dispatch]:
    """Assign the round's SCHEDULED matches to referees with free capacity (most free first).

    Returns what to send. ``avoid``: referee pks not to use now (they just failed). ``league``
    and ``rnd``: the league's and the round's rows if the caller has just read them.
    """
    avoid = set(avoid)
    with transaction.atomic():
        if league is None:
            league = League.objects.get(pk=league_pk)
        referees = [r for r in _LIVE_REFEREES.objects(league_pk) if r.pk not in avoid]
        if not referees:
            return []
        for referee in referees:
            referee.league = league  # for its LM token, without a join (and lock) per claim
        busy = dict(_BUSY_REFEREES.rows(league_pk))
        free = {r.pk: r.max_concurrent_matches - busy.get(r.pk, 0) for r in referees}
        capacity = sum(max(0, n) for n in free.values())
        if capacity <= 0:
            return []
        rows = _candidates(capacity).rows(round_pk)
        # Matches of a player marked unreachable are decided here, never sent to a referee.
        lost = [row[0] for row in rows if row[8] is not None or row[9] is not None]
        if lost:
            decide_unreachable(round_pk, lost)
            rows = [row for row in rows if row[0] not in lost]
        if not rows:
            return []
        if rnd is None or rnd.pk != round_pk:
            rnd = _ROUND.first(round_pk)
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
        records = round_records(rnd)
        claimed: list[Dispatch] = []
        events: list[EventValues] = []
        for referee_pk, group in chosen.items():
            referee = by_pk[referee_pk]
            # One UPDATE per referee; the rows are ours (locked, or SQLite's single writer).
            _assign([m.pk for m in group], referee.pk, now, deadline)
            for match in group:
                events.append(
                    event_values(
                        league,
                        "STATE",
                        "match_assigned",
                        agent=referee.referee_id,
                        match_id=match.match_id,
                        payload={"attempt": match.attempt, "deadline_at": deadline.isoformat()},
                    )  # fmt: skip
                )
                claimed.append(_dispatch_of(league, match, referee, records))
        append_events(events)
    return claimed


def stale_assignments(league_pk: int, older_than: float, skip: Iterable[int] = ()) -> list[Dispatch]:
    """ASSIGNED matches whose start_match nobody is sending any more (a conductor died
    between claiming and hearing back): resend to the same referee (start_match is idempotent)."""
    league = League.objects.get(pk=league_pk)
    cutoff = timezone.now() - timedelta(seconds=older_than)
    matches = (
        Match.objects.filter(league_id=league_pk, status=Match.Status.ASSIGNED, assigned_at__lt=cutoff)
        .exclude(pk__in=set(skip))
        .select_related("round", "player_a", "player_b", "referee__league")
    )
    return [_dispatch_of(league, MatchToStart.of(m), m.referee) for m in matches if m.referee is not None]


def is_accepted(outcome: str, reply: dict[str, Any] | None) -> bool:
    return outcome == "ok" and str((reply or {}).get("status", "")).upper() == "ACCEPTED"


def _start_running(accepted: list[Dispatch]) -> set[int]:
    """ASSIGNED → RUNNING for each accepted match still in the assignment it was accepted for
    (same referee, same attempt): one conditional UPDATE; the pks it moved. A match released or
    reassigned meanwhile does not match its condition and stays as it is."""
    q = connection.ops.quote_name
    meta = Match._meta
    pk, status = q(meta.pk.column), q(meta.get_field("status").column)
    referee, attempt = q(meta.get_field("referee").column), q(meta.get_field("attempt").column)
    which = " OR ".join([f"({pk} = %s AND {referee} = %s AND {attempt} = %s)"] * len(accepted))
    params: list[Any] = [Match.Status.RUNNING, Match.Status.ASSIGNED]
    for d in accepted:
        params += [d.match_pk, d.referee_pk, d.attempt]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {q(meta.db_table)} SET {status} = %s WHERE {status} = %s AND ({which}) RETURNING {pk}", params
        )
        return {row[0] for row in cursor.fetchall()}


def _referees_seen(referee_pks: set[int], now: Any) -> None:
    """The live referees among ``referee_pks`` are ACTIVE and were seen ``now`` (one UPDATE)."""
    q = connection.ops.quote_name
    meta = Referee._meta
    status, seen = q(meta.get_field("status").column), meta.get_field("last_seen_at")
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {q(meta.db_table)} SET {q(seen.column)} = %s, {status} = %s"
            f" WHERE {q(meta.pk.column)} IN ({', '.join(['%s'] * len(referee_pks))})"
            f" AND {status} IN ({', '.join(['%s'] * len(LIVE))})",
            [seen.get_db_prep_save(now, connection), AgentStatus.ACTIVE, *sorted(referee_pks), *LIVE],
        )


def settle_starts(league: League, outcomes: list[tuple[Dispatch, str, dict[str, Any] | None]]) -> set[int]:
    """Record a batch of start_match calls in one transaction: the OUT rows (one insert), and
    ASSIGNED → RUNNING (one UPDATE) for each accepted match still in that assignment.

    Returns the pks moved to RUNNING. Refused or failed ones are left to the caller.
    """
    accepted = {d.match_pk: d for d, outcome, reply in outcomes if is_accepted(outcome, reply)}
    with transaction.atomic():
        rows = [delivery_row(league, d.delivery, outcome, reply) for d, outcome, reply in outcomes]
        moved: set[int] = set()
        if accepted:
            moved = _start_running(list(accepted.values()))
            # Accepting is not succeeding: failures reset only when the referee reports (record_result).
            _referees_seen({d.referee_pk for d in accepted.values()}, timezone.now())
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
            live.append(
                (
                    "match_started",
                    {
                        "match_id": d.match_id,
                        "round_id": message["round_id"],
                        "referee_id": d.referee_id,
                        "attempt": d.attempt,
                        "player_A_id": message["player_A_id"],
                        "player_B_id": message["player_B_id"],
                    },
                )
            )
        append_events(rows)
        broadcast_all([(league.league_id, event, data) for event, data in live])
    return moved


def unreachable_failure(exc: CallFailed) -> bool:
    """Whether a failed call says the agent is not there: no reply in time, no connection, or a
    reply over the size limit. Any JSON-RPC answer (even an error) comes from a live agent."""
    if exc.rpc_error is not None:
        return False
    return exc.code in (ErrorCode.TIMEOUT_ERROR, ErrorCode.CONNECTION_ERROR) or "too large" in exc.detail


def referee_cooldown(league: League, failures: int, base: float = 1.0) -> float:
    """Seconds a referee gets no match after its ``failures``-th failure in a row: doubling from
    ``base`` (or the league's retry delay, if longer), at most ``COOLDOWN_MAX``."""
    return min(COOLDOWN_MAX, max(league.retry_delay, base) * 2 ** max(0, failures - 1))


def referee_failed(referee_pk: int, reason: str) -> tuple[bool, int]:
    """Count a failure; SUSPEND after ``SUSPEND_AFTER`` in a row (and free its matches). Returns
    (suspended now, failures in a row). A referee suspended here is marked unreachable: the
    conductor probes it and lets it back in once it answers (``restore_agent``)."""
    with transaction.atomic():
        referee = Referee.objects.select_for_update().select_related("league").get(pk=referee_pk)
        referee.failures += 1
        suspend = referee.failures >= SUSPEND_AFTER and referee.status in LIVE
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
        if suspend:
            log.warning("referee %s suspended after %d failures: %s", referee.referee_id, referee.failures, reason)
            for match in Match.objects.filter(referee=referee, status__in=IN_PLAY):
                release_match(match.pk, referee.pk, match.attempt, f"referee {referee.referee_id} suspended")
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
    assigned_at: Any
    deadline_at: Any
    match_id: str = ""


_IN_PLAY = Prepared(
    lambda league_pk: Match.objects.filter(league_id=league_pk, status__in=IN_PLAY).values_list(
        "pk", "status", "referee_id", "referee__referee_id", "attempt", "assigned_at", "deadline_at", "match_id"
    ),
    -701,
)


def in_play_matches(league_pk: int) -> list[InPlay]:
    """The league's ASSIGNED and RUNNING matches (one query, compiled once): what supervision
    looks at, every ``supervise_every`` seconds."""
    return [InPlay(*row) for row in _IN_PLAY.rows(league_pk)]


def database_writable() -> None:
    """Raise the database's error unless a write transaction can begin now (SQLite's IMMEDIATE
    transactions take the write lock at BEGIN; elsewhere this is a round trip)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def league_statuses(league_pks: list[int]) -> list[tuple[int, str, str]]:
    """(pk, league_id, status) of these leagues."""
    return list(League.objects.filter(pk__in=league_pks).values_list("pk", "league_id", "status"))


def has_live_referee(league_pk: int) -> bool:
    return Referee.objects.filter(league_id=league_pk, status__in=LIVE).exists()


def claim_embedded(league_pk: int, round_pk: int, capacity: int) -> list[tuple[int, dict[str, Any]]]:
    """Claim up to ``capacity`` SCHEDULED matches for the built-in referee (RUNNING, no referee)."""
    if capacity <= 0:
        return []
    with transaction.atomic():
        decide_unreachable(round_pk)
        league = League.objects.get(pk=league_pk)
        candidates = Match.objects.filter(round_id=round_pk, status=Match.Status.SCHEDULED).order_by("id")
        if connection.features.has_select_for_update_skip_locked:
            candidates = candidates.select_for_update(skip_locked=True, of=("self",))
        now = timezone.now()
        claimed = []
        for match in candidates.select_related("round", "player_a", "player_b")[:capacity]:
            match.status = Match.Status.RUNNING
            match.referee = None
            match.attempt += 1
            match.assigned_at = now
            match.deadline_at = now + timedelta(seconds=league.match_deadline)
            match.save(update_fields=["status", "referee", "attempt", "assigned_at", "deadline_at"])
            record_event(
                league, "STATE", "match_started", agent=EMBEDDED_REFEREE, match_id=match.match_id,
                payload={"attempt": match.attempt, "embedded": True},
            )  # fmt: skip
            broadcast(
                league.league_id,
                "match_started",
                {
                    "match_id": match.match_id,
                    "round_id": match.round.number,
                    "referee_id": EMBEDDED_REFEREE,
                    "attempt": match.attempt,
                    "player_A_id": match.player_a.player_id,
                    "player_B_id": match.player_b.player_id,
                },
            )
            claimed.append(
                (
                    match.pk,
                    {
                        "match_id": match.match_id,
                        "round_id": match.round.number,
                        "game_type": match.game_type,
                        "attempt": match.attempt,
                        "player_a": match.player_a.player_id,
                        "player_b": match.player_b.player_id,
                        "endpoint_a": match.player_a.endpoint,
                        "endpoint_b": match.player_b.endpoint,
                        "standings": match_standings(match),
                        "timeouts": {
                            "join": league.join_timeout,
                            "move": league.move_timeout,
                            "game_over": league.game_over_timeout,
                            "report": league.report_timeout,
                            "default": league.default_timeout,
                        },
                    },
                )
            )
    return claimed


def record_embedded_result(match_pk: int, attempt: int, result: dict[str, Any], match_log: list[Any]) -> bool:
    """Store the built-in referee's result, once, if the match is still this embedded attempt.

    The same checks and bookkeeping as ``actions.record_result`` for a registered referee.
    """
    with transaction.atomic():
        match = Match.objects.select_for_update().filter(pk=match_pk).first()
        if match is None or match.referee_id is not None or match.attempt != attempt:
            return False
        if match.status != Match.Status.RUNNING or MatchResult.objects.filter(match=match).exists():
            return False
        _store_result(match_pk, result, match_log, EMBEDDED_REFEREE)
    return True


def _store_result(match_pk: int, result: dict[str, Any], match_log: list[Any], by: str) -> None:
    """The result of a match no registered referee reports (the built-in referee's, or one the
    LM decides itself): stored, the match FINISHED, its round PLAYED when it was the last, all
    logged and broadcast. In the caller's transaction, with the match row locked."""
    from league.events import strip_secrets

    match = Match.objects.select_related("league", "player_a", "player_b", "round").get(pk=match_pk)
    league = match.league
    outcome = actions._validated_outcome(match, result)
    now = timezone.now()
    MatchResult.objects.create(
        match=match,
        league=league,
        referee=None,
        details=strip_secrets(result.get("details") or {}),
        log=strip_secrets(match_log),
        report_digest=actions.report_digest(result),
        reported_at=now,
        **outcome,
    )
    match.status = Match.Status.FINISHED
    match.finished_at = now
    match.save(update_fields=["status", "finished_at"])
    unfinished = Match.objects.filter(round=match.round).exclude(status__in=DONE)
    round_played = not unfinished.exists() and match.round.status in (Round.Status.PENDING, Round.Status.ANNOUNCED)
    if round_played:
        Round.objects.filter(pk=match.round.pk).update(status=Round.Status.PLAYED)
        record_event(league, "STATE", "round_played", payload={"round_id": match.round.number})
    record_event(league, "STATE", "match_finished", agent=by, match_id=match.match_id, payload=result)
    broadcast(
        league.league_id,
        "match_finished",
        {
            "match_id": match.match_id,
            "round_id": match.round.number,
            "player_A_id": match.player_a.player_id,
            "player_B_id": match.player_b.player_id,
            "referee_id": by,
            "result": strip_secrets(result),
            "round_played": round_played,
        },
    )


# -- unreachable agents -----------------------------------------------------------------------
# The round's SCHEDULED matches with a player marked unreachable: decided without a referee.
_UNREACHABLE_MATCHES = Prepared(
    lambda round_pk: (
        Match.objects.filter(round_id=round_pk, status=Match.Status.SCHEDULED)
        .filter(Q(player_a__unreachable_since__isnull=False) | Q(player_b__unreachable_since__isnull=False))
        .order_by("id")
        .values_list("pk")
    ),
    -701,
)


def decide_unreachable(round_pk: int, match_pks: list[int] | None = None) -> list[str]:
    """Decide the round's SCHEDULED matches that have a player marked unreachable (those of
    ``match_pks`` when the caller found them): a technical loss for each unreachable player
    (both: both lose), stored at once instead of a referee waiting out its timeouts again. In
    the caller's transaction (a claim's); the match ids."""
    pks = [row[0] for row in _UNREACHABLE_MATCHES.rows(round_pk)] if match_pks is None else match_pks
    decided = []
    for pk in pks:
        match = Match.objects.select_for_update().select_related("player_a", "player_b").filter(pk=pk).first()
        if match is None or match.status != Match.Status.SCHEDULED:
            continue
        match_id, a_id, b_id = match.match_id, match.player_a.player_id, match.player_b.player_id
        gone = [p for p in (match.player_a, match.player_b) if p.unreachable_since is not None]
        if not gone:
            continue  # answered a ping since the query
        lost = [p.player_id for p in gone]
        winner = next((p for p in (a_id, b_id) if p not in lost), None)
        why = "; ".join(
            f"{p.player_id} unreachable since {p.unreachable_since.isoformat(timespec='seconds')}"
            f" ({p.unreachable_reason or 'no answer'})"
            for p in gone
        )
        result = {
            "status": "TECHNICAL_LOSS",
            "winner": winner,
            "score": {a_id: 3 if winner == a_id else 0, b_id: 3 if winner == b_id else 0},
            "technical_loss": lost,
            "details": {"reason": f"technical loss: {why}", "decided_by": SENDER},
        }
        entry = {"seq": 1, "direction": "EVENT", "message_type": "DECIDED_UNREACHABLE", "message": {"reason": why}}
        _store_result(pk, result, [entry], SENDER)
        decided.append(match_id)
    return decided


def mark_unreachable(league_pk: int, player_id: str, reason: str) -> bool:
    """Mark a player unreachable (once: False if it already is, or is not a player)."""
    with transaction.atomic():
        done = Player.objects.filter(league_id=league_pk, player_id=player_id, unreachable_since__isnull=True).update(
            unreachable_since=timezone.now(), unreachable_reason=reason[:300]
        )
        if done:
            league = League.objects.get(pk=league_pk)
            record_event(league, "STATE", "player_unreachable", agent=player_id, payload={"reason": reason})
            broadcast(league.league_id, "player_unreachable", {"player_id": player_id, "reason": reason})
    return bool(done)


def unreachable_agents(league_pk: int) -> list[Player | Referee]:
    """The league's players marked unreachable and the referees the conductor suspended: the
    agents to probe."""
    players: list[Player | Referee] = list(
        Player.objects.filter(league_id=league_pk, unreachable_since__isnull=False)
        .exclude(status=AgentStatus.REMOVED)
        .select_related("league")
    )
    referees = Referee.objects.filter(
        league_id=league_pk, status=AgentStatus.SUSPENDED, unreachable_since__isnull=False
    ).select_related("league")
    return players + list(referees)


def restore_agent(agent: Player | Referee) -> bool:
    """An unreachable agent answered a probe: no longer unreachable, its failures forgotten, and a
    referee the conductor suspended ACTIVE again. False if someone else changed it meanwhile."""
    model = type(agent)
    with transaction.atomic():
        row = model.objects.select_for_update().select_related("league").filter(pk=agent.pk).first()
        if row is None or row.unreachable_since is None:
            return False
        is_referee = isinstance(row, Referee)
        if is_referee and row.status != AgentStatus.SUSPENDED:
            return False
        since, reason = row.unreachable_since, row.unreachable_reason
        row.unreachable_since, row.unreachable_reason, row.failures = None, "", 0
        fields = ["unreachable_since", "unreachable_reason", "failures"]
        if is_referee:
            row.status = AgentStatus.ACTIVE
            fields.append("status")
        row.save(update_fields=fields)
        agent_id = row.referee_id if is_referee else row.player_id
        record_event(
            row.league,
            "STATE",
            "referee_restored" if is_referee else "player_reachable",
            agent=agent_id,
            payload={"unreachable_since": since.isoformat(), "reason": reason},
        )
    return True


def round_finished(round_pk: int) -> bool:
    rnd = Round.objects.get(pk=round_pk)
    if rnd.status in (Round.Status.PLAYED, Round.Status.COMPLETED):
        return True
    return rnd.status == Round.Status.ANNOUNCED and not rnd.matches.exclude(status__in=DONE).exists()


@dataclass
class _RunningTable:
    """A league's standings kept in memory by the conductor, one round's results added at a time."""

    names: dict[str, str]
    table: StandingsTable
    round_number: int


_TABLES: dict[int, _RunningTable] = {}


def round_standings(league: League, rnd: Round, names: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The standings after ``rnd`` (equal to ``queries.standings``), adding only this round's
    results to the table kept from the previous round; rebuilt from every result when there is
    none (a fresh conductor), when rounds were skipped (another conductor did them) or when the
    players changed. ``names``: the players' display names (not REMOVED), if the caller has them."""
    if names is None:
        names = dict(
            Player.objects.filter(league=league)
            .exclude(status=AgentStatus.REMOVED)
            .order_by()
            .values_list("player_id", "display_name")
        )
    running = _TABLES.get(league.pk)
    if running is None or running.round_number != rnd.number - 1 or running.names.keys() != names.keys():
        results = MatchResult.objects.filter(league=league, match__round__number__lte=rnd.number)
        running = _RunningTable(names, StandingsTable.for_players(sorted(names, key=id_sort_key)), rnd.number)
        rows = results.order_by().values_list(*RESULT_FIELDS)
    else:
        rows = _ROUND_RESULTS.rows(league.pk, rnd.number)
        running.names, running.round_number = names, rnd.number
    try:
        for row in rows:
            running.table.add(ResultRow(*row))
    except ValueError:  # a result of a removed player, or one counted already: take the slow way
        _TABLES.pop(league.pk, None)
        return queries.standings(league)
    if len(_TABLES) > 256:
        _TABLES.clear()
    _TABLES[league.pk] = running
    return [queries.standing_dict(row, names.get(row.player_id, "")) for row in running.table.rows()]


@dataclass
class Boundary:
    """What the end of a round sends: each player's LEAGUE_STANDINGS_UPDATE and ROUND_COMPLETED
    and, when the next round follows at once (no ``round_pause``), its ROUND_ANNOUNCEMENT, all
    in the same player order (``deliver_in_order`` pairs them by position)."""

    updates: list[Delivery]
    completed: list[Delivery]
    table: list[dict[str, Any]]
    upcoming: Round | None = None  # the next round, announced in the same delivery phase
    announcements: list[Delivery] = field(default_factory=list)
    matches: list[dict[str, Any]] | None = None  # the next round's ``round_matches``

    @property
    def batches(self) -> list[list[Delivery]]:
        """What each player gets, in order, for ``send_in_order`` (no announcements: left out)."""
        return [self.updates, self.completed, self.announcements]


def round_boundary(league: League, rnd: Round, *, again: bool = False) -> Boundary:
    """What the end of ``rnd`` sends. ``again``: the boundary is owed (``owed_round``) and sent
    once more, with the next round's announcement although that round is under way."""
    names: dict[str, str] = {}
    players = recipients(league, names)
    table = round_standings(league, rnd, names)
    nxt = _NEXT_ROUND.first(league.pk, rnd.number)
    finished = finished_in_round(rnd.pk)
    round_fields = {"league_id": league.league_id, "round_id": rnd.number}
    # Serialised once for every player's LEAGUE_STANDINGS_UPDATE (and the Event row that keeps
    # the body): orjson writes a Fragment as it is. A 100-row table cost 34 µs to serialise in each
    # message, 2 µs as a Fragment, and the boundary's sending is bound by the conductor's CPU.
    shared = orjson.Fragment(dumps(table))
    updates = notices(players, "update_standings", "LEAGUE_STANDINGS_UPDATE", **round_fields, standings=shared)
    completed = notices(
        players,
        "notify_round_completed",
        "ROUND_COMPLETED",
        **round_fields,
        # matches_played is the course's name for it; matches_completed stays for agents that read it.
        matches_played=finished,
        matches_completed=finished,
        next_round_id=nxt.number if nxt else None,
    )
    boundary = Boundary(updates, completed, table)
    # Without a pause between rounds nothing happens between ROUND_COMPLETED(r) and
    # ROUND_ANNOUNCEMENT(r+1): one delivery phase (and one trip to record it) for both.
    if nxt is not None and (again or (nxt.status == Round.Status.PENDING and league.round_pause <= 0)):
        boundary.upcoming, boundary.matches = nxt, round_matches(nxt)
        boundary.announcements = announcement(league, nxt, boundary.matches, players)
    return boundary


def mark_round_completed(
    round_pk: int, table: list[dict[str, Any]] | None = None, *, notices_owed: bool = False
) -> bool:
    """PLAYED → COMPLETED (False if it already was). ``notices_owed``: the round's standings and
    ROUND_COMPLETED have not been sent yet (``advance_round``)."""
    with transaction.atomic():
        rnd = _locked_round(round_pk)
        if rnd.status == Round.Status.COMPLETED:
            return False
        rnd.status = Round.Status.COMPLETED
        rnd.completed_at = timezone.now()
        update_row(Round, rnd.pk, status=rnd.status, completed_at=rnd.completed_at, notices_owed=notices_owed)
        league = rnd.league
        nxt = _NEXT_ROUND.first(league.pk, rnd.number)
        if nxt is not None:
            update_row(League, league.pk, current_round=nxt.number)
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
                "standings": queries.standings(league) if table is None else table,
            },
        )
    return True


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
    (``Conductor.finish_round``), off the path from one round to the next; a conductor that
    stops before ``notices_sent`` leaves the notices owed, and the next one sends them again
    (``Conductor.resend_boundary``)."""
    with transaction.atomic():
        mark_round_completed(round_pk, table, notices_owed=True)
        return announce_round(league, upcoming_pk, matches, avoid)


def notices_sent(
    league: League, round_pk: int, outcomes: list[list[tuple[Delivery, str, dict[str, Any] | None]]]
) -> None:
    """The boundary's deliveries recorded (``record_deliveries``) and the round's notices no
    longer owed, in one transaction."""
    with transaction.atomic():
        if outcomes:
            record_deliveries(league, outcomes)
        update_row(Round, round_pk, notices_owed=False)


def owed_round(league: League) -> Round | None:
    """The league's round whose boundary notices are owed (a conductor stopped between
    ``advance_round`` and ``notices_sent``), if any."""
    return _OWED_ROUND.first(league.pk)


def league_end_messages(league: League) -> tuple[list[Delivery], dict[str, Any] | None, list[dict[str, Any]]]:
    table = queries.standings(league)
    champion = None
    if table:
        top = table[0]
        champion = {"player_id": top["player_id"], "display_name": top["display_name"], "points": top["points"]}
    fields = {
        "league_id": league.league_id,
        "champion": champion,
        "final_standings": table,
        "total_rounds": league.rounds.count(),
        "total_matches": league.matches.filter(status=Match.Status.FINISHED).count(),
    }
    recipients: list[Player | Referee] = [*players_of(league)]
    recipients += list(league.referees.exclude(status=AgentStatus.REMOVED).select_related("league").order_by("id"))
    deliveries = [
        Delivery(
            a.player_id if isinstance(a, Player) else a.referee_id,
            a.endpoint,
            "notify_league_completed",
            message_to(a, "LEAGUE_COMPLETED", **fields),
        )
        for a in recipients
    ]
    return deliveries, champion, table


def complete_league(league_pk: int, champion: dict[str, Any] | None, table: list[dict[str, Any]]) -> bool:
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


def delivery_row(
    league: League, d: Delivery, outcome: str, reply: dict[str, Any] | None, same_as: str | None = None
) -> EventValues:
    """The OUT Event of one delivery: method, outcome and the reply (in short when it is a plain ack).

    ``same_as``: the agent whose row of the same batch holds the message body (a notification sent
    to every player has the same body for all but the envelope): this row keeps only its envelope
    ids, so a round's standings are stored once, not once per player.
    """
    message = d.message
    payload: dict[str, Any] = {"method": d.method, "outcome": outcome}
    if same_as is None:
        payload["message"] = message
    else:
        payload["same_message_as"] = same_as
        payload["conversation_id"] = message.get("conversation_id")
        if "round_id" in message:
            payload["round_id"] = message["round_id"]
    # A row that keeps only ids and a plain ack (most of a round's) has nothing to strip.
    clean = same_as is not None
    if reply is not None:
        status = reply.get("status")
        # Plain: an ack whose status is a word (anything else an agent sends is kept, stripped).
        plain = outcome == "ok" and reply.get("message_type") == "ACK" and same_as is not None
        plain = plain and (status is None or type(status) is str)
        payload["reply"] = {"message_type": "ACK", "status": status} if plain else reply
        clean = clean and plain
    return event_values(
        league,
        "OUT",
        message["message_type"],
        agent=d.agent_id,
        match_id=message.get("match_id", ""),
        payload=payload,
        clean=clean,
    )


def record_deliveries(league: League, batches: list[list[tuple[Delivery, str, dict[str, Any] | None]]]) -> None:
    """One insert for batches of deliveries; each batch shares one body (see ``delivery_row``)."""
    rows: list[EventValues] = []
    for outcomes in batches:
        first = outcomes[0][0].agent_id if outcomes else None
        rows += [
            delivery_row(league, d, outcome, reply, None if d.agent_id == first else first)
            for d, outcome, reply in outcomes
        ]
    with transaction.atomic():  # one commit for the batch (autocommit would commit each row)
        append_events(rows)


# What a tick reads every ``poll`` seconds, on prepared shapes (building a query costs the ORM
# ~1 ms of CPU here, running these ~0.1 ms).
_ROUND_COUNTS = Prepared(
    lambda round_pk: (
        Match.objects.filter(round_id=round_pk)
        .order_by()
        .values("status")
        .annotate(n=Count("id"))
        .values_list("status", "n")
    ),
    -701,
)
_REFEREE_CAPACITY = Prepared(
    lambda league_pk: (
        Referee.objects.filter(league_id=league_pk, status__in=LIVE).order_by().values_list("max_concurrent_matches")
    ),
    -701,
)
_WORKING_LEAGUES = Prepared(lambda: League.objects.filter(status__in=WORKING).order_by("id"))
_WORKING_LEAGUE = Prepared(
    lambda league_id: League.objects.filter(status__in=WORKING, league_id=league_id).order_by("id"), "\0league_id"
)


_ROUND_STATUS = Prepared(lambda round_pk: Round.objects.filter(pk=round_pk).order_by().values_list("status"), -701)


def rounds_moved_on(round_pks: list[int]) -> bool:
    """Whether any of these rounds being played is no longer ANNOUNCED (or no longer exists)."""
    for round_pk in round_pks:
        rows = _ROUND_STATUS.rows(round_pk)
        if not rows or rows[0][0] != Round.Status.ANNOUNCED:
            return True
    return False


def round_counts(round_pk: int) -> dict[str, int]:
    """How many of the round's matches are in each status: the one cheap query a waiting tick makes."""
    counts = dict(_ROUND_COUNTS.rows(round_pk))
    return {
        "scheduled": counts.get(Match.Status.SCHEDULED, 0),
        "in_play": sum(counts.get(s, 0) for s in IN_PLAY),
        "unfinished": sum(n for status, n in counts.items() if status not in DONE),
    }


def referee_capacity(league_pk: int) -> int:
    """Matches the league's live referees can run at once."""
    return sum(n for (n,) in _REFEREE_CAPACITY.rows(league_pk))


@dataclass
class NextRound:
    """The league's current round as a tick finds it, and what to do with it."""

    rnd: Round | None  # None: every round is COMPLETED
    deliveries: list[Delivery] | None = None  # ROUND_ANNOUNCEMENTs, when PENDING and not pausing
    matches: list[dict[str, Any]] | None = None  # its ``round_matches`` (with ``deliveries``)
    claimed: list[Dispatch] = field(default_factory=list)  # claimed as it was announced
    started: bool = False  # its first matches are already being sent (``finish_round``)
    owed: Round | None = None  # a round whose boundary notices are owed (``owed_round``)


def next_round(league: League) -> NextRound:
    """The league's current round and, if it is PENDING and not pausing, its ROUND_ANNOUNCEMENTs
    and matches (none while the round_pause runs): what a tick reads before announcing."""
    rnd = current_round(league)
    owed = owed_round(league)
    if rnd is None or rnd.status != Round.Status.PENDING or pausing_between_rounds(league, rnd):
        return NextRound(rnd, owed=owed)
    matches = round_matches(rnd)
    return NextRound(rnd, announcement(league, rnd, matches), matches, owed=owed)


def announce_round(
    league: League, round_pk: int, matches: list[dict[str, Any]] | None, avoid: Iterable[int] = ()
) -> NextRound:
    """Mark the round ANNOUNCED and claim its first matches (``claim_matches``) in the same
    transaction: the referees get start_match without another trip. Nothing is claimed for a
    league without live referees (the embedded referee's path claims on the next step)."""
    with transaction.atomic():
        rnd = mark_round_announced(round_pk, matches)
        claimed = claim_matches(league.pk, rnd.pk, avoid, league, rnd) if rnd.status == Round.Status.ANNOUNCED else []
    return NextRound(rnd, claimed=claimed)


@dataclass
class Survey:
    """What one tick reads, in one trip to the database thread."""

    leagues: list[League]
    counts: dict[int, dict[str, int]]  # round pk → ``round_counts`` (rounds being played)
    in_play: dict[int, list[InPlay]]  # league pk → ``in_play_matches`` (leagues due for supervision)
    capacity: dict[int, int]  # league pk → ``referee_capacity`` (the same leagues)


# -- the worker -----------------------------------------------------------------------------
@dataclass
class Conductor:
    """Runs every league in progress (or just ``league_id``). One per process and event loop.

    A tick reads the leagues in progress and, for a round being played, one count of its matches
    by status (every ``supervise_every`` seconds also its matches in play and its referees'
    capacity), all in one trip to the database thread (``survey``); it claims matches only when
    some are waiting and a referee has room, and does the slower checks (overdue matches, referee
    pings, unsent assignments) with what the survey read. A finished round goes straight on to its
    standings, completion and the next announcement within the same tick; recording a batch of
    deliveries and the transition it completes share one trip.
    """

    league_id: str | None = None
    poll: float = 0.05
    # Seconds between reads of the round's status while it is in its tail (every match
    # dispatched, some still unreported): its end is then what holds up every agent (``rest``).
    tail_poll: float = 0.002
    # A league's rounds take about as long as each other (the same number of matches between the
    # same agents), so in a tail the status reads start only once this share of the shortest of
    # its last few rounds has passed since the round's matches were sent: each read costs the
    # conductor ~0.5 ms of CPU in hops between its event loop and database thread (measured),
    # taken from the agents playing the round. A round that ends sooner is noticed by the next
    # read or tick, at most ``poll`` later.
    tail_quiet: float = 0.8
    health_interval: float | None = None  # seconds between referee pings (None: league default)
    client: AgentClient | None = None
    supervise_every: float = 0.25
    notify_concurrency: int = 128  # notifications in flight at once
    reconnect_every: float = 30.0  # seconds between checks that the DB connection is still good
    _inflight: dict[int, asyncio.Task] = field(default_factory=dict)
    _cooldown: dict[int, float] = field(default_factory=dict)  # referee pk → monotonic time
    _last_ping: dict[int, float] = field(default_factory=dict)
    _pings: dict[int, asyncio.Task] = field(default_factory=dict)
    _rounds: dict[int, Round] = field(default_factory=dict)  # league pk → the round being played
    _capacity: dict[int, tuple[float, int]] = field(default_factory=dict)  # league pk → (when, capacity)
    _supervised: dict[int, float] = field(default_factory=dict)  # league pk → monotonic time
    _checked_connection: float = 0.0
    _in_tail: bool = False  # set by a tick that found a round with nothing left to dispatch
    _began: dict[int, float] = field(default_factory=dict)  # league pk → when its round's matches were sent
    _lasted: dict[int, deque[float]] = field(default_factory=dict)  # league pk → its last rounds' durations
    # Seconds a round's notifications may hold up its matches: chains still going after that
    # (a player that does not answer, or answers slowly) go on in the background and their
    # players' matches start anyway (an invitation before the announcement is fine for players).
    notify_patience: float = 0.5
    probe_every: float = 1.0  # seconds between reads of the agents to probe, per league
    cooldown_base: float = 1.0  # seconds a referee is left alone after a first failure (``referee_cooldown``)
    _background: set[asyncio.Task] = field(default_factory=set)  # straggling chains, probes
    _failing: dict[tuple[int, str], int] = field(default_factory=dict)  # (league, player) → failed calls in a row
    _gone: dict[int, set[str]] = field(default_factory=dict)  # league pk → players marked unreachable here
    _probes: dict[tuple[str, int], tuple[float, float]] = field(default_factory=dict)  # agent → (next, delay)
    _probed: dict[int, float] = field(default_factory=dict)  # league pk → when its agents to probe were read
    _status: dict[int, str] = field(default_factory=dict)  # league pk → its status as last logged
    _no_referee: set[int] = field(default_factory=set)  # leagues in play logged as having no live referee
    _outage_since: float | None = None  # monotonic time the database became unavailable
    _pinging: set[tuple[str, int]] = field(default_factory=set)  # agents being probed now

    async def run(self, *, once: bool = False, until_done: bool = False) -> None:
        """Tick every ``poll`` seconds; ``once``: one tick; ``until_done``: until no league is in progress."""
        own_client = self.client is None
        if own_client:
            self.client = AgentClient(address_check=ConnectPolicy())  # re-checks each address (DNS rebinding)
        log.info(
            "conductor started (pid %d, database %s, %s)",
            os.getpid(),
            connection.vendor,
            f"league {self.league_id}" if self.league_id else "every league",
        )
        delay = 0.0
        try:
            while True:
                try:
                    if self._outage_since is not None:
                        # Reads may work while writes do not (a locked SQLite file): the outage
                        # is over when a write transaction can begin, not at the first read.
                        await sync_to_async(database_writable)()
                        self.database_up()
                    busy = await self.tick()
                except DB_OUTAGE as exc:
                    # The database is down or locked: wait and try again, with backoff, for as long
                    # as it takes. Everything the conductor knows is in the database, so it starts
                    # the next tick from what it reads there.
                    delay = min(5.0, max(self.poll, delay * 2 or 0.1))
                    await self.database_down(exc)
                    await asyncio.sleep(delay)
                    continue
                delay = 0.0
                if once:
                    break
                if until_done and not busy:
                    break
                await self.rest()
            await self.drain()
        finally:
            if own_client and self.client is not None:
                await self.client.close()
                self.client = None
            await sync_to_async(connections.close_all)()

    async def rest(self) -> None:
        """Wait for the next tick: ``poll`` seconds. In a round's tail (every match dispatched,
        some not reported) the round's end is what every agent waits for: the rounds' status is
        read every ``tail_poll`` seconds (one small query; a tick reads far more) and the tick
        comes as soon as one of them is no longer ANNOUNCED (the LM marks it PLAYED with its
        last result). The reads start at ``quiet_until``, not before."""
        if not self._in_tail:
            await asyncio.sleep(self.poll)
            return
        rounds = [rnd.pk for rnd in self._rounds.values()]
        now = time.monotonic()
        deadline = now + self.poll
        quiet = self.quiet_until(now)
        if quiet > now:
            await asyncio.sleep(min(quiet, deadline) - now)
        while (left := deadline - time.monotonic()) > 0:
            await asyncio.sleep(min(self.tail_poll, left))
            try:
                moved_on = await sync_to_async(rounds_moved_on)(rounds)
            except DB_OUTAGE:
                return  # the next tick meets the outage and waits it out (``run``)
            if moved_on:
                return

    def quiet_until(self, now: float) -> float:
        """When the status reads of ``rest`` begin: ``tail_quiet`` of the way through the round
        that looks shortest, over the leagues being played (``now`` for a league whose round or
        history is unknown: a fresh conductor, a first round)."""
        until = math.inf
        for league_pk in self._rounds:
            began, lasted = self._began.get(league_pk), self._lasted.get(league_pk)
            if began is None or not lasted:
                return now
            until = min(until, began + self.tail_quiet * min(lasted))
        return now if until == math.inf else until

    def _round_started(self, league_pk: int) -> None:
        self._began[league_pk] = time.monotonic()

    def _start_round(self, league: League, claimed: list[Dispatch]) -> None:
        """start_match for the matches claimed as the round was announced; its clock starts."""
        if claimed:
            self.send_starts(league, claimed)
            self._round_started(league.pk)

    def _round_ended(self, league_pk: int) -> None:
        """Keep how long the round took, from its matches sent to its end noticed (``quiet_until``)."""
        began = self._began.pop(league_pk, None)
        if began is not None:
            self._lasted.setdefault(league_pk, deque(maxlen=3)).append(time.monotonic() - began)

    async def drain(self) -> None:
        tasks = [*self._inflight.values(), *self._pings.values(), *self._background]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def database_down(self, exc: Exception) -> None:
        """Log an outage once (not every retry), forget what was read before it, and drop the
        broken connection so that the next try opens a new one."""
        if self._outage_since is None:
            self._outage_since = time.monotonic()
            log.warning("database unavailable (%s: %s); retrying until it is back", type(exc).__name__, exc)
        self._rounds.clear()
        self._capacity.clear()
        try:
            await sync_to_async(connections.close_all)()
        except Exception:  # closing a dead connection may fail too; the next query reconnects
            log.debug("closing the database connection failed", exc_info=True)

    def database_up(self) -> None:
        if self._outage_since is not None:
            log.warning("database available again after %.1f s; carrying on", time.monotonic() - self._outage_since)
            self._outage_since = None

    def background(self, coro: Any) -> asyncio.Task:
        """Run ``coro`` beside the ticks; a database outage in it is the tick's to report."""

        async def guarded() -> None:
            try:
                await coro
            except DB_OUTAGE as exc:
                log.debug("background work lost to a database outage: %s", exc)

        task = asyncio.ensure_future(guarded())
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def tick(self) -> bool:
        """One pass over the leagues in progress; True while any is still in progress."""
        now = time.monotonic()
        if now - self._checked_connection >= self.reconnect_every:
            # A long-running worker outlives DB restarts; checked now and then, not per tick
            # (with CONN_MAX_AGE 0 every check opens a new connection).
            self._checked_connection = now
            await sync_to_async(close_old_connections)()
        rounds = {league_pk: rnd.pk for league_pk, rnd in self._rounds.items()}
        due = {pk for pk in rounds if now - self._supervised.get(pk, 0.0) >= self.supervise_every}
        survey = await sync_to_async(self.survey)(rounds, due)
        await self.log_changes(survey.leagues)
        self._in_tail = False
        for league in survey.leagues:
            try:
                await self.step(league, survey)
            except DB_OUTAGE:
                raise  # an outage, not this league's fault: ``run`` waits it out
            except Exception:
                log.exception("conductor step failed for league %s", league.league_id)
                self._rounds.pop(league.pk, None)
                self._checked_connection = 0.0
        return bool(survey.leagues)

    async def log_changes(self, leagues: list[League]) -> None:
        """One line per league state change this conductor sees (its first sight of a league
        included), and one when a league in play has no live referee (and when it has one again)."""
        seen = {league.pk: league for league in leagues}
        for league in leagues:
            self.note_status(league.pk, league.league_id, league.status)
        left = [pk for pk in self._status if pk not in seen]
        if left:
            # Out of the leagues in progress: completed, cancelled or paused. Read once, then forgotten.
            for pk, league_id, status in await sync_to_async(league_statuses)(left):
                self.note_status(pk, league_id, status)
            for pk in left:
                self._status.pop(pk, None)
                self._no_referee.discard(pk)

    def note_status(self, league_pk: int, league_id: str, status: str) -> None:
        """Log a league's status when it is not the one last logged: the transitions this
        conductor makes as it makes them, those made elsewhere (an admin) when a tick reads them."""
        before = self._status.get(league_pk)
        if before != status:
            self._status[league_pk] = status
            log.info("league %s: %s", league_id, f"{before} -> {status}" if before else status)

    def referee_presence(self, league: League, capacity: int) -> None:
        """Log once when a league in play has no live referee (its matches wait), once when it has."""
        if league.embedded_referee or league.status != League.Status.RUNNING:
            return
        if capacity <= 0 and league.pk not in self._no_referee:
            self._no_referee.add(league.pk)
            log.warning("league %s is running but has no live referee: its matches wait for one", league.league_id)
        elif capacity > 0 and league.pk in self._no_referee:
            self._no_referee.discard(league.pk)
            log.info("league %s has a live referee again", league.league_id)

    def _leagues(self) -> list[League]:
        if self.league_id:
            return _WORKING_LEAGUE.objects(self.league_id)
        return _WORKING_LEAGUES.objects()

    def survey(self, rounds: dict[int, int], due: set[int]) -> Survey:
        """The tick's reads: the leagues in progress; for ``rounds`` (league pk → round pk being
        played) their match counts; for the leagues in ``due`` their matches in play and capacity."""
        leagues = self._leagues()
        working = {league.pk for league in leagues}
        return Survey(
            leagues,
            {rnd: round_counts(rnd) for league_pk, rnd in rounds.items() if league_pk in working},
            {pk: in_play_matches(pk) for pk in due if pk in working},
            {pk: referee_capacity(pk) for pk in due if pk in working},
        )

    async def step(self, league: League, survey: Survey | None = None) -> None:
        if league.status == League.Status.REGISTERING:
            if await sync_to_async(check_registration)(league.pk) is None:
                return
            league = await sync_to_async(League.objects.get)(pk=league.pk)
            self.note_status(league.pk, league.league_id, league.status)
        if league.status == League.Status.READY:
            await sync_to_async(create_schedule)(league.pk)
            league = await sync_to_async(League.objects.get)(pk=league.pk)
            self.note_status(league.pk, league.league_id, league.status)
        if league.status != League.Status.RUNNING:
            self._rounds.pop(league.pk, None)
            return
        # Between rounds too (a pause, an announcement): an agent back is back for the next round.
        await self.probe(league, time.monotonic())
        if survey is not None and league.pk in survey.capacity:
            self._set_capacity(league, survey.capacity[league.pk])
        # The next round as read (or announced) in the trip that completed the previous one.
        prepared: NextRound | None = None
        while True:  # a finished round goes on to the next without waiting for a tick
            rnd = self._rounds.get(league.pk)
            counts: dict[str, int] | None = None
            in_play: list[InPlay] | None = None
            if rnd is None:
                upcoming = prepared or await sync_to_async(next_round)(league)
                prepared = None
                if upcoming.owed is not None:
                    await self.resend_boundary(league, upcoming.owed)
                rnd = upcoming.rnd
                if rnd is None:
                    await self.finish_league(league)
                    return
                if rnd.status == Round.Status.PENDING:
                    if upcoming.deliveries is None:
                        return  # the round_pause is not over
                    upcoming = await self.deliver(
                        league,
                        upcoming.deliveries,
                        league.default_timeout,
                        then=partial(announce_round, league, rnd.pk, upcoming.matches, self._cooling()),
                    )
                    rnd = upcoming.rnd
                if rnd.status == Round.Status.ANNOUNCED:
                    self._rounds[league.pk] = rnd
                    if upcoming.claimed or upcoming.started:
                        # Claimed as the round was announced: the rest (supervision, more claims
                        # as referees free up) is the next tick's.
                        self._start_round(league, upcoming.claimed)
                        return
            elif survey is not None:
                counts = survey.counts.get(rnd.pk)
                in_play = survey.in_play.get(league.pk)
            survey = None  # read before this step changed anything: only for its first round
            if rnd.status == Round.Status.ANNOUNCED:
                if counts is None:
                    counts = await sync_to_async(round_counts)(rnd.pk)
                if counts["unfinished"]:
                    self._in_tail = self._in_tail or not counts["scheduled"]
                    await self.supervise(league, in_play)
                    if counts["scheduled"] and counts["in_play"] < await self.capacity(league):
                        await self.dispatch(league, rnd)
                    return
            self._rounds.pop(league.pk, None)
            self._round_ended(league.pk)
            prepared = await self.finish_round(league, rnd)

    def _set_capacity(self, league: League, value: int) -> int:
        self.referee_presence(league, value)
        if league.embedded_referee and value == 0:
            value = EMBEDDED_CAPACITY
        self._capacity[league.pk] = (time.monotonic(), value)
        return value

    async def capacity(self, league: League) -> int:
        """The league's referee capacity (re-read every ``supervise_every``); embedded mode has its own."""
        when, value = self._capacity.get(league.pk, (0.0, 0))
        if time.monotonic() - when >= self.supervise_every:
            value = self._set_capacity(league, await sync_to_async(referee_capacity)(league.pk))
        return value

    # -- matches ---------------------------------------------------------------------------
    def _cooling(self) -> list[int]:
        """Referees not to give matches to now (they just failed)."""
        now = time.monotonic()
        return [pk for pk, until in self._cooldown.items() if until > now]

    async def dispatch(self, league: League, rnd: Round) -> None:
        if league.embedded_referee and not await sync_to_async(has_live_referee)(league.pk):
            await self.dispatch_embedded(league, rnd)
            return
        self.send_starts(league, await sync_to_async(claim_matches)(league.pk, rnd.pk, self._cooling(), league))

    def send_starts(self, league: League, items: list[Dispatch]) -> None:
        """start_match for each item not already being sent: one task per referee, so a referee
        that does not answer never holds up another's matches."""
        by_referee: dict[int, list[Dispatch]] = {}
        for item in items:
            if item.match_pk not in self._inflight:
                by_referee.setdefault(item.referee_pk, []).append(item)
        for group in by_referee.values():
            task = asyncio.create_task(self._start_matches(league, group))
            pks = [item.match_pk for item in group]
            for pk in pks:
                self._inflight[pk] = task
            task.add_done_callback(lambda _t, pks=pks: [self._inflight.pop(pk, None) for pk in pks])

    async def _start_matches(self, league: League, items: list[Dispatch]) -> None:
        try:
            await self._send_starts(league, items)
        except DB_OUTAGE as exc:
            # Sent but not recorded: the matches stay ASSIGNED and start_match is sent again
            # (idempotent) once the database is back (``stale_assignments``).
            log.debug("start_match outcomes not recorded (database unavailable): %s", exc)

    async def _send_starts(self, league: League, items: list[Dispatch]) -> None:
        assert self.client is not None
        policy = retry_policy(league)

        async def one(item: Dispatch) -> tuple[Dispatch, str, dict[str, Any] | None]:
            d = item.delivery
            try:
                result = await self.client.call(
                    d.endpoint, d.method, d.message, timeout=league.default_timeout, policy=policy
                )
            except CallFailed as exc:
                return item, exc.code.value, {"detail": str(exc)}
            return item, "error" if result.is_error else "ok", result.reply

        outcomes = await asyncio.gather(*(one(item) for item in items))
        await sync_to_async(settle_starts)(
            league, [(i, o, r if o in ("ok", "error") else None) for i, o, r in outcomes]
        )
        troubles = []
        for item, outcome, reply in outcomes:
            if is_accepted(outcome, reply):
                continue
            if outcome not in ("ok", "error"):
                reason = f"start_match failed: {(reply or {}).get('detail', outcome)}"
            else:
                reply = reply or {}
                why = reply.get("reason") or reply.get("error_description") or reply.get("status") or "rejected"
                reason = f"start_match not accepted: {why}"
            troubles.append((item, reason))
        if troubles:
            await self._referee_trouble(league, troubles)

    async def _referee_trouble(self, league: League, troubles: list[tuple[Dispatch, str]]) -> None:
        """A referee's batch of start_match calls went wrong: the matches go back to the pool and
        the referee counts one failure (one, however many matches the batch held: one referee
        down for a moment is not four failures) and cools down before it gets another match."""
        for item, reason in troubles:
            log.warning("match %s: referee %s: %s", item.match_id, item.referee_id, reason)
            await sync_to_async(release_match)(item.match_pk, item.referee_pk, item.attempt, reason)
        item, reason = troubles[-1]
        await self._count_failure(league, item.referee_pk, reason)

    async def _count_failure(self, league: League, referee_pk: int, reason: str, cooldown: float = 0.0) -> None:
        """One failure of a referee; it gets no match for ``referee_cooldown`` (at least ``cooldown``)."""
        _suspended, failures = await sync_to_async(referee_failed)(referee_pk, reason)
        wait = max(cooldown, referee_cooldown(league, failures, max(self.poll, self.cooldown_base)))
        self._cooldown[referee_pk] = time.monotonic() + wait

    async def dispatch_embedded(self, league: League, rnd: Round) -> None:
        free = EMBEDDED_CAPACITY - sum(1 for t in self._inflight.values() if not t.done())
        for match_pk, spec_fields in await sync_to_async(claim_embedded)(league.pk, rnd.pk, free):
            task = asyncio.create_task(self._run_embedded(league, match_pk, spec_fields))
            self._inflight[match_pk] = task
            task.add_done_callback(lambda _t, pk=match_pk: self._inflight.pop(pk, None))

    async def _run_embedded(self, league: League, match_pk: int, fields: dict[str, Any]) -> None:
        # league/ may use the referee's pure runner for this built-in mode (referee/ never imports league/).
        from referee.games import get_game
        from referee.runner import MatchRunner, MatchSpec, Seat, Timeouts

        assert self.client is not None
        spec = MatchSpec(
            league_id=league.league_id,
            round_id=fields["round_id"],
            match_id=fields["match_id"],
            game_type=fields["game_type"],
            player_a=Seat(fields["player_a"], fields["endpoint_a"]),
            player_b=Seat(fields["player_b"], fields["endpoint_b"]),
            match_token=match_token(league.league_id, fields["match_id"], fields["attempt"]),
            timeouts=Timeouts.from_mapping(fields["timeouts"]),
            retry=retry_policy(league),
            max_invalid_moves=league.max_invalid_moves,
            standings=fields["standings"],
        )
        runner = MatchRunner(spec, get_game(spec.game_type), self.client, f"referee:{EMBEDDED_REFEREE}")
        try:
            result = await runner.run()
        except Exception:
            log.exception("embedded match %s failed", spec.match_id)
            await sync_to_async(release_match)(match_pk, None, fields["attempt"], "embedded referee crashed")
            return
        await sync_to_async(record_embedded_result)(match_pk, fields["attempt"], result.to_dict(), runner.log.entries)

    async def supervise(self, league: League, in_play: list[InPlay] | None = None) -> None:
        """Every ``supervise_every`` s: reassign overdue matches; resend start_match for assignments
        nobody is sending (a dead conductor's); ask referees that hold matches about them
        (``_check``). ``in_play``: the league's matches in play if the tick's survey read them
        (it does when supervision is due)."""
        now = time.monotonic()
        if in_play is None:
            if now - self._supervised.get(league.pk, 0.0) < self.supervise_every:
                return
            in_play = await sync_to_async(in_play_matches)(league.pk)
        self._supervised[league.pk] = now
        wall = timezone.now()
        for row in in_play:
            if row.deadline_at is None or row.deadline_at >= wall:
                continue
            reason = f"no result from {row.referee_id or EMBEDDED_REFEREE} by the match deadline"
            if row.pk in self._inflight and row.referee_pk is None:
                continue  # our own embedded run: the runner's timeouts end it
            if await sync_to_async(release_match)(row.pk, row.referee_pk, row.attempt, reason):
                log.warning("match pk=%s: %s; reassigning", row.pk, reason)
                if row.referee_pk is not None:
                    await self._count_failure(league, row.referee_pk, reason, max(1.0, league.match_deadline))
        # A start_match call may take the whole retry budget; past that nobody is sending it.
        budget = league.default_timeout * (league.retries + 1) + league.retry_delay * league.retries + 1.0
        cutoff = wall - timedelta(seconds=budget)
        if any(
            r.status == Match.Status.ASSIGNED
            and r.assigned_at
            and r.assigned_at < cutoff
            and r.pk not in self._inflight
            for r in in_play
        ):
            self.send_starts(league, await sync_to_async(stale_assignments)(league.pk, budget, list(self._inflight)))
        interval = self.health_interval or max(1.0, league.default_timeout)
        held: dict[int, list[InPlay]] = {}
        for r in in_play:
            if (
                r.status == Match.Status.RUNNING
                and r.referee_pk is not None
                and r.referee_pk not in self._pings
                and now - self._last_ping.get(r.referee_pk, 0.0) >= interval
            ):
                held.setdefault(r.referee_pk, []).append(r)
        if not held:
            return
        for referee in await sync_to_async(self._referees)(set(held)):
            self._last_ping[referee.pk] = now
            task = asyncio.create_task(self._check(league, referee, held[referee.pk]))
            self._pings[referee.pk] = task
            task.add_done_callback(lambda _t, pk=referee.pk: self._pings.pop(pk, None))

    @staticmethod
    def _referees(pks: set[int]) -> list[Referee]:
        return list(Referee.objects.filter(pk__in=pks).select_related("league"))

    async def _check(self, league: League, referee: Referee, rows: list[InPlay]) -> None:
        """Ping a referee that runs matches for us, then ask it about each (``get_match_state``).

        No answer to the ping: it is gone; its matches are given back and it counts a failure.
        An answer that it does not know a match (E006: it was restarted and lost it): that match
        is given back at once, with no failure counted, instead of waiting for its deadline.
        """
        assert self.client is not None
        policy = retry_policy(league)
        timeout = league.default_timeout
        try:
            try:
                ping = message_to(referee, "PING", league_id=league.league_id)
                await self.client.call(referee.endpoint, "ping", ping, timeout=timeout, policy=policy)
            except CallFailed as exc:
                reason = f"referee {referee.referee_id} unreachable: {exc}"
                log.warning("%s; reassigning its matches", reason)
                if await sync_to_async(self._release_all)(referee.pk, reason):
                    await self._count_failure(league, referee.pk, reason)
                return

            async def unknown(row: InPlay) -> bool:
                message = message_to(referee, "GET_MATCH_STATE", league_id=league.league_id, match_id=row.match_id)
                try:
                    answer = await self.client.call(referee.endpoint, "get_match_state", message, timeout=timeout)
                except CallFailed:
                    return False  # no verdict (a referee without the tool, a slow one): the deadline decides
                code = answer.reply.get("error_code") if answer.is_error else None
                return code == ErrorCode.MATCH_NOT_FOUND.value

            verdicts = await asyncio.gather(*(unknown(row) for row in rows))
            for row, lost in zip(rows, verdicts, strict=True):
                if not lost:
                    continue
                reason = f"referee {referee.referee_id} does not know match {row.match_id} (restarted?)"
                if await sync_to_async(release_match)(row.pk, referee.pk, row.attempt, reason):
                    log.warning("%s; giving it back at once", reason)
        except DB_OUTAGE as exc:
            log.debug("referee check of %s not recorded (database unavailable): %s", referee.referee_id, exc)

    @staticmethod
    def _release_all(referee_pk: int, reason: str) -> int:
        rows = list(
            Match.objects.filter(referee_id=referee_pk, status=Match.Status.RUNNING).values_list("pk", "attempt")
        )
        return sum(release_match(pk, referee_pk, attempt, reason) for pk, attempt in rows)

    # -- unreachable agents ----------------------------------------------------------------
    async def probe(self, league: League, now: float) -> None:
        """Every ``probe_every`` s, read the league's agents marked unreachable (players) or
        suspended by the conductor (referees) and ping those due, each with its own backoff
        (``PROBE_FIRST`` doubling to ``PROBE_MAX``). One that answers is let back in."""
        if now - self._probed.get(league.pk, 0.0) < self.probe_every:
            return
        self._probed[league.pk] = now
        agents = await sync_to_async(unreachable_agents)(league.pk)
        gone = self._gone.get(league.pk)
        if gone:  # players let back in elsewhere (a registration again, another conductor)
            gone.intersection_update(a.player_id for a in agents if isinstance(a, Player))
        for agent in agents:
            key = (type(agent).__name__, agent.pk)
            due, delay = self._probes.setdefault(key, (now + PROBE_FIRST, PROBE_FIRST))
            if due > now or key in self._pinging:
                continue
            self._probes[key] = (now + delay, min(PROBE_MAX, delay * 2))
            self._pinging.add(key)
            task = self.background(self._probe_one(league, agent, key))
            task.add_done_callback(lambda _t, key=key: self._pinging.discard(key))
        known = {(type(a).__name__, a.pk) for a in agents}
        for key in [k for k in self._probes if k not in known]:
            del self._probes[key]  # restored (here or by another conductor), or removed

    async def _probe_one(self, league: League, agent: Player | Referee, key: tuple[str, int]) -> None:
        assert self.client is not None
        message = message_to(agent, "PING", league_id=league.league_id)
        try:
            await self.client.call(agent.endpoint, "ping", message, timeout=league.default_timeout)
        except CallFailed as exc:
            if unreachable_failure(exc):
                return
            # Any JSON-RPC answer (even "no such method") shows the agent is there again.
        if await sync_to_async(restore_agent)(agent):
            agent_id = agent.referee_id if isinstance(agent, Referee) else agent.player_id
            log.info("league %s: %s answers again; back in play", league.league_id, agent_id)
            self._probes.pop(key, None)
            self._gone.get(league.pk, set()).discard(agent_id)
            self._failing.pop((league.pk, agent_id), None)
            if isinstance(agent, Referee):
                self._cooldown.pop(agent.pk, None)

    def _player_failed(self, league: League, d: Delivery, exc: CallFailed) -> None:
        """A notification to a player failed; at ``UNREACHABLE_AFTER`` in a row it is marked
        unreachable: its remaining notifications are skipped and its matches decided at once."""
        if not unreachable_failure(exc) or not d.agent_id.startswith("P"):  # players only (P01…), not REF01
            return
        key = (league.pk, d.agent_id)
        self._failing[key] = failures = self._failing.get(key, 0) + 1
        gone = self._gone.setdefault(league.pk, set())
        if failures >= UNREACHABLE_AFTER and d.agent_id not in gone:
            gone.add(d.agent_id)
            reason = f"{failures} calls in a row failed, the last ({d.message['message_type']}): {exc}"
            log.warning("league %s: player %s unreachable: %s", league.league_id, d.agent_id, reason)
            self.background(sync_to_async(mark_unreachable)(league.pk, d.agent_id, reason))

    # -- notifications ---------------------------------------------------------------------
    async def deliver(
        self, league: League, deliveries: list[Delivery], timeout: float, then: Callable[[], T] | None = None
    ) -> T | None:
        """Send concurrently; failures are logged and recorded, never raised. ``then``: see
        ``deliver_in_order``."""
        return await self.deliver_in_order(league, [deliveries], timeout, then)

    async def deliver_in_order(
        self, league: League, batches: list[list[Delivery]], timeout: float, then: Callable[[], T] | None = None
    ) -> T | None:
        """``batches[k][i]`` is the k-th message for agent i: each agent gets its messages one
        after the other, in order; agents are served concurrently (at most ``notify_concurrency``
        at once), so nobody waits for the slowest agent between two messages. Each batch has one
        body for all agents, stored once (``record_deliveries``); all rows go in one insert.

        ``then``: a database step to run once everything is sent and recorded (the transition the
        deliveries complete), in the same trip to the database thread; its result is returned."""
        outcomes = await self.send_in_order(league, batches, timeout)

        def record() -> T | None:
            if outcomes:
                record_deliveries(league, outcomes)
            return then() if then is not None else None

        return await sync_to_async(record)()

    async def send_in_order(
        self, league: League, batches: list[list[Delivery]], timeout: float
    ) -> list[list[tuple[Delivery, str, dict[str, Any] | None]]]:
        """Send ``batches`` as ``deliver_in_order`` does, without recording: the outcomes, batch by
        batch (empty batches left out).

        Waits at most ``notify_patience`` seconds for the slowest chains: a player that does not
        answer (each call waiting out its timeout and retries) must not hold up the matches of
        the others. Chains still going then finish in the background and are recorded when they
        end; the outcomes returned are those of the chains done. A player whose calls keep
        failing is marked unreachable (``_player_failed``) and the rest of its chain is skipped."""
        batches = [b for b in batches if b]
        if not batches:
            return []
        assert self.client is not None
        policy = retry_policy(league)
        gate = asyncio.Semaphore(self.notify_concurrency)
        gone = self._gone.setdefault(league.pk, set())
        failing = self._failing

        async def one(d: Delivery) -> tuple[Delivery, str, dict[str, Any] | None]:
            if d.agent_id in gone:
                return d, "skipped", None  # marked unreachable since this chain began
            try:
                result = await self.client.call(d.endpoint, d.method, d.message, timeout=timeout, policy=policy)
            except CallFailed as exc:
                log.warning("%s to %s failed: %s", d.message["message_type"], d.agent_id, exc)
                self._player_failed(league, d, exc)
                return d, exc.code.value, None
            if failing:
                failing.pop((league.pk, d.agent_id), None)
            return d, "error" if result.is_error else "ok", result.reply

        async def chain(i: int) -> list[tuple[Delivery, str, dict[str, Any] | None]]:
            async with gate:
                return [await one(batch[i]) for batch in batches]

        tasks = [asyncio.ensure_future(chain(i)) for i in range(len(batches[0]))]
        done, pending = await asyncio.wait(tasks, timeout=self.notify_patience)
        if pending:
            late = [t for t in tasks if t in pending]
            log.info(
                "league %s: %d player(s) slow to take %s; not waiting for them",
                league.league_id,
                len(late),
                "/".join(b[0].message["message_type"] for b in batches),
            )
            self.background(self._record_late(league, late, len(batches)))
        chains = [t.result() for t in tasks if t in done]
        return [[c[k] for c in chains] for k in range(len(batches))] if chains else []

    async def _record_late(self, league: League, late: list[asyncio.Task], count: int) -> None:
        """Record the chains ``send_in_order`` stopped waiting for, once they are over."""
        chains = await asyncio.gather(*late)
        await sync_to_async(record_deliveries)(league, [[c[k] for c in chains] for k in range(count)])

    async def finish_round(self, league: League, rnd: Round) -> NextRound:
        """Standings and ROUND_COMPLETED to every player, round COMPLETED; returns ``next_round``.

        With no ``round_pause`` each player's chain goes on with the next round's
        ROUND_ANNOUNCEMENT, and while the chains are sent the database thread marks this round
        COMPLETED with its notices owed, the next ANNOUNCED and claims its first matches
        (``advance_round``, one transaction): its ~10 ms (100 players) are off the path from one
        round to the next. The claimed matches start once every chain is over and the claim is
        in, as they did when the transition came after the sending; then one trip records the
        deliveries (``notices_sent``) while they play. A conductor killed before
        ``advance_round`` commits sends the whole boundary again (at least once, as any
        notification); one killed after finds the next round under way and the notices owed,
        and sends them again first (``resend_boundary``). Otherwise (the last round, or a pause)
        the round is COMPLETED once its notices are sent and recorded."""
        boundary = await sync_to_async(round_boundary)(league, rnd)
        upcoming = boundary.upcoming
        if upcoming is None:

            def complete() -> NextRound:
                mark_round_completed(rnd.pk, boundary.table)
                return next_round(league)

            return await self.deliver_in_order(league, boundary.batches, league.default_timeout, then=complete)
        # The matches start all at once (each referee's batch in one call), not as each pair of
        # players has been told: starting them as chains ended kept more of the cores busy but
        # cost every process more CPU a call (fewer calls per wake-up), 12-15 % in all (measured).
        transition = asyncio.ensure_future(
            sync_to_async(advance_round)(league, rnd.pk, boundary.table, upcoming.pk, boundary.matches, self._cooling())
        )
        try:
            outcomes = await self.send_in_order(league, boundary.batches, league.default_timeout)
        finally:
            nxt = await transition
        self._start_round(league, nxt.claimed)
        await sync_to_async(notices_sent)(league, rnd.pk, outcomes)
        return NextRound(nxt.rnd, started=bool(nxt.claimed))

    async def resend_boundary(self, league: League, rnd: Round) -> None:
        """Send the owed boundary of ``rnd`` again (a conductor stopped before recording it):
        its standings, ROUND_COMPLETED and the next round's ROUND_ANNOUNCEMENT to every player,
        at least once, then record them and clear the debt."""
        log.info("league %s: sending the notices of round %s again", league.league_id, rnd.number)
        boundary = await sync_to_async(round_boundary)(league, rnd, again=True)
        outcomes = await self.send_in_order(league, boundary.batches, league.default_timeout)
        await sync_to_async(notices_sent)(league, rnd.pk, outcomes)

    async def finish_league(self, league: League) -> None:
        deliveries, champion, table = await sync_to_async(league_end_messages)(league)
        await self.deliver(league, deliveries, league.default_timeout)
        if await sync_to_async(complete_league)(league.pk, champion, table):
            self.note_status(league.pk, league.league_id, League.Status.COMPLETED)
