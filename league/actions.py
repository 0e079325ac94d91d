"""State changes of the League Manager: named functions, each one transaction, broadcasting after commit.

The LM tools (league/lm.py), the admin and the ``league`` command all change state through
these functions, so every path obeys the same rules and leaves the same trail in the Event log.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, models, transaction
from django.utils import timezone

from league import queries
from league.auth import find_by_token, lm_token, new_token
from league.dbexec import insert_rows
from league.endpoints import endpoint_problem, endpoint_taken
from league.events import EventValues, append_events, broadcast, broadcast_all, event_values, record_event
from league.models import AgentStatus, League, Match, MatchResult, Player, Referee, Round
from league.prepared import Prepared
from leagueproto.envelope import check_agent_protocol_version
from leagueproto.errors import ErrorCode, LeagueError
from leagueproto.jsonutil import dumps
from leagueproto.scoring import match_score

REGISTRATION_CLOSED = "Registration closed"
LEAGUE_FULL = "League full"
GAME_TYPE_NOT_SUPPORTED = "Game type not supported"
ENDPOINT_TAKEN = "Endpoint already registered"
# A referee's last_seen_at is refreshed by its reports at most this often (a write per report saved).
LAST_SEEN_EVERY = timedelta(seconds=10)


# -- leagues ------------------------------------------------------------------------------------
def create_league(*, name: str, league_id: str, game_type: str = "even_odd", **settings: Any) -> League:
    with transaction.atomic():
        league = League.objects.create(name=name, league_id=league_id, game_type=game_type, **settings)
        record_event(league, "STATE", "league_created", payload={"game_type": game_type, "name": name})
    broadcast(league.league_id, "league_status", {"league_id": league.league_id, "status": league.status})
    return league


def _set_status(league: League, status: str, kind: str, **payload: Any) -> League:
    league.status = status
    record_event(league, "STATE", kind, payload={"status": status, **payload})
    broadcast(league.league_id, "league_status", {"league_id": league.league_id, "status": status, **payload})
    return league


def open_registration(league: League, seconds: float | None = 60.0) -> League:
    """REGISTERING from now for ``seconds`` (None: until closed by hand)."""
    with transaction.atomic():
        league = League.objects.select_for_update().get(pk=league.pk)
        if league.status not in (League.Status.INITIALIZING, League.Status.REGISTERING, League.Status.READY):
            raise ValueError(f"league {league.league_id} is {league.status}: registration cannot be opened")
        now = timezone.now()
        league.registration_opens_at = now
        league.registration_closes_at = now + timedelta(seconds=seconds) if seconds else None
        _set_status(
            league,
            League.Status.REGISTERING,
            "registration_opened",
            closes_at=league.registration_closes_at.isoformat() if league.registration_closes_at else None,
        )
        league.save(update_fields=["status", "registration_opens_at", "registration_closes_at"])
    return league


def close_registration(league: League) -> League:
    """End the registration window now (the league stays REGISTERING until started)."""
    with transaction.atomic():
        league = League.objects.select_for_update().get(pk=league.pk)
        league.registration_closes_at = timezone.now()
        league.save(update_fields=["registration_closes_at"])
        record_event(league, "STATE", "registration_closed", payload={"players": league.players.count()})
    broadcast(league.league_id, "league_status", {"league_id": league.league_id, "status": league.status})
    return league


def start_league(league: League) -> League:
    """Close registration and mark the league READY (the conductor then schedules and runs it)."""
    with transaction.atomic():
        league = League.objects.select_for_update().get(pk=league.pk)
        if league.status not in (League.Status.INITIALIZING, League.Status.REGISTERING):
            raise ValueError(f"league {league.league_id} is {league.status}: only a registering league can start")
        players = league.players.exclude(status__in=(AgentStatus.SUSPENDED, AgentStatus.REMOVED)).count()
        if players < league.min_players:
            raise ValueError(
                f"league {league.league_id} has {players} player(s); at least {league.min_players} are needed"
            )
        now = timezone.now()
        if not league.registration_closes_at or league.registration_closes_at > now:
            league.registration_closes_at = now
        _set_status(league, League.Status.READY, "league_ready", players=players)
        league.save(update_fields=["status", "registration_closes_at"])
    return league


def set_agent_status(agent: Player | Referee, status: str) -> None:
    """Suspend or remove an agent (admin); recorded and broadcast like any transition."""
    with transaction.atomic():
        type(agent).objects.filter(pk=agent.pk).update(status=status)
        agent_id = agent.player_id if isinstance(agent, Player) else agent.referee_id
        record_event(agent.league, "STATE", f"agent_{status.lower()}", agent=agent_id, payload={"status": status})


def revoke_agent(agent: Player | Referee) -> None:
    """Revoke an agent's token at once (admin): the hash is replaced by one whose token no one
    holds and the agent is SUSPENDED. Its next call is E012. To let the machine back in, remove
    the agent: its endpoint may then register afresh and gets a new id and token."""
    with transaction.atomic():
        _, unusable_hash = new_token()  # the token itself is dropped unseen
        type(agent).objects.filter(pk=agent.pk).update(status=AgentStatus.SUSPENDED, token_hash=unusable_hash)
        agent_id = agent.player_id if isinstance(agent, Player) else agent.referee_id
        record_event(agent.league, "STATE", "agent_revoked", agent=agent_id, payload={"status": AgentStatus.SUSPENDED})


def create_match(
    league: League,
    round_number: int,
    player_a: Player,
    player_b: Player,
    *,
    match_id: str | None = None,
    referee: Referee | None = None,
) -> Match:
    """One match outside the scheduler (admin, tests); with a referee it is ASSIGNED to it."""
    with transaction.atomic():
        rnd, _ = Round.objects.get_or_create(league=league, number=round_number)
        if match_id is None:
            match_id = f"R{round_number}M{rnd.matches.count() + 1}"
        now = timezone.now()
        match = Match.objects.create(
            league=league,
            round=rnd,
            match_id=match_id,
            player_a=player_a,
            player_b=player_b,
            game_type=league.game_type,
            referee=referee,
            status=Match.Status.ASSIGNED if referee else Match.Status.SCHEDULED,
            assigned_at=now if referee else None,
            deadline_at=now + timedelta(seconds=league.match_deadline) if referee else None,
            attempt=1 if referee else 0,
        )
        record_event(
            league,
            "STATE",
            "match_assigned" if referee else "match_created",
            agent=referee.referee_id if referee else "",
            match_id=match_id,
            payload={"player_A_id": player_a.player_id, "player_B_id": player_b.player_id},
        )
    return match


# -- registration --------------------------------------------------------------------------------
@dataclass
class Registration:
    """The outcome of a registration request, ready to be put in the response message."""

    league_id: str | None
    status: str  # ACCEPTED / REJECTED
    reason: str | None = None
    agent_id: str | None = None
    auth_token: str | None = None
    league_manager_token: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    league_pk: int | None = None  # the league's key, so the caller can log the call without a query


def registration_league(league_id: str | None, *, for_referee: bool = False) -> League:
    """The league a registration goes to: the named one, or the one league open for registration."""
    if league_id:
        return queries.get_league(league_id)
    now = timezone.now()
    candidates = [x for x in League.objects.filter(status=League.Status.REGISTERING) if x.registration_open(now)]
    if not candidates and for_referee:
        # Referees may join a league that is already under way, to add capacity.
        candidates = list(
            League.objects.filter(status__in=(League.Status.READY, League.Status.RUNNING, League.Status.PAUSED))
        )
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise LeagueError(
            ErrorCode.LEAGUE_NOT_FOUND,
            "no league is open for registration; ask the organiser or name a league with league_id",
        )
    names = sorted(x.league_id for x in candidates)
    raise LeagueError(
        ErrorCode.LEAGUE_NOT_FOUND,
        f"{len(names)} leagues are open for registration ({', '.join(names)}): name one with league_id",
        context={"leagues": names},
    )


def _agents_sql(model: type[Player] | type[Referee]) -> str:
    """One query for what a registration needs to know of the league's agents of a kind: how many
    are not removed, how many of those use an endpoint, and the highest id (the longest, then the
    greatest: ids are a prefix and a number)."""
    meta = model._meta
    quote = connection.ops.quote_name
    table, agent_id = (
        quote(meta.db_table),
        quote(meta.get_field("player_id" if model is Player else "referee_id").column),
    )
    league, status, endpoint = (quote(meta.get_field(name).column) for name in ("league", "status", "endpoint"))
    return (
        f"SELECT COUNT(*), COALESCE(SUM(CASE WHEN {endpoint} = %s THEN 1 ELSE 0 END), 0),"
        f" (SELECT {agent_id} FROM {table} WHERE {league} = %s ORDER BY LENGTH({agent_id}) DESC, {agent_id} DESC"
        f" LIMIT 1) FROM {table} WHERE {league} = %s AND {status} <> %s"
    )


def _agents_summary(model: type[Player] | type[Referee], league_pk: int, endpoint: str) -> tuple[int, int, str | None]:
    """``(agents not removed, of those at endpoint, highest id)`` of a league's agents of a kind."""
    with connection.cursor() as cursor:
        cursor.execute(_agents_sql(model), [endpoint, league_pk, league_pk, AgentStatus.REMOVED.value])
        count, taken, top = cursor.fetchone()
    return count, taken, top


def _next_id(model: type[Player] | type[Referee], league: League, prefix: str, top: str | None) -> str:
    """The id after ``top`` (the league's highest, see ``_agents_summary``)."""
    field_name = "player_id" if model is Player else "referee_id"
    if top is not None:
        digits = top[len(prefix) :]
        if top.startswith(prefix) and digits.isdigit():
            return f"{prefix}{int(digits) + 1:02d}"
    highest = 0  # an id made by hand is the longest: look at them all
    for value in model.objects.filter(league=league).values_list(field_name, flat=True):
        digits = value[len(prefix) :]
        if digits.isdigit():
            highest = max(highest, int(digits))
    return f"{prefix}{highest + 1:02d}"


# The league's row, locked for the rest of a registration's transaction.
_LEAGUE_LOCKED = Prepared(lambda pk: League.objects.select_for_update().filter(pk=pk).order_by()[:1], -701)


def _register(
    *,
    kind: str,
    league_id: str | None,
    meta: dict[str, Any],
    presented_token: str | None,
) -> Registration:
    model: type[Player] | type[Referee] = Player if kind == "player" else Referee
    prefix = "P" if kind == "player" else "REF"
    endpoint = meta["contact_endpoint"]
    with transaction.atomic():
        league = registration_league(league_id, for_referee=kind == "referee")
        # Serialise registrations per league: ids and the capacity check stay exact.
        league = _LEAGUE_LOCKED.first(league.pk)

        def rejected(reason: str) -> Registration:
            return Registration(league.league_id, "REJECTED", reason, league_pk=league.pk)

        # A known agent re-registering with its token: update its endpoint and rotate its token
        # (the reply carries the new one; the old one stops working with this commit).
        if presented_token:
            other_kind = "referee" if kind == "player" else "player"
            same = find_by_token(presented_token, kind)
            if same is None and find_by_token(presented_token, other_kind) is not None:
                raise LeagueError(
                    ErrorCode.AUTH_TOKEN_INVALID,
                    f"that auth_token belongs to a {other_kind}; a {other_kind} cannot register as a {kind}",
                )
            if same is not None and same.league_id == league.pk and same.status != AgentStatus.REMOVED:
                problem = endpoint_problem(endpoint, league.allowed_networks)
                if problem:
                    return rejected(problem)
                same.endpoint = endpoint
                same.display_name = meta.get("display_name") or same.display_name
                same.version = meta.get("version") or same.version
                same.game_types = meta.get("game_types") or same.game_types
                same.last_seen_at = timezone.now()
                token, same.token_hash = new_token()
                fields = ["endpoint", "display_name", "version", "game_types", "last_seen_at", "token_hash"]
                if same.unreachable_since is not None:
                    # Marked unreachable by the conductor (league/conductor.py), and here it is again:
                    # back in play at once (a referee the conductor suspended is ACTIVE again; one an
                    # admin suspended has no such mark and stays suspended).
                    same.unreachable_since, same.unreachable_reason, same.failures = None, "", 0
                    fields += ["unreachable_since", "unreachable_reason", "failures"]
                    if same.status == AgentStatus.SUSPENDED:
                        same.status = AgentStatus.ACTIVE
                        fields.append("status")
                same.save(update_fields=fields)
                agent_id = same.player_id if kind == "player" else same.referee_id
                record_event(
                    league,
                    "STATE",
                    f"{kind}_endpoint_updated",
                    agent=agent_id,
                    payload={"endpoint": endpoint, "token_rotated": True},
                )
                return Registration(
                    league.league_id,
                    "ACCEPTED",
                    None,
                    agent_id,
                    token,
                    lm_token(league.league_id, agent_id, same.token_hash),
                    league_pk=league.pk,
                )

        if kind == "player":
            if not league.registration_open():
                return rejected(REGISTRATION_CLOSED)
        elif league.status not in (*queries.ACTIVE_STATUSES, League.Status.INITIALIZING):
            return rejected(REGISTRATION_CLOSED)
        if meta.get("game_types") is None:  # left out: the agent plays the league's game
            meta = {**meta, "game_types": [league.game_type]}
        if league.game_type not in meta["game_types"]:
            return rejected(GAME_TYPE_NOT_SUPPORTED)
        count, taken, top = _agents_summary(model, league.pk, endpoint)
        limit = league.max_players if kind == "player" else league.max_referees
        if count >= limit:
            return rejected(LEAGUE_FULL)
        problem = endpoint_problem(endpoint, league.allowed_networks)
        if problem:
            return rejected(problem)
        if taken or endpoint_taken(model, league.pk, endpoint):  # the same URL, or another spelling of it
            return rejected(ENDPOINT_TAKEN)

        agent_id = _next_id(model, league, prefix, top)
        token, token_hash = new_token()
        now = timezone.now()
        # Every column, as the model's defaults would fill them: one plain INSERT (insert_rows).
        fields: dict[str, Any] = {
            "league": league.pk,
            "display_name": meta.get("display_name") or agent_id,
            "version": meta.get("version") or "",
            "endpoint": endpoint,
            "game_types": list(meta.get("game_types") or []),
            "token_hash": token_hash,
            "status": AgentStatus.REGISTERED.value,
            "failures": 0,
            "registered_at": now,
            "last_seen_at": now,
        }
        if kind == "player":
            fields["player_id"] = agent_id
            fields["protocol_version"] = meta.get("protocol_version") or UNKNOWN_PROTOCOL_VERSION
        else:
            fields["referee_id"] = agent_id
            fields["max_concurrent_matches"] = meta.get("max_concurrent_matches") or 2
        insert_rows(model, tuple(fields), [tuple(fields.values())])
        append_events(
            [
                event_values(
                    league,
                    "STATE",
                    f"{kind}_registered",
                    agent=agent_id,
                    payload={"display_name": fields["display_name"], "endpoint": endpoint},
                )
            ]
        )
        broadcast(
            league.league_id,
            f"{kind}_registered",
            {f"{kind}_id": agent_id, "display_name": fields["display_name"], "endpoint": endpoint},
        )
        return Registration(
            league.league_id,
            "ACCEPTED",
            None,
            agent_id,
            token,
            lm_token(league.league_id, agent_id, token_hash),
            league_pk=league.pk,
        )


# What a player that declared no protocol_version is recorded with (the course's registration has none).
UNKNOWN_PROTOCOL_VERSION = "unknown"


def register_player(league_id: str | None, player_meta: dict[str, Any], presented_token: str | None) -> Registration:
    """E018 when protocol_version is given and below 2.0.0 (absent is fine: recorded as unknown);
    REJECTED when closed, full, game type or endpoint refused (docs/protocol.md, "Registering")."""
    check_agent_protocol_version(player_meta.get("protocol_version"))
    return _register(kind="player", league_id=league_id, meta=player_meta, presented_token=presented_token)


def register_referee(league_id: str | None, referee_meta: dict[str, Any], presented_token: str | None) -> Registration:
    if referee_meta.get("protocol_version") is not None:
        check_agent_protocol_version(referee_meta["protocol_version"])
    return _register(kind="referee", league_id=league_id, meta=referee_meta, presented_token=presented_token)


# -- results -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Recorded:
    status: str  # RECORDED / DUPLICATE
    match_id: str


def report_digest(result: dict[str, Any]) -> str:
    """What makes two reports "the same": the outcome fields, not the log's timings."""
    keys = ("status", "winner", "score", "technical_loss", "details")
    canonical = {k: result.get(k) for k in keys}
    return hashlib.sha256(dumps(canonical)).hexdigest()


def _validated_outcome(match: Match, result: dict[str, Any]) -> dict[str, Any]:
    """Check the reported result against the match and the scoring rules (E002 otherwise)."""
    outcome = _checked_outcome(match.match_id, match.player_a.player_id, match.player_b.player_id, result)
    side = outcome.pop("winner_side")
    outcome["winner"] = match.player_a if side == "a" else match.player_b if side == "b" else None
    return outcome


def _checked_outcome(match_id: str, a: str, b: str, result: dict[str, Any]) -> dict[str, Any]:
    """The MatchResult fields of a result reported for ``match_id`` between players ``a`` and ``b``
    (E002 when it breaks the scoring rules); ``winner_side`` is "a", "b" or None."""
    status = result.get("status")
    winner = result.get("winner")
    score = result.get("score") or {}
    technical = list(result.get("technical_loss") or [])

    def bad(description: str) -> LeagueError:
        return LeagueError(
            ErrorCode.INVALID_MESSAGE_FORMAT,
            f"result of {match_id}: {description}",
            context={"match_id": match_id, "players": [a, b], "result": result},
        )

    if set(score) != {a, b}:
        raise bad(f"score must name exactly the match's players {a} and {b}")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in score.values()):
        raise bad("score values must be integers")
    if winner is not None and winner not in (a, b):
        raise bad(f"winner {winner!r} is not a player of this match")
    if any(p not in (a, b) for p in technical) or len(set(technical)) != len(technical):
        raise bad("technical_loss must list players of this match, each once")
    if status == "WIN":
        if winner is None or technical:
            raise bad("a WIN names a winner and no technical loss")
        expected = match_score(a, b, winner)
    elif status == "DRAW":
        if winner is not None or technical:
            raise bad("a DRAW has no winner and no technical loss")
        expected = match_score(a, b, None)
    elif status == "TECHNICAL_LOSS":
        if len(technical) == 1:
            other = b if technical[0] == a else a
            if winner != other:
                raise bad(f"with {technical[0]} losing technically the winner is {other}")
            expected = match_score(a, b, other, technical)
        elif len(technical) == 2:
            if winner is not None:
                raise bad("when both players fail there is no winner")
            expected = match_score(a, b, None, technical)
        else:
            raise bad("a TECHNICAL_LOSS lists the offender(s) in technical_loss")
    else:
        raise bad("status must be WIN, DRAW or TECHNICAL_LOSS")
    if score != expected:
        raise bad(f"score {score} does not follow the scoring rules (expected {expected})")
    if status == "WIN":
        outcome = MatchResult.Outcome.WIN_A if winner == a else MatchResult.Outcome.WIN_B
    elif status == "DRAW":
        outcome = MatchResult.Outcome.DRAW
    elif len(technical) == 2:
        outcome = MatchResult.Outcome.BOTH_LOSE
    else:
        outcome = MatchResult.Outcome.WIN_A if winner == a else MatchResult.Outcome.WIN_B
    return {
        "outcome": outcome,
        "winner_side": "a" if winner == a else "b" if winner == b else None,
        "points_a": score[a],
        "points_b": score[b],
        "technical_loss_a": a in technical,
        "technical_loss_b": b in technical,
    }


@dataclass(frozen=True)
class Report:
    """One MATCH_RESULT_REPORT from an authenticated referee (its ``league`` loaded)."""

    referee: Referee
    match_id: str
    result: dict[str, Any]
    match_log: list[Any] | None = None


# What the report path reads of a match, in one query for a whole batch (no model instances:
# building them and compiling their joins was most of a report's CPU).
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
    "result__report_digest",
    "result__referee_id",
    "result__referee__referee_id",
)
_CLOSED = (Match.Status.CANCELLED, Match.Status.FINISHED)
# The columns of a MatchResult row as the report path writes it (``dbexec.insert_rows``).
_RESULT_COLUMNS = (
    "match",
    "league",
    "referee",
    "outcome",
    "winner",
    "points_a",
    "points_b",
    "technical_loss_a",
    "technical_loss_b",
    "details",
    "log",
    "report_digest",
    "reported_at",
)


def _report_matches(wanted: dict[int, set[str]]) -> list[dict[str, Any]]:
    """The matches a batch of reports names (league pk -> match ids), as ``_MATCH_COLUMNS`` dicts.

    Hand-written SQL (through Django's cursor, for SQLite and PostgreSQL): the ORM spent several
    times the query's own cost compiling its five joins, once per batch, on the report path.
    On PostgreSQL the match rows are locked (concurrent reports of one match queue here, so the
    second sees the first's result); SQLite needs no lock: the IMMEDIATE transaction already
    holds the write lock.
    """
    connection = transaction.get_connection()
    q = connection.ops.quote_name

    def table(model: type[models.Model]) -> str:
        return q(model._meta.db_table)

    def col(model: type[models.Model], name: str) -> str:
        return q(model._meta.get_field(name).column)

    where, params = [], []
    for league_pk, match_ids in wanted.items():
        where.append(
            f"(m.{col(Match, 'league')} = %s AND m.{col(Match, 'match_id')} IN ({', '.join(['%s'] * len(match_ids))}))"
        )
        params.extend([league_pk, *sorted(match_ids)])
    sql = (
        f"SELECT m.{col(Match, 'id')}, m.{col(Match, 'league')}, m.{col(Match, 'match_id')}, m.{col(Match, 'status')},"
        f" m.{col(Match, 'referee')}, rf.{col(Referee, 'referee_id')},"
        f" m.{col(Match, 'player_a')}, pa.{col(Player, 'player_id')},"
        f" m.{col(Match, 'player_b')}, pb.{col(Player, 'player_id')},"
        f" m.{col(Match, 'round')}, r.{col(Round, 'number')},"
        f" mr.{col(MatchResult, 'report_digest')}, mr.{col(MatchResult, 'referee')}, mrf.{col(Referee, 'referee_id')}"
        f" FROM {table(Match)} m"
        f" JOIN {table(Player)} pa ON pa.{col(Player, 'id')} = m.{col(Match, 'player_a')}"
        f" JOIN {table(Player)} pb ON pb.{col(Player, 'id')} = m.{col(Match, 'player_b')}"
        f" JOIN {table(Round)} r ON r.{col(Round, 'id')} = m.{col(Match, 'round')}"
        f" LEFT JOIN {table(Referee)} rf ON rf.{col(Referee, 'id')} = m.{col(Match, 'referee')}"
        f" LEFT JOIN {table(MatchResult)} mr ON mr.{col(MatchResult, 'match')} = m.{col(Match, 'id')}"
        f" LEFT JOIN {table(Referee)} mrf ON mrf.{col(Referee, 'id')} = mr.{col(MatchResult, 'referee')}"
        f" WHERE {' OR '.join(where)}"
    )
    if connection.features.has_select_for_update_of:
        # Locked in id order, so two batches naming the same matches never wait on each other
        # crosswise. SQLite gets no ORDER BY: with one, its planner walked every match of the
        # league by the league index to return them in id order (0.5 ms a batch at 4,950
        # matches) instead of looking up the named ones by the (league, match_id) unique index
        # (0.01 ms); the caller keys the rows by match anyway.
        sql += f" ORDER BY m.{col(Match, 'id')} FOR UPDATE OF m"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [dict(zip(_MATCH_COLUMNS, row, strict=True)) for row in cursor.fetchall()]


def _finish_matches(match_pks: list[int], now: datetime) -> None:
    """Mark the matches FINISHED at ``now`` (one UPDATE; see ``_report_matches`` for why by hand)."""
    connection = transaction.get_connection()
    q = connection.ops.quote_name
    meta = Match._meta
    finished_at = meta.get_field("finished_at")
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {q(meta.db_table)} SET {q(meta.get_field('status').column)} = %s, {q(finished_at.column)} = %s"
            f" WHERE {q(meta.pk.column)} IN ({', '.join(['%s'] * len(match_pks))})",
            [Match.Status.FINISHED, finished_at.get_db_prep_save(now, connection), *match_pks],
        )


def _mark_round_played(round_pk: int) -> bool:
    """PLAYED when no match of the round is left unfinished (one conditional UPDATE): whether it
    changed. Only a PENDING or ANNOUNCED round changes, so it happens once per round."""
    connection = transaction.get_connection()
    q = connection.ops.quote_name
    rounds, matches = Round._meta, Match._meta
    status, match_status = q(rounds.get_field("status").column), q(matches.get_field("status").column)
    with connection.cursor() as cursor:
        if connection.features.has_select_for_update:
            # PostgreSQL, READ COMMITTED: two transactions finishing a round's last two matches
            # would each see the other's match unfinished and neither mark the round. Taking the
            # round's lock first makes the second wait for the first to commit; its UPDATE (a new
            # statement, so a new snapshot) then sees both. SQLite's IMMEDIATE transactions
            # already run one writer at a time.
            cursor.execute(
                f"SELECT 1 FROM {q(rounds.db_table)} WHERE {q(rounds.pk.column)} = %s FOR UPDATE", [round_pk]
            )
        cursor.execute(
            f"UPDATE {q(rounds.db_table)} SET {status} = %s"
            f" WHERE {q(rounds.pk.column)} = %s AND {status} IN (%s, %s) AND NOT EXISTS ("
            f"SELECT 1 FROM {q(matches.db_table)} WHERE {q(matches.get_field('round').column)} = %s"
            f" AND {match_status} NOT IN (%s, %s))",
            [
                Round.Status.PLAYED,
                round_pk,
                Round.Status.PENDING,
                Round.Status.ANNOUNCED,
                round_pk,
                *_CLOSED,
            ],
        )
        return cursor.rowcount == 1


def record_result(
    referee: Referee, match_id: str, result: dict[str, Any], match_log: list[Any] | None = None
) -> Recorded:
    """Store a referee's MATCH_RESULT_REPORT (docs/protocol.md, "Reporting a result"), once.

    E006 unknown match; E015 the match is assigned to another referee, was cancelled, or already
    has a different result (the conflict is logged); an identical repeat is DUPLICATE.
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
    from league.events import strip_secrets, without_secrets

    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("record_results runs inside transaction.atomic()")
    wanted: dict[int, set[str]] = {}
    for report in reports:
        wanted.setdefault(report.referee.league_id, set()).add(report.match_id)
    found = {(row["league_id"], row["match_id"]): row for row in _report_matches(wanted)} if wanted else {}

    now = timezone.now()
    outcomes: list[Recorded | LeagueError] = []
    rows: list[EventValues] = []
    results: list[tuple[Any, ...]] = []  # MatchResult rows: _RESULT_COLUMNS
    broadcasts: list[tuple[str, str, dict[str, Any]]] = []
    finished: list[int] = []
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
        if match["referee_id"] != referee.pk:
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
            outcome = _checked_outcome(match_id, a, b, result)
        except LeagueError as err:
            outcomes.append(err)
            continue
        side = outcome.pop("winner_side")
        winner = match["player_a_id"] if side == "a" else match["player_b_id"] if side == "b" else None
        results.append(
            (
                match["pk"],
                league.pk,
                referee.pk,
                outcome["outcome"],
                winner,
                outcome["points_a"],
                outcome["points_b"],
                outcome["technical_loss_a"],
                outcome["technical_loss_b"],
                strip_secrets(result.get("details") or {}),
                without_secrets(report.match_log or []),
                digest,
                now,
            )
        )
        finished.append(match["pk"])
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
        last_of_round[match["round_id"]] = (len(rows), match["round__number"], news)
        rows.append(
            event_values(league, "STATE", "match_finished", agent=referee.referee_id, match_id=match_id, payload=result)
        )
        outcomes.append(Recorded("RECORDED", match_id))
        broadcasts.append((league.league_id, "match_finished", news))
    if not results:
        return outcomes, rows
    insert_rows(MatchResult, _RESULT_COLUMNS, results)
    _finish_matches(finished, now)
    if stale_referees:
        Referee.objects.filter(pk__in=list(stale_referees)).update(last_seen_at=now, failures=0)
        for referee in stale_referees.values():
            referee.last_seen_at, referee.failures = now, 0
    played = []
    for round_pk, (index, number, news) in last_of_round.items():
        if _mark_round_played(round_pk):
            played.append((index, number))
            news["round_played"] = True
    broadcast_all(broadcasts)  # after the commit, in order, with round_played filled in
    for index, number in sorted(played, reverse=True):
        league_pk = rows[index][0]
        rows.insert(index, (league_pk, "STATE", "round_played", "", "", {"round_id": number}))
    return outcomes, rows
