"""What the dashboard and the REST API show: plain dicts built from the database.

One place turns rows into the shapes that the pages render, the API returns and the websocket
sends as its snapshot, so the three never disagree. Standings come from the one standings
service, :mod:`league.standings`.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Count, Func, IntegerField, Max, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from league import pairing, tournament
from league import standings as standings_service
from league.conductor import delivery_log
from league.formats import playing, table_format
from league.models import AgentStatus, League, Match, MatchResult, Player, Rating, Round
from league.tournament import Call, Played
from leagueproto.scoring import KNOCKOUT_TIE_BREAK_RULE, SWISS_TIE_BREAK_RULE, TIE_BREAK_RULE, TIE_BREAK_TEXT

RUNNING_MATCH = (Match.Status.ASSIGNED, Match.Status.RUNNING)
RECENT_MATCHES = 30
# Past this many players the crosstable would be a wall of cells (and a heavy snapshot): the
# page says so and each player's page lists its results instead.
CROSSTABLE_MAX_PLAYERS = 40
# Referees that can take a match (the conductor's LIVE statuses).
TIE_BROKEN_BY = ("buchholz", "wins", "draws", "head_to_head")
# How each format ranks, as the league page explains it under the table.
TIE_BREAK_RULES = {
    League.ScheduleFormat.SWISS: SWISS_TIE_BREAK_RULE
    + " A bye (a round sat out when the count is odd) scores as a win, without an opponent for Buchholz.",
    League.ScheduleFormat.KNOCKOUT: KNOCKOUT_TIE_BREAK_RULE,
}
LIVE_AGENT = (AgentStatus.REGISTERED, AgentStatus.ACTIVE)
IN_PLAY_LEAGUE = (League.Status.READY, League.Status.RUNNING)
# Leagues whose pages change on their own (so the pages re-read them now and then as well).
ACTIVE_LEAGUE = (League.Status.REGISTERING, League.Status.READY, League.Status.RUNNING)


def iso(moment) -> str | None:
    """A UTC time as the pages and the API write it (``2025-01-15T10:15:00Z``)."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ") if moment else None


_iso = iso


def games_score(details: Any) -> dict[str, int] | None:
    """A best-of-N match's score in games won, per player id (None for single-game matches)."""
    scores = details.get("scores") if isinstance(details, dict) else None
    if not isinstance(scores, dict) or not scores:
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in scores.values()):
        return None
    return scores


# The columns of a finished match as the tables read it (``played``): plain rows, since a league
# has up to thousands of results and model instances cost several times the query.
PLAYED_FIELDS = (
    "match__match_id",
    "match__round__number",
    "match__player_a__player_id",
    "match__player_b__player_id",
    "points_a",
    "points_b",
    "technical_loss_a",
    "technical_loss_b",
    "details__scores",  # only the games' score of the details (decoding them all costs more than the rest)
)


@dataclass(frozen=True)
class _Read:
    """A league's results as ``played`` last read them in this process."""

    created_at: Any  # the league's creation: a pk reused by another league reads afresh
    count: int
    latest: int | None
    read_at: float  # when every result was last read (time.monotonic())
    rows: tuple[Played, ...]


_reads: dict[int, _Read] = {}
_reads_lock = threading.Lock()


def played(league: League) -> list[Played]:
    """Every finished match of ``league`` as :class:`league.tournament.Played`, in the order
    the results were recorded. Results are appended, never changed: this process keeps the rows
    it read and, when the results' count and latest id (one aggregate query) say some were added
    since, reads only those; a result removed, or one added under a lower id than the latest
    kept (two transactions committing out of order), reads them all again, and so does the first
    call ``STANDINGS_CACHE_TTL`` seconds after the last full read (a result edited by hand)."""
    last = league.results.order_by().aggregate(count=Count("pk"), latest=Max("pk"))
    now = time.monotonic()
    kept = _reads.get(league.pk)
    fresh = (
        kept is not None and kept.created_at == league.created_at and now - kept.read_at < settings.STANDINGS_CACHE_TTL
    )
    if fresh and (kept.count, kept.latest) == (last["count"], last["latest"]):
        return list(kept.rows)
    if fresh and last["latest"] is not None and last["latest"] > (kept.latest or 0):
        added = _played_rows(league.results.filter(pk__gt=kept.latest or 0, pk__lte=last["latest"]))
        if kept.count + len(added) == last["count"]:
            rows = (*kept.rows, *added)
            _keep(league, _Read(league.created_at, last["count"], last["latest"], kept.read_at, rows))
            return list(rows)
    rows = tuple(_played_rows(league.results.filter(pk__lte=last["latest"] or 0)))
    _keep(league, _Read(league.created_at, len(rows), last["latest"], now, rows))
    return list(rows)


def _keep(league: League, read: _Read) -> None:
    with _reads_lock:
        if len(_reads) > 1000:
            _reads.clear()
        _reads[league.pk] = read


# A league's table as its page last ranked it in this process: the next version's results are the
# same with some added (``standings_service.RunningRanking`` checks that, and ranks afresh when not).
_rankings: dict[int, standings_service.RunningRanking] = {}


def _ranking(league: League) -> standings_service.RunningRanking:
    with _reads_lock:
        if len(_rankings) > 1000:
            _rankings.clear()
        return _rankings.setdefault(league.pk, standings_service.RunningRanking())


def _played_rows(results) -> list[Played]:
    out = []
    rows = results.order_by("id").values_list(*PLAYED_FIELDS)
    for match_id, number, a, b, points_a, points_b, tech_a, tech_b, scores in rows:
        games = games_score({"scores": scores})
        out.append(
            Played(
                match_id=match_id,
                round=number,
                player_a=a,
                player_b=b,
                points_a=points_a,
                points_b=points_b,
                technical_a=tech_a,
                technical_b=tech_b,
                games_a=games.get(a) if games else None,
                games_b=games.get(b) if games else None,
            )
        )
    return out


def standings(
    league: League, results: list[Played] | None = None, players: list[Player] | None = None
) -> list[dict[str, Any]]:
    """Ranked standings with display names and statuses, and for each row the tie-break that
    placed it below the row above (``decided_by``), its move since the latest round began and its
    recent form; a Swiss league's rows add Buchholz and byes, a knockout's the seed."""
    players = {p.player_id: p for p in (players if players is not None else league.players.all())}
    results = results if results is not None else played(league)
    fmt = table_format(league)
    ranked, before = _ranking(league).rank_and_before(
        ((p.player_id, p.display_name, p.status) for p in players.values()), [(p.round, p.row()) for p in results], fmt
    )
    swiss = league.schedule_format == League.ScheduleFormat.SWISS
    knockout = league.schedule_format == League.ScheduleFormat.KNOCKOUT
    out = []
    for row, name in ranked:
        entry = standings_service.standing_dict(row, name)
        entry["status"] = players[row.player_id].status
        if swiss:  # the page's Buchholz column (None elsewhere: no column)
            entry["buchholz"], entry["byes"] = row.buchholz, row.byes
        if knockout:  # the page's Seed column: fixed at the first draw, None before it
            entry["seed"] = players[row.player_id].seed
        entry["decided_by"] = row.decided_by
        entry["decided_by_text"] = TIE_BREAK_TEXT.get(row.decided_by, "") if row.decided_by else ""
        # The tag the pages show: only where a tie on points was broken by a criterion that
        # separates the players (not on a lead in points, nor on the player id of players level
        # on everything, nor before the row has played).
        broken = row.decided_by in TIE_BROKEN_BY and entry["played"]
        entry["tie_break"] = TIE_BREAK_TEXT[row.decided_by] if broken else ""
        out.append(entry)
    ids = [row["player_id"] for row in out]
    form = tournament.recent_form(ids, results)
    for row in out:
        # Places moved since the latest round began (positive: up); None before a second round.
        earlier = before.get(row["player_id"]) if before is not None else None
        row["rank_change"] = earlier - row["rank"] if earlier is not None else None
        row["form"] = [{k: f[k] for k in ("mark", "match_id", "technical", "score")} for f in form[row["player_id"]]]
    return out


def _player_ref(player: Player) -> dict[str, str]:
    return {"player_id": player.player_id, "display_name": player.display_name}


def match_summary(match: Match) -> dict[str, Any]:
    """A match with its result in the terms people read: who, what they chose, what was drawn."""
    try:
        result: MatchResult | None = match.result
    except MatchResult.DoesNotExist:
        result = None
    a, b = match.player_a, match.player_b
    data: dict[str, Any] = {
        "match_id": match.match_id,
        "round": match.round.number,
        "game_type": match.game_type,
        "status": match.status,
        "player_a": _player_ref(a),
        "player_b": _player_ref(b),
        "referee_id": match.referee.referee_id if match.referee_id else None,
        "assigned_at": _iso(match.assigned_at),
        "finished_at": _iso(match.finished_at),
        "result": None,
    }
    if result is not None:
        details = result.details if isinstance(result.details, dict) else {}  # whatever a referee sent
        choices = details.get("choices") or {}
        winner = result.winner.player_id if result.winner_id else None
        if winner is None and result.outcome in (MatchResult.Outcome.WIN_A, MatchResult.Outcome.WIN_B):
            winner = a.player_id if result.outcome == MatchResult.Outcome.WIN_A else b.player_id
        technical = [p.player_id for p, lost in ((a, result.technical_loss_a), (b, result.technical_loss_b)) if lost]
        data["result"] = {
            "outcome": result.outcome,
            "status": "TECHNICAL_LOSS" if technical else ("DRAW" if result.outcome == "DRAW" else "WIN"),
            "winner": winner,
            "score": {a.player_id: result.points_a, b.player_id: result.points_b},
            "technical_loss": technical,
            "choices": {k: v for k, v in choices.items()} if isinstance(choices, dict) else {},
            "drawn_number": details.get("drawn_number"),
            "number_parity": details.get("number_parity"),
            "round_scores": details.get("scores"),
            "reason": details.get("reason") or "",
            "reported_at": _iso(result.reported_at),
            "log_entries": _log_entries(match, result),
            "games_score": games_score(details),
            "game_rounds": _game_rounds(details, a.player_id, b.player_id),
            "label": _result_label(result, a.player_id, b.player_id, games_score(details)),
            "roles": _roles(details, a.player_id, b.player_id),
            "verdict": _verdict(winner, (a, b), games_score(details)),
        }
        data["finished_at"] = data["finished_at"] or _iso(result.reported_at)
    return data


def _log_entries(match: Match, result: MatchResult) -> int:
    """How many entries the match's log has (0 for a log that is not a list): counted by the
    database when the match was read with ``summaries_queryset`` (its log left unread), else
    from the log."""
    counted = getattr(match, "log_entries", None)
    if counted is not None:
        return counted
    return len(result.log) if isinstance(result.log, list) else 0


def _game_rounds(details: dict[str, Any], a: str, b: str) -> list[dict[str, Any]]:
    """The games of a best-of-N match, each with both players' moves (the match page's table)."""
    rounds = details.get("rounds")
    if not isinstance(rounds, list):
        return []
    out = []
    for item in rounds:
        if not isinstance(item, dict):
            continue
        moves = item.get("moves") if isinstance(item.get("moves"), dict) else {}
        out.append(
            {
                "game_round": item.get("game_round"),
                "move_a": moves.get(a),
                "move_b": moves.get(b),
                "sum": item.get("sum"),
                "sum_type": item.get("sum_type"),
                "winner": item.get("round_winner"),
            }
        )
    return out


def _roles(details: dict[str, Any], a: str, b: str) -> dict[str, str]:
    """Each side's parity role in a best-of-N match ("A", "B" → "ODD"/"EVEN"), when the referee said."""
    roles = details.get("roles")
    if not isinstance(roles, dict):
        return {}
    return {side: str(roles[pid]) for side, pid in (("a", a), ("b", b)) if isinstance(roles.get(pid), str)}


def _verdict(winner: str | None, players: tuple[Player, Player], games: dict[str, int] | None) -> str:
    """Who won, by name, with the games from the winner's side ("Bravo won 3–1"); "" for a draw."""
    named = {p.player_id: p.display_name for p in players}
    if winner not in named:
        return ""
    loser = next(pid for pid in named if pid != winner)
    if games is not None and winner in games and loser in games:
        return f"{named[winner]} won {games[winner]}–{games[loser]}"
    return f"{named[winner]} won"


def _result_label(result: MatchResult, a: str, b: str, games: dict[str, int] | None) -> str:
    """The result as a score, side A first: games won ("3–1") or the points ("3–0", "1–1")."""
    if games is not None and a in games and b in games:
        return f"{games[a]}–{games[b]}"
    return f"{result.points_a}–{result.points_b}"


class JSONArrayLength(Func):
    """How many items a JSON array column holds; 0 for any other JSON value (a count read in the
    database, so the array itself is not sent and decoded)."""

    function = "JSON_ARRAY_LENGTH"  # SQLite's: 0 for a value that is not an array
    output_field = IntegerField()

    def as_postgresql(self, compiler, connection, **extra_context):
        # PostgreSQL's refuses a value that is not an array.
        template = (
            "CASE WHEN JSONB_TYPEOF(%(expressions)s) = 'array' THEN JSONB_ARRAY_LENGTH(%(expressions)s) ELSE 0 END"
        )
        return self.as_sql(compiler, connection, template=template, **extra_context)


# What a match's summary reads (``match_summary``), for lists of many: a player's row and a
# result's log are wide, and decoding them would be most of a list's cost. The log's length comes
# from the database (``log_entries``).
SUMMARY_FIELDS = (
    "match_id",
    "game_type",
    "status",
    "assigned_at",
    "finished_at",
    "round__number",
    "player_a__player_id",
    "player_a__display_name",
    "player_b__player_id",
    "player_b__display_name",
    "referee__referee_id",
    "result__outcome",
    "result__points_a",
    "result__points_b",
    "result__technical_loss_a",
    "result__technical_loss_b",
    "result__details",
    "result__reported_at",
    "result__winner__player_id",
)


def summaries_queryset(league: League):
    """``matches_queryset`` with what ``match_summary`` reads only."""
    return matches_queryset(league).only(*SUMMARY_FIELDS).annotate(log_entries=JSONArrayLength("result__log"))


def matches_queryset(league: League):
    return (
        Match.objects.filter(league=league)
        .select_related("round", "player_a", "player_b", "referee", "result__winner")
        .order_by("round__number", "id")
    )


# The columns of a scheduled match (``rounds``): plain rows, since the schedule has every match
# of the league (4,950 for 100 players) and model instances cost several times the query.
SCHEDULED_FIELDS = (
    "round_id",
    "match_id",
    "status",
    "player_a__player_id",
    "player_a__display_name",
    "player_b__player_id",
    "player_b__display_name",
    "referee__referee_id",
    "result__points_a",
    "result__points_b",
    "result__technical_loss_a",
    "result__technical_loss_b",
    "result__details__scores",
)


def rounds(league: League, *, number: int | None = None) -> list[dict[str, Any]]:
    """The schedule, round by round, with how far each round got (``number``: that round only)."""
    return _schedule(league, number=number, page=False)


def page_rounds(league: League) -> list[dict[str, Any]]:
    """The schedule as the league page shows it. A league with more matches than
    ``LIVE_SCHEDULE_LISTED_MAX`` lists the matches of the rounds in play, of the last completed
    and of the next only; the others come with their counts and ``"matches": null`` (the page
    fetches one when asked: the schedule API's ``?round=N``). A 100-player schedule is 1.0 MB of
    the page's 1.2 MB snapshot, sent to every viewer that connects and rebuilt at every version."""
    return _schedule(league, number=None, page=True)


def _listed_on_the_page(rounds_of: list[Round]) -> set[int]:
    """The rounds a big league's page lists the matches of: in play, the last completed, the next."""
    in_play = {r.id for r in rounds_of if r.status in (Round.Status.ANNOUNCED, Round.Status.PLAYED)}
    completed = [r.id for r in rounds_of if r.status == Round.Status.COMPLETED]
    pending = [r.id for r in rounds_of if r.status == Round.Status.PENDING]
    return in_play | set(completed[-1:]) | set(pending[:1])


def _schedule(league: League, *, number: int | None, page: bool) -> list[dict[str, Any]]:
    """Rounds (all, or round ``number``) with their matches (``page``: as ``page_rounds`` lists them)."""
    rounds_of = Round.objects.filter(league=league).order_by("number")
    matches = Match.objects.filter(league=league)
    if number is not None:
        rounds_of = rounds_of.filter(number=number)
        matches = matches.filter(round__number=number)
    rounds_of = list(rounds_of)
    counts = {
        row["round_id"]: (row["total"], row["finished"])
        for row in matches.order_by()
        .values("round_id")
        .annotate(total=Count("pk"), finished=Count("pk", filter=Q(status=Match.Status.FINISHED)))
    }
    listed = None
    if page and sum(total for total, _ in counts.values()) > settings.LIVE_SCHEDULE_LISTED_MAX:
        listed = _listed_on_the_page(rounds_of)
        matches = matches.filter(round_id__in=listed)
    matches_by_round: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in matches.order_by("round__number", "id").values_list(*SCHEDULED_FIELDS):
        matches_by_round[row[0]].append(_scheduled(*row[1:]))
    out = []
    for rnd in rounds_of:
        total, finished = counts.get(rnd.id, (0, 0))
        out.append(
            {
                "number": rnd.number,
                "status": rnd.status,
                "announced_at": _iso(rnd.announced_at),
                "completed_at": _iso(rnd.completed_at),
                "matches_total": total,
                "matches_finished": finished,
                "matches": matches_by_round.get(rnd.id, []) if listed is None or rnd.id in listed else None,
            }
        )
    return out


def _scheduled(
    match_id: str,
    status: str,
    a: str,
    a_name: str,
    b: str,
    b_name: str,
    referee_id: str | None,
    points_a: int | None,
    points_b: int | None,
    technical_a: bool | None,
    technical_b: bool | None,
    scores: Any,
) -> dict[str, Any]:
    """A match of the schedule: who plays whom (ids and names) and, once played, the result."""
    row: dict[str, Any] = {
        "match_id": match_id,
        "player_a": a,
        "player_b": b,
        "player_a_name": a_name,
        "player_b_name": b_name,
        "status": status,
        "referee_id": referee_id,
        "result": None,
    }
    if points_a is not None and points_b is not None:
        winner = a if points_a > points_b else b if points_b > points_a else None
        games = games_score({"scores": scores})
        label = (
            f"{games[a]}–{games[b]}" if games is not None and a in games and b in games else f"{points_a}–{points_b}"
        )
        row["result"] = {"winner": winner, "label": label, "technical": bool(technical_a or technical_b)}
    return row


def percent_done(matches_finished: int, matches_total: int, status: str) -> int:
    """How far a league has come, 0–100: its finished matches of all it has scheduled. A league
    completed without a match to play is done (100); any other without a schedule has not begun.
    The league page, the league list and the API all show this number."""
    if matches_total:
        return round(100 * matches_finished / matches_total)
    return 100 if status == League.Status.COMPLETED else 0


def progress(league: League) -> dict[str, Any]:
    counts = Match.objects.filter(league=league).aggregate(
        total=Count("id"),
        finished=Count("id", filter=Q(status=Match.Status.FINISHED)),
        running=Count("id", filter=Q(status__in=RUNNING_MATCH)),
    )
    total, finished = counts["total"], counts["finished"]
    # Swiss and knockout leagues draw their rounds one by one: the total is the number they will
    # play (a knockout's, of the seeds of its first draw, or of the players before it).
    planned = league.swiss_rounds
    if league.schedule_format == League.ScheduleFormat.KNOCKOUT:
        seeded = league.players.filter(seed__isnull=False).count() or playing(league).count()
        planned = pairing.knockout_rounds(seeded)
    rounds_total = max(Round.objects.filter(league=league).count(), planned)
    rounds_done = Round.objects.filter(league=league, status__in=(Round.Status.PLAYED, Round.Status.COMPLETED)).count()
    return {
        "matches_total": total,
        "matches_finished": finished,
        "matches_running": counts["running"],
        "rounds_total": rounds_total,
        "rounds_completed": rounds_done,
        "current_round": league.current_round,
        "percent": percent_done(finished, total, league.status),
    }


def points_over_rounds(
    league: League, results: list[Played] | None = None, players: list[Player] | None = None
) -> dict[str, Any]:
    """Each player's cumulative points after every round that has results (the chart's data)."""
    results = results if results is not None else played(league)
    players = sorted(players, key=lambda p: p.pk) if players is not None else list(league.players.order_by("id"))
    numbers = sorted({r.round for r in results})
    per_round: dict[int, Counter] = defaultdict(Counter)
    for r in results:
        per_round[r.round][r.player_a] += r.points_a
        per_round[r.round][r.player_b] += r.points_b
    series = []
    for player in players:
        total, points = 0, []
        for number in numbers:
            total += per_round[number][player.player_id]
            points.append(total)
        series.append({"player_id": player.player_id, "display_name": player.display_name, "points": points})
    return {"rounds": [f"R{n}" for n in numbers], "series": series}


def headcount(noun: str, live: int, suspended: int, exited: int) -> str:
    """A headline count of agents: the live ones (REGISTERED/ACTIVE) first, then those that are
    not, apart ("12 players · 2 suspended"): a suspended or exited agent plays no match."""
    parts = [f"{live} {noun}{'s' if live != 1 else ''}"]
    parts += [f"{n} {what}" for n, what in ((suspended, "suspended"), (exited, "exited")) if n]
    return " · ".join(parts)


def _headcount(agents, noun: str) -> str:
    by_status = Counter(dict(agents.values_list("status").annotate(n=Count("id")).values_list("status", "n")))
    live = sum(by_status[s] for s in LIVE_AGENT)
    return headcount(noun, live, by_status[AgentStatus.SUSPENDED], by_status[AgentStatus.SHUTDOWN])


def league_summary(league: League) -> dict[str, Any]:
    players = league.players.exclude(status="REMOVED").count()
    referees = league.referees.exclude(status="REMOVED").count()
    return {
        "league_id": league.league_id,
        "name": league.name,
        "game_type": league.game_type,
        "status": league.status,
        "schedule_format": league.schedule_format,
        "registration_open": league.registration_open(),
        "registration_opens_at": _iso(league.registration_opens_at),
        "registration_closes_at": _iso(league.registration_closes_at),
        "min_players": league.min_players,
        "max_players": league.max_players,
        "players": players,
        "referees": referees,
        "players_text": _headcount(league.players.all(), "player"),
        "referees_text": _headcount(league.referees.all(), "referee"),
        "current_round": league.current_round,
        "champion": _player_ref(league.champion) if league.champion_id else None,
        "created_at": _iso(league.created_at),
        "started_at": _iso(league.started_at),
        "completed_at": _iso(league.completed_at),
    }


def recent_matches(league: League, limit: int = RECENT_MATCHES) -> list[dict[str, Any]]:
    """The feed: running matches, then the latest finished ones, newest first (two queries that
    read ``limit`` rows at most, whatever the league's size)."""
    qs = summaries_queryset(league)
    running = list(qs.filter(status__in=RUNNING_MATCH).order_by("-assigned_at", "-id")[:limit])
    # The latest finished are picked by id first: sorting the league's finished matches with
    # every joined column (a result's log among them) would cost more than the rest of the page.
    latest = list(
        Match.objects.filter(league=league, status=Match.Status.FINISHED)
        .order_by(Coalesce("finished_at", "result__reported_at").desc(), "-id")
        .values_list("pk", flat=True)[: max(0, limit - len(running))]
    )
    finished = sorted(qs.filter(pk__in=latest), key=lambda m: latest.index(m.pk))
    return [match_summary(m) for m in running + finished]


def league_note(
    summary: dict[str, Any], prog: dict[str, Any], standings_rows: list[dict[str, Any]] | None = None
) -> str:
    """One sentence on where the league stands; the empty states people see first. Clock times
    are left to the page, which shows them in the viewer's time zone."""
    status, players = summary["status"], summary["players"]
    registered = f"{players} player{'s' if players != 1 else ''} registered"
    if status == League.Status.REGISTERING:
        if summary["registration_open"]:
            return f"Registration open, {registered}."
        opens = summary["registration_opens_at"]
        if opens and opens > (_iso(timezone.now()) or ""):
            return f"Registration opens soon, {registered}."
        needed = summary["min_players"]
        return (
            f"Registration closed with {registered}; waiting for the organiser to start the league"
            f" (at least {needed} needed) or to open registration again."
        )
    if status == League.Status.INITIALIZING:
        return f"Registration has not opened yet, {registered}."
    if status == League.Status.READY:
        return f"Registration closed with {registered}; the schedule is being drawn."
    if status == League.Status.PAUSED:
        return f"Paused by the organiser after {prog['matches_finished']} of {prog['matches_total']} matches."
    if status == League.Status.CANCELLED:
        return "This league was cancelled."
    if status == League.Status.COMPLETED:
        champion = summary["champion"]
        if champion:
            return (
                f"Completed. Champion: {champion['display_name']} ({champion['player_id']}){_title_by(standings_rows)}."
            )
        return "Completed."
    return f"Round {prog['current_round']} of {prog['rounds_total']} in play."


def _title_by(rows: list[dict[str, Any]] | None) -> str:
    """How the champion got ahead of the runner-up, when a tie-break decided it."""
    if not rows or len(rows) < 2 or rows[1].get("decided_by") in (None, "points", "stage"):
        return ""
    return f", ahead of {rows[1]['display_name']} on the tie-break: {TIE_BREAK_TEXT[rows[1]['decided_by']]}"


def referee_warning(league: League) -> str | None:
    """Why a league in play cannot progress for want of a referee, or None.

    A league with the built-in referee needs none; otherwise at least one referee must be
    REGISTERED or ACTIVE (the conductor suspends one that fails three times in a row)."""
    if league.status not in IN_PLAY_LEAGUE or league.embedded_referee:
        return None
    if league.referees.filter(status__in=LIVE_AGENT).exists():
        return None
    referees = league.referees.count()
    why = (
        "none has registered with it"
        if not referees
        else f"its {referees} referee{'s are' if referees != 1 else ' is'} suspended or gone"
    )
    start = (
        f"Start one for this league with its referee key: REFEREE_KEY=<key> python manage.py runreferee "
        f"--league-id {league.league_id} --league-url <this site>/mcp"
    )
    if not (settings.REFEREE_KEY or league.referee_key_hash):
        # No key anywhere: every referee is refused until one exists, so that comes first.
        start = (
            "Generate the league's referee key first (admin: Leagues › Generate a referee key, or "
            f"manage.py league key {league.league_id}): referees need it. Then s" + start[1:]
        )
    return f"No live referee: {why}, so no match can be played. {start}"


def agent_calls(league: League, agent_id: str | None = None) -> dict[str, list[Call]]:
    """Every call the league made to its players (or to one), by player id: the referees'
    per-call log entries and the conductor's deliveries (notifications) from the Event log, with
    how each ended. Two queries, whatever the number of players."""
    calls: dict[str, list[Call]] = defaultdict(list)
    results = MatchResult.objects.filter(league=league)
    if agent_id is not None:
        results = results.filter(Q(match__player_a__player_id=agent_id) | Q(match__player_b__player_id=agent_id))
    for log in results.values_list("log", flat=True):
        for entry in log if isinstance(log, list) else []:
            if not isinstance(entry, dict) or entry.get("direction") != "OUT":
                continue
            peer = entry.get("peer")
            if not isinstance(peer, str) or (agent_id is not None and peer != agent_id):
                continue
            latency = entry.get("latency_ms")
            calls[peer].append(
                Call(
                    at=str(entry.get("at") or "") or None,
                    what=str(entry.get("method") or entry.get("message_type") or "a call"),
                    outcome=str(entry.get("outcome") or "ok"),
                    latency_ms=float(latency) if isinstance(latency, int | float) else None,
                    error=str(entry.get("error") or ""),
                )
            )
    for d in delivery_log.sent(league, agent=agent_id):
        calls[d.agent].append(Call(at=_iso(d.at), what=d.method, outcome=d.outcome))
    return calls


def reachability(player: Player, calls: list[tournament.Call]) -> tuple[str, str]:
    """How the registration panel shows a player: its state (ok, silent, failing, not_called)
    and one sentence. The conductor pings each agent as it registers (``Prober.probe_seats``)
    and marks one that does not answer; a relay player answers by keeping its socket connected.
    Calls of the league (a league registering again) say more than a ping, when there are any."""
    if player.unreachable_since:
        # The conductor found it answering nothing at all: that is what the class must see.
        why = player.unreachable_reason or "it answers no call"
        if player.answered_at is None:
            return "silent", f"Not answering: {why}. It plays no match unless it answers before the league starts."
        return "silent", f"Not answering: {why}. It loses its matches until it answers."
    if player.connection == Player.Connection.RELAY:
        if player.relay_channel:
            return "ok", "Answering: connected through the relay."
        return "silent", "Not answering: not connected to the relay. It plays no match unless it connects."
    health = tournament.agent_health(calls, _iso(player.last_seen_at))
    if health["state"] != "not_called":
        return health["state"], health["summary"]
    if player.answered_at is not None:
        return "ok", f"Answering: it answered the league's ping at {player.answered_at:%H:%M:%S} UTC."
    return "not_called", "Not called by the league yet: it is pinged within seconds of registering."


def join_info(league: League) -> dict[str, Any] | None:
    """The "How to join" panel while registration is open: the window and who is in, with how
    each agent answered the league so far."""
    if not league.registration_open():
        return None
    players = list(league.players.exclude(status=AgentStatus.REMOVED).order_by("id"))
    calls = agent_calls(league) if players else {}
    agents = []
    for player in players:
        state, summary = reachability(player, calls.get(player.player_id, []))
        agents.append(
            {
                "player_id": player.player_id,
                "display_name": player.display_name,
                "status": player.status,
                "registered_at": _iso(player.registered_at),
                "endpoint": player.endpoint if player.endpoint.startswith(("http://", "https://")) else "",
                "state": state,
                "summary": summary,
            }
        )
    return {
        "league_id": league.league_id,
        "game_type": league.game_type,
        "closes_at": _iso(league.registration_closes_at),
        "agents": agents,
    }


def arena_ratings(league: League, players: list[Player]) -> dict[int, Rating]:
    """The ratings in ``league``'s game of these players of it (player pk → rating)."""
    return Rating.objects.of_players(league.game_type, players)


def with_arena_ratings(
    league: League, table: list[dict[str, Any]], players: list[Player] | None = None
) -> list[dict[str, Any]]:
    """The standings with each player's arena rating (its ordinal in this game, league/ratings.py)
    beside them, or None for a player never rated in an arena."""
    players = players if players is not None else list(league.players.all())
    ratings = arena_ratings(league, players)
    by_id = {p.player_id: ratings.get(p.pk) for p in players}
    return [
        {**row, "arena_rating": round(r.ordinal, 2) if (r := by_id.get(row["player_id"])) else None} for row in table
    ]


def snapshot(league_id: str) -> dict[str, Any] | None:
    """Everything the live league page shows; what the websocket sends on connect."""
    league = League.objects.select_related("champion").filter(league_id=league_id).first()
    if league is None:
        return None
    return league_snapshot(league)


# The columns of a player the league's page reads: the table (``standings``), the arena ratings
# (``Rating.objects.of_players``: its identity) and the chart.
PAGE_PLAYER_FIELDS = ("league", "player_id", "display_name", "status", "seed", "connection", "canonical_endpoint")


def league_snapshot(league: League) -> dict[str, Any]:
    """``snapshot`` of a league already read (with its champion)."""
    results = played(league)
    # Read once for the table, the ratings and the chart, with the columns they read only (the
    # others' datetimes made the league's 100 players ~5 ms of a build, as much as its rounds).
    players = list(league.players.only(*PAGE_PLAYER_FIELDS))
    summary, prog = league_summary(league), progress(league)
    table = with_arena_ratings(league, standings(league, results, players), players)
    big = len(table) > CROSSTABLE_MAX_PLAYERS
    return {
        "league": summary,
        "note": league_note(summary, prog, table),
        "referee_warning": referee_warning(league),
        "join": join_info(league),
        "progress": prog,
        "standings": table,
        "tie_break_rule": TIE_BREAK_RULES.get(league.schedule_format, TIE_BREAK_RULE),
        "crosstable": None if big else tournament.crosstable(table, results),
        "rounds": page_rounds(league),
        "recent_matches": recent_matches(league),
        "chart": points_over_rounds(league, results, players),
    }
