"""Recording referees' results (docs/protocol.md, "Reporting a result"): the hot path of a
league, 4,950 reports for 100 players. Reports that arrive together are recorded in one
transaction with one query per step for the whole batch: read the matches, insert the results,
finish the matches, refresh stale referees, one round-played check per round touched."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from league.actions.arena import rate_results
from league.actions.outcomes import check_match_log, checked_outcome, report_digest
from league.events import EventValues, append_events, broadcast_all, event_values, strip_secrets
from league.models import Event, League, Match, MatchResult, Player, Referee, Round
from leagueproto.errors import ErrorCode, LeagueError

# A referee's last_seen_at is refreshed by its reports at most this often (a write per report saved).
LAST_SEEN_EVERY = timedelta(seconds=10)


@dataclass(frozen=True)
class Recorded:
    status: str  # RECORDED / DUPLICATE
    match_id: str


@dataclass(frozen=True)
class Report:
    """One MATCH_RESULT_REPORT from an authenticated referee (its ``league`` loaded)."""

    referee: Referee
    match_id: str
    result: dict[str, Any]
    match_log: list[Any] | None = None


# What the report path reads of a match, in one query for a whole batch: values, not model
# instances (a report needs a few columns of five tables, not five objects).
_MATCH_COLUMNS = (
    "pk",
    "league_id",
    "match_id",
    "status",
    "referee_id",
    "referee__referee_id",
    "player_a_id",
    "player_a__player_id",
    "player_b_id",
    "player_b__player_id",
    "round_id",
    "round__number",
    "game_type",
    "result__report_digest",
    "result__referee_id",
    "result__referee__referee_id",
)
_CLOSED = (Match.Status.CANCELLED, Match.Status.FINISHED)
_LEAGUE_OVER = (League.Status.COMPLETED, League.Status.CANCELLED)


def _report_matches(wanted: dict[int, set[str]]) -> list[dict[str, Any]]:
    """The matches a batch of reports names (league pk -> match ids), as ``_MATCH_COLUMNS`` dicts.

    On PostgreSQL the match rows are locked (concurrent reports of one match queue here, so the
    second sees the first's result), in id order so two batches naming the same matches never
    wait on each other crosswise. SQLite needs no lock: the IMMEDIATE transaction already holds
    the write lock; nor an order (the caller keys the rows by match), which would make its
    planner walk the league's matches in id order instead of looking the named ones up.
    """
    named = Q()
    for league_pk, match_ids in wanted.items():
        named |= Q(league_id=league_pk, match_id__in=sorted(match_ids))
    matches = Match.objects.filter(named).order_by()
    if transaction.get_connection().features.has_select_for_update_of:
        # Only the match rows: the referee and result sides are outer joins, which cannot be locked.
        matches = matches.select_for_update(of=("self",)).order_by("pk")
    return list(matches.values(*_MATCH_COLUMNS))


def was_assigned(league_pk: int, match_id: str, referee_id: str) -> bool:
    """Whether the match was ever assigned to this referee (its ``match_assigned`` Event): a report
    of a match no longer assigned to it is recorded only then. Read only for such late reports."""
    assigned = Event.objects.filter(league_id=league_pk, kind="match_assigned", match_id=match_id)
    return assigned.filter(agent=referee_id).exists()


def mark_silent(silent: dict[League, dict[str, str]], now: datetime) -> list[EventValues]:
    """Mark unreachable the players a referee's report found silent (no answer at all after the
    retries), so their next matches are decided at once instead of each waiting out the same
    timeouts; the conductor probes them and lets them back in when they answer a ping. The
    ``player_unreachable`` Event rows, for those not marked already."""
    rows: list[EventValues] = []
    for league, players in silent.items():
        fresh = Player.objects.filter(league=league, player_id__in=list(players), unreachable_since__isnull=True)
        for pk, player_id in list(fresh.values_list("pk", "player_id")):
            reason = f"failed: no answer at all in {players[player_id]}, as its referee reported"
            Player.objects.filter(pk=pk).update(unreachable_since=now, unreachable_reason=reason)
            payload = {"reason": reason}
            rows.append(event_values(league, "STATE", "player_unreachable", agent=player_id, payload=payload))
    return rows


def mark_round_played(round_pk: int) -> bool:
    """PLAYED when no match of the round is left unfinished (one conditional UPDATE): whether it
    changed. Only a PENDING or ANNOUNCED round changes, so it happens once per round. The caller
    moves the league's version on (``record_results``, with the results that played it out)."""
    if transaction.get_connection().features.has_select_for_update:
        # PostgreSQL, READ COMMITTED: two transactions finishing a round's last two matches
        # would each see the other's match unfinished and neither mark the round. Taking the
        # round's lock first makes the second wait for the first to commit; its UPDATE (a new
        # statement, so a new snapshot) then sees both. SQLite's IMMEDIATE transactions
        # already run one writer at a time.
        list(Round.objects.select_for_update().filter(pk=round_pk).order_by().values_list("pk"))
    unfinished = Match.objects.filter(round=OuterRef("pk")).exclude(status__in=_CLOSED)
    changed = (
        Round.objects.filter(pk=round_pk, status__in=(Round.Status.PENDING, Round.Status.ANNOUNCED))
        .filter(~Exists(unfinished))
        .update(status=Round.Status.PLAYED)
    )
    return changed == 1


def record_result(
    referee: Referee, match_id: str, result: dict[str, Any], match_log: list[Any] | None = None
) -> Recorded:
    """Store a referee's MATCH_RESULT_REPORT (docs/protocol.md, "Reporting a result"), once.

    E006 unknown match; E015 the match was never assigned to this referee, was cancelled, or
    already has a different result (the conflict is logged); an identical repeat is DUPLICATE.
    A match given back since this referee was assigned it (a deadline passed during an outage,
    the referee seemed gone) and not yet recorded takes this result: the first valid result of a
    match is the one recorded, and the players were told it.
    Marks the match FINISHED and its round PLAYED when it was the round's last match.
    """
    with transaction.atomic():
        (outcome,), rows = record_results([Report(referee, match_id, result, match_log)])
        append_events(rows)
    if isinstance(outcome, LeagueError):
        raise outcome  # after the transaction, so a conflict stays in the log
    return outcome


def record_results(reports: list[Report]) -> tuple[list[Recorded | LeagueError], list[EventValues]]:
    """Record several reports in the caller's transaction, each judged as ``record_result`` would
    judge it alone, in order (a repeat of a report earlier in the list is DUPLICATE).

    Returns each report's Recorded or LeagueError, and the Event rows (match_finished,
    round_played, report_conflict) for the caller to insert together with its own, so a batch
    costs one query per step whatever its size: read the matches, insert the results, finish
    the matches, refresh stale referees, one round-played check per round touched. A failing
    report writes nothing (a conflict only its report_conflict event); the others go on.
    Broadcasts go out after the commit.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("record_results runs inside transaction.atomic()")
    wanted: dict[int, set[str]] = {}
    for report in reports:
        wanted.setdefault(report.referee.league_id, set()).add(report.match_id)
    found = {(row["league_id"], row["match_id"]): row for row in _report_matches(wanted)} if wanted else {}

    now = timezone.now()
    outcomes: list[Recorded | LeagueError] = []
    rows: list[EventValues] = []
    results: list[MatchResult] = []
    arena_results: list[MatchResult] = []  # rated in this transaction (league/actions/arena.py)
    broadcasts: list[tuple[str, str, dict[str, Any]]] = []
    finished: list[int] = []
    silent: dict[League, dict[str, str]] = {}  # league → player the referee found silent → in which match
    late_by: dict[int, list[int]] = {}  # referee pk → the matches it reported after they were given back
    stale_referees: dict[int, Referee] = {}
    # round pk -> (index in rows of its last match_finished, round number, that match's broadcast)
    last_of_round: dict[int, tuple[int, int, dict[str, Any]]] = {}
    for report in reports:
        referee, league, match_id, result = report.referee, report.referee.league, report.match_id, report.result
        match = found.get((league.pk, match_id))
        if match is None:
            outcomes.append(
                LeagueError(
                    ErrorCode.MATCH_NOT_FOUND,
                    f"match {match_id} does not exist in league {league.league_id}",
                    context={"match_id": match_id, "league_id": league.league_id},
                )
            )
            continue
        digest = report_digest(result)
        if match["result__report_digest"] is not None:
            if match["result__report_digest"] == digest and match["result__referee_id"] == referee.pk:
                outcomes.append(Recorded("DUPLICATE", match_id))
                continue
            outcomes.append(
                LeagueError(
                    ErrorCode.INVALID_GAME_STATE,
                    f"match {match_id} already has a different result; the first report stands",
                    context={"match_id": match_id, "recorded_by": match["result__referee__referee_id"]},
                )
            )
            rows.append(
                event_values(
                    league,
                    "STATE",
                    "report_conflict",
                    agent=referee.referee_id,
                    match_id=match_id,
                    payload={"result": result},
                )
            )
            continue
        if league.status in _LEAGUE_OVER:
            # A league's results end with it: its standings are final and its champion named.
            outcomes.append(
                LeagueError(
                    ErrorCode.INVALID_GAME_STATE,
                    f"league {league.league_id} is {league.status.lower()}: no result can be recorded",
                    context={"match_id": match_id, "league_id": league.league_id, "league_status": league.status},
                )
            )
            continue
        late = match["referee_id"] != referee.pk
        if late and (referee.pk is None or not was_assigned(league.pk, match_id, referee.referee_id)):
            outcomes.append(
                LeagueError(
                    ErrorCode.INVALID_GAME_STATE,
                    f"match {match_id} is not assigned to {referee.referee_id}",
                    context={"match_id": match_id, "assigned_referee": match["referee__referee_id"]},
                )
            )
            continue
        if match["status"] in _CLOSED:
            outcomes.append(
                LeagueError(
                    ErrorCode.INVALID_GAME_STATE,
                    f"match {match_id} is {match['status'].lower()}: no result can be recorded",
                    context={"match_id": match_id, "status": match["status"]},
                )
            )
            continue
        a, b = match["player_a__player_id"], match["player_b__player_id"]
        try:
            outcome = checked_outcome(match_id, a, b, result)
            check_match_log(match_id, match["game_type"], a, b, result, report.match_log)
        except LeagueError as err:
            outcomes.append(err)
            continue
        side = outcome.pop("winner_side")
        winner = match["player_a_id"] if side == "a" else match["player_b_id"] if side == "b" else None
        results.append(
            stored := MatchResult(
                match_id=match["pk"],
                league_id=league.pk,
                referee_id=referee.pk,
                outcome=outcome["outcome"],
                winner_id=winner,
                points_a=outcome["points_a"],
                points_b=outcome["points_b"],
                technical_loss_a=outcome["technical_loss_a"],
                technical_loss_b=outcome["technical_loss_b"],
                details=strip_secrets(result.get("details") or {}),
                log=strip_secrets(report.match_log or []),
                report_digest=digest,
                reported_at=now,
            )
        )
        finished.append(match["pk"])
        if league.is_arena:
            arena_results.append(stored)
        if late:
            # A match given back (its deadline passed, its referee seemed gone) and played all the
            # same: the first valid result of a match stands, whoever holds it now. A re-dispatch
            # in flight is withdrawn: its referee's report will find this result.
            late_by.setdefault(referee.pk, []).append(match["pk"])
            if match["referee__referee_id"]:
                rows.append(
                    event_values(
                        league,
                        "STATE",
                        "match_withdrawn",
                        agent=match["referee__referee_id"],
                        match_id=match_id,
                        payload={"reason": f"{referee.referee_id} reported the match first"},
                    )
                )
        # A later report of this match in the same batch sees this result, as it would in the table.
        match["result__report_digest"], match["result__referee_id"] = digest, referee.pk
        match["result__referee__referee_id"], match["status"] = referee.referee_id, Match.Status.FINISHED
        if referee.failures or referee.last_seen_at is None or now - referee.last_seen_at > LAST_SEEN_EVERY:
            stale_referees[referee.pk] = referee
        news = {
            "match_id": match_id,
            "round_id": match["round__number"],
            "player_A_id": a,
            "player_B_id": b,
            "referee_id": referee.referee_id,
            "result": strip_secrets(result),
            "round_played": False,  # the round's last match in the batch gets True below, if it was
        }
        if not league.is_arena:  # an arena's one round is never played out
            last_of_round[match["round_id"]] = (len(rows), match["round__number"], news)
        rows.append(
            event_values(league, "STATE", "match_finished", agent=referee.referee_id, match_id=match_id, payload=result)
        )
        outcomes.append(Recorded("RECORDED", match_id))
        broadcasts.append((league.league_id, "match_finished", news))
        said_silent = (result.get("details") or {}).get("silent")
        if isinstance(said_silent, list):
            for player_id in {p for p in said_silent if p in (a, b)}:
                silent.setdefault(league, {})[player_id] = match_id
    if not results:
        return outcomes, rows
    MatchResult.objects.bulk_create(results)
    Match.objects.filter(pk__in=finished).update(status=Match.Status.FINISHED, finished_at=now)
    for referee_pk, pks in late_by.items():
        Match.objects.filter(pk__in=pks).update(referee_id=referee_pk)
    if stale_referees:
        Referee.objects.filter(pk__in=list(stale_referees)).update(last_seen_at=now, failures=0)
        for referee in stale_referees.values():
            referee.last_seen_at, referee.failures = now, 0
    if silent:
        rows.extend(mark_silent(silent, now))
    if arena_results:
        rating_news, rating_rows = rate_results(arena_results)
        rows.extend(rating_rows)
        broadcasts.extend(rating_news)
    played = []
    for round_pk, (index, number, news) in last_of_round.items():
        if mark_round_played(round_pk):
            played.append((index, number))
            news["round_played"] = True
    # The results and the rounds they played out, in one move of each league's version.
    League.objects.filter(pk__in={result.league_id for result in results}).changed()
    broadcast_all(broadcasts)  # after the commit, in order, with round_played filled in
    for index, number in sorted(played, reverse=True):
        league_pk = rows[index][0]
        rows.insert(index, (league_pk, "STATE", "round_played", "", "", {"round_id": number}))
    return outcomes, rows
