"""Does a match log bear out a reported result? Replays the log with the game's rules.

A referee reports a result and the ordered log of its match (referee/runner.py's ``MatchLog``:
``direction`` OUT/IN/EVENT, ``peer``, ``method``, ``outcome``, ``message``). The moves the log
shows accepted, with the chance outcomes it recorded (the drawn number), must produce the
reported outcome: a game played to the end gives the reported WIN or DRAW and its winner; a
technical loss is of a game cut short, and each offender's failure is in the log. So a referee,
even one holding the operator's key, cannot report a result its own log does not support.

Pure: no Django, no clock; the League Manager calls :func:`log_problem` for every report.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from referee.games import GAMES, InvalidMove, MoveContext

# What the runner writes as an entry's ``outcome`` when a player failed a call (the reply itself
# was ``invalid``, an ``error``, or none came: ``timeout``, ``connection_error``).
FAILED = frozenset({"invalid", "error", "timeout", "connection_error"})
DECLINED = (False, "false", "False", "no", 0)  # an invitation's ``accept`` that says no
INVITATION = "handle_game_invitation"


def _failed(entry: Mapping[str, Any], player_id: str) -> bool:
    if entry.get("peer") != player_id:
        return False
    outcome = entry.get("outcome")
    if isinstance(outcome, str) and outcome in FAILED:  # any JSON may come: a list is unhashable
        return True
    message = entry.get("message")
    return (
        entry.get("direction") == "IN"
        and entry.get("method") == INVITATION
        and isinstance(message, Mapping)
        and message.get("accept", True) in DECLINED
    )


def log_problem(
    game_type: str, player_a: str, player_b: str, result: Mapping[str, Any], log: list[Any] | None
) -> str | None:
    """Why ``log`` does not produce ``result`` (a match of ``game_type`` between ``player_a``
    and ``player_b``), in one sentence; None when it does. ``result`` already follows the
    scoring rules (its status, winner and technical_loss agree with each other)."""
    if not log:
        return "the match log is empty: a result needs the log of the match that produced it"
    rules_class = GAMES.get(game_type)
    if rules_class is None:
        return f"no rules for game type {game_type!r} to check the log with"
    rules = rules_class()
    players = (player_a, player_b)
    entries = [entry for entry in log if isinstance(entry, Mapping)]
    # The log up to the end of the game: a notice that fails after it is no technical loss.
    end = next(
        (n for n, e in enumerate(entries) if e.get("direction") == "EVENT" and e.get("message_type") == "FINISHED"),
        len(entries),
    )
    played = entries[:end]
    accepted = {
        pid: [
            e
            for e in played
            if e.get("direction") == "IN"
            and e.get("peer") == pid
            and e.get("outcome") == "ok"
            and isinstance(e.get("message"), Mapping)
        ]
        for pid in players
    }
    turns = [
        e.get("message") or {} for e in played if e.get("direction") == "EVENT" and e.get("message_type") == "RESOLVED"
    ]
    state = rules.new_state(player_a, player_b)
    for turn, resolved in enumerate(turns, start=1):
        if not isinstance(resolved, Mapping):
            return f"turn {turn}: the log's RESOLVED entry holds no record of the turn"
        moves: dict[str, Any] = {}
        for pid in players:
            other = player_b if pid == player_a else player_a
            tool = rules.move_request(state, pid, MoveContext(turn, other, 0.0)).tool
            replies = [e for e in accepted[pid] if e.get("method") == tool]
            if len(replies) < turn:
                return f"turn {turn}: the log shows no accepted {tool} answer of {pid}"
            try:
                moves[pid] = rules.validate_move(state, pid, replies[turn - 1]["message"])
            except InvalidMove as bad:
                return f"turn {turn}: the answer of {pid} the log accepted is no legal move ({bad.description})"
        try:
            rules.replay(state, moves, resolved)
        except ValueError as bad:
            return f"turn {turn}: {bad}"
        for key, value in rules.details(state).items():
            if resolved.get(key) != value:
                return f"turn {turn}: the log records {key} {resolved.get(key)!r}, its moves give {value!r}"

    status, winner = result.get("status"), result.get("winner")
    if status in ("WIN", "DRAW"):
        if not rules.is_finished(state):
            return f"the log's moves do not finish the game ({len(turns)} turn(s)), yet the result is a {status}"
        outcome = rules.outcome(state)
        if (outcome.status, outcome.winner) != (status, winner):
            said = f"{status} of {winner}" if winner else status
            return f"the log's moves give {outcome.reason}, not a {said}"
    else:
        if rules.is_finished(state):
            return "the log shows the game played to the end, yet the result is a technical loss"
        for pid in result.get("technical_loss") or ():
            if not any(_failed(e, pid) for e in played):
                return f"the log shows no failure of {pid} (timeout, error, invalid answer or declined invitation)"
    details = result.get("details")
    if isinstance(details, Mapping):
        for key, value in rules.details(state).items():
            if key in details and details[key] != value:
                return f"result.details.{key} is {details[key]!r}, the log gives {value!r}"
    return None
