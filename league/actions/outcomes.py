"""Whether a reported result may stand: the scoring rules and the match log (pure checks, no
writes). ``report_digest`` tells a repeated report from a conflicting one."""

from __future__ import annotations

import hashlib
from typing import Any

from league.models import Match, MatchResult
from leagueproto.errors import ErrorCode, LeagueError, refusal, see
from leagueproto.jsonutil import dumps
from leagueproto.scoring import match_score
from referee.games.audit import log_problem


def report_digest(result: dict[str, Any]) -> str:
    """What makes two reports "the same": the outcome fields, not the log's timings."""
    keys = ("status", "winner", "score", "technical_loss", "details")
    canonical = {k: result.get(k) for k in keys}
    return hashlib.sha256(dumps(canonical)).hexdigest()


def validated_outcome(match: Match, result: dict[str, Any]) -> dict[str, Any]:
    """Check the reported result against the match and the scoring rules (E002 otherwise)."""
    outcome = checked_outcome(match.match_id, match.player_a.player_id, match.player_b.player_id, result)
    side = outcome.pop("winner_side")
    outcome["winner"] = match.player_a if side == "a" else match.player_b if side == "b" else None
    return outcome


def checked_outcome(match_id: str, a: str, b: str, result: dict[str, Any]) -> dict[str, Any]:
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


def check_match_log(
    match_id: str, game_type: str, a: str, b: str, result: dict[str, Any], match_log: list[Any] | None
) -> None:
    """E015 unless the match log produces the result: replayed with the game's rules, the moves
    and the draw it records give the reported outcome (referee/games/audit.py). Referees are the
    operator's, yet a result still has to be one the match could have had."""
    problem = log_problem(game_type, a, b, result, match_log)
    if problem is not None:
        raise refusal(
            ErrorCode.INVALID_GAME_STATE,
            "match_log",
            "the match's log as the referee kept it, whose moves and draw give the reported result",
            f"a log of {len(match_log or [])} entries",
            see("reporting-a-result-referees"),
            problem=f"result of {match_id} is not borne out by its log: {problem}",
            match_id=match_id,
        )
