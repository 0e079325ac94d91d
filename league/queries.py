"""The read side of the League Manager: standings, schedule, next match, player statistics.

Plain dicts ready to send (LEAGUE_QUERY_RESPONSE data, resources, the dashboard and the API).
Standings come from the one standings service, :mod:`league.standings`.
"""

from __future__ import annotations

from typing import Any

from league.conductor.common import match_token
from league.models import IN_PROGRESS, League, Match, Player
from league.standings import standing_dict, standings
from leagueproto.errors import ErrorCode, LeagueError
from leagueproto.matchtoken import player_token, token_digest
from leagueproto.scoring import StandingRow

ACTIVE_STATUSES = IN_PROGRESS


def find_league(league_id: str) -> League | None:
    """The league called ``league_id``, or None."""
    return League.objects.filter(league_id=league_id).order_by().first()


def get_league(league_id: str | None) -> League:
    """The named league, or the one league in progress when no id is given (E008 otherwise)."""
    if league_id:
        league = find_league(league_id)
        if league is None:
            raise LeagueError(ErrorCode.LEAGUE_NOT_FOUND, f"league {league_id!r} does not exist")
        return league
    active = list(League.objects.in_progress()[:5])
    if len(active) == 1:
        return active[0]
    if len(active) > 1:
        names = ", ".join(sorted(x.league_id for x in active))
        raise LeagueError(
            ErrorCode.LEAGUE_NOT_FOUND,
            f"several leagues are in progress ({names}): name one with league_id",
            context={"leagues": sorted(x.league_id for x in active)},
        )
    latest = League.objects.order_by("-created_at", "-id").first()
    if latest is None:
        raise LeagueError(ErrorCode.LEAGUE_NOT_FOUND, "there is no league yet")
    return latest


def _matches(league: League):
    return Match.objects.filter(league=league).with_sides()


def _winner_id(match: Match, winner_pk: int | None) -> str | None:
    if winner_pk is None:
        return None
    return match.player_a.player_id if winner_pk == match.player_a_id else match.player_b.player_id


def match_dict(match: Match) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "match_id": match.match_id,
        "round_id": match.round.number,
        "game_type": match.game_type,
        "player_A_id": match.player_a.player_id,
        "player_B_id": match.player_b.player_id,
        "status": match.status,
        "referee_id": match.referee.referee_id if match.referee else None,
        "result": None,
    }
    result = getattr(match, "result", None) if match.status == Match.Status.FINISHED else None
    if result is not None:
        entry["result"] = {
            "outcome": result.outcome,
            # The winner is one of the two players already loaded (result.winner would query it).
            "winner": _winner_id(match, result.winner_id),
            "score": {match.player_a.player_id: result.points_a, match.player_b.player_id: result.points_b},
            "technical_loss": [
                p.player_id
                for p, lost in ((match.player_a, result.technical_loss_a), (match.player_b, result.technical_loss_b))
                if lost
            ],
        }
    return entry


def schedule(league: League, *, round_id: int | None = None, player_id: str | None = None) -> list[dict[str, Any]]:
    """Rounds in order, each with its matches (optionally one round, or one player's matches)."""
    rounds = {r.number: r for r in league.rounds.all()}
    matches = _matches(league)
    if round_id is not None:
        matches = matches.filter(round__number=round_id)
    if player_id:
        matches = matches.filter(player_a__player_id=player_id) | matches.filter(player_b__player_id=player_id)
    by_round: dict[int, list[dict[str, Any]]] = {}
    for match in matches.order_by("round__number", "id"):
        by_round.setdefault(match.round.number, []).append(match_dict(match))
    numbers = sorted(by_round) if (round_id is not None or player_id) else sorted(rounds)
    return [
        {"round_id": n, "status": rounds[n].status if n in rounds else None, "matches": by_round.get(n, [])}
        for n in numbers
    ]


def get_player(league: League, player_id: str) -> Player:
    player = Player.objects.filter(league=league, player_id=player_id).order_by().first()
    if player is None:
        raise LeagueError(
            ErrorCode.PLAYER_NOT_REGISTERED,
            f"player {player_id} is not registered in league {league.league_id}",
            context={"player_id": player_id},
        )
    return player


_PENDING = (Match.Status.SCHEDULED, Match.Status.ASSIGNED, Match.Status.RUNNING)


def _players_matches(league: League, player: Player, statuses: tuple[str, ...]):
    """The player's matches in ``statuses``, in schedule order."""
    return (
        Match.objects.filter(league=league, status__in=statuses)
        .of_player(player.pk)
        .with_sides()
        .order_by("round__number", "id")
    )


def next_match(league: League, player_id: str, player: Player | None = None) -> dict[str, Any] | None:
    """The player's first unfinished match in schedule order, or None (``player``: its row, when
    the caller has it)."""
    player = player or get_player(league, player_id)
    match = _players_matches(league, player, _PENDING).first()
    if match is None:
        return None
    entry = match_dict(match)
    entry["opponent_id"] = match.player_b.player_id if match.player_a_id == player.id else match.player_a.player_id
    entry["referee_endpoint"] = match.referee.endpoint if match.referee else None
    return entry


def match_assignment(league: League, player: Player, match_id: str) -> dict[str, Any]:
    """Who referees one of ``player``'s matches now, and the SHA-256 of the token that referee
    sends ``player`` (its own, derived from the match token: leagueproto.matchtoken): a player
    that got two invitations to a match with different tokens keeps the one whose hash this is
    (docs/protocol.md, "Whom to trust"). A match that is not out with a referee (scheduled, given
    back, cancelled) has no token. Only the match's players may ask (E012), and each learns only
    the hash of its own token, which tells it nothing the referee did not already tell it."""
    match = _matches(league).filter(match_id=match_id).of_player(player.pk).first()
    if match is None:
        raise LeagueError(
            ErrorCode.AUTH_TOKEN_INVALID,
            f"{match_id!r} is not a match of {player.player_id} in league {league.league_id}",
            context={"match_id": match_id},
        )
    out = match.status in (Match.Status.ASSIGNED, Match.Status.RUNNING, Match.Status.FINISHED)
    token = (
        player_token(match_token(league.league_id, match.match_id, match.attempt), player.player_id) if out else None
    )
    return {
        "match_id": match.match_id,
        "round_id": match.round.number,
        "status": match.status,
        "referee_id": match.referee.referee_id if out and match.referee else None,
        "referee_endpoint": match.referee.endpoint if out and match.referee else None,
        "match_token_sha256": token_digest(token) if token else None,
    }


def player_stats(league: League, player_id: str, player: Player | None = None) -> dict[str, Any]:
    """The player's standings row plus match history and how often it chose even/odd (``league``:
    a row read for this answer, see ``standings``)."""
    player = player or get_player(league, player_id)
    row = next((r for r in standings(league, just_read=True) if r["player_id"] == player_id), None)
    history = []
    parity = {"even": 0, "odd": 0}
    for match in _players_matches(league, player, (Match.Status.FINISHED,)):
        entry = match_dict(match)
        details = match.result.details if hasattr(match, "result") else {}
        choice = (details.get("choices") or {}).get(player_id) if isinstance(details, dict) else None
        if isinstance(choice, str) and choice.lower() in parity:
            parity[choice.lower()] += 1
        entry["opponent_id"] = match.player_b.player_id if match.player_a_id == player.id else match.player_a.player_id
        entry["my_choice"] = choice
        history.append(entry)
    stats = row or standing_dict(StandingRow(0, player_id, 0, 0, 0, 0, 0, 0), player.display_name)
    return {**stats, "status": player.status, "choices": parity, "history": history}


def match_state(league: League, match_id: str) -> dict[str, Any]:
    """One match as ``game://state/{match_id}`` shows it (with result details once finished)."""
    match = _matches(league).filter(match_id=match_id).first()
    if match is None:
        raise LookupError(match_id)
    entry = match_dict(match)
    if entry["result"] is not None:
        entry["result"]["details"] = match.result.details
    entry["league_id"] = league.league_id
    return entry
