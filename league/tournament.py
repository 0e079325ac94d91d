"""What a live tournament page shows beyond the table: the crosstable, recent form,
and how healthy each player's agent is.

Pure functions over plain values (no Django, no clock): :mod:`league.api.readmodel` feeds them
rows read from the database, and the pages, the API and the websocket snapshot show the result.
The ranking and its tie-breaks are :mod:`leagueproto.scoring`'s.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from leagueproto.scoring import ResultRow, result_mark

FORM_LENGTH = 5
# What a call to an agent ended as (the referee's match log, the conductor's delivery Events).
TIMEOUT_OUTCOMES = frozenset({"timeout"})
OK_OUTCOMES = frozenset({"ok"})
# A player whose typical answer to a move takes more than this share of the move timeout holds
# every round up (the agent check warns at the same share, league/checkagent.py).
SLOW_SHARE = 0.5
# Fewer answers than this say too little (one slow first call, a model loading) to name a player slow.
SLOW_MIN_ANSWERS = 3


@dataclass(frozen=True, slots=True)
class Played:
    """One finished match, as the tournament views need it."""

    match_id: str
    round: int
    player_a: str
    player_b: str
    points_a: int
    points_b: int
    technical_a: bool = False
    technical_b: bool = False
    # Games won inside the match (best-of-5), when the game keeps such a score.
    games_a: int | None = None
    games_b: int | None = None
    # The match as the ranking reads it, made once: the read model keeps a league's Played rows
    # between versions (``readmodel.played``) and a page's table adds every one at each version.
    result_row: ResultRow = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # A frozen dataclass sets a derived field this way (the dataclasses documentation's idiom).
        row = ResultRow(
            self.match_id,
            self.player_a,
            self.player_b,
            self.points_a,
            self.points_b,
            self.technical_a,
            self.technical_b,
        )
        object.__setattr__(self, "result_row", row)

    def row(self) -> ResultRow:
        return self.result_row

    def seen_by(self, player_id: str) -> dict[str, Any]:
        """The match from one side: W/D/L, against whom, technical or not, the score."""
        mine_a = player_id == self.player_a
        mine, theirs = (self.points_a, self.points_b) if mine_a else (self.points_b, self.points_a)
        technical = self.technical_a if mine_a else self.technical_b
        their_technical = self.technical_b if mine_a else self.technical_a
        mark = result_mark(mine)
        games = (self.games_a, self.games_b) if mine_a else (self.games_b, self.games_a)
        return {
            "match_id": self.match_id,
            "round": self.round,
            "opponent": self.player_b if mine_a else self.player_a,
            "mark": mark,
            "technical": technical,
            "opponent_technical": their_technical,
            "score": f"{games[0]}–{games[1]}" if None not in games else f"{mine}–{theirs}",
        }


def recent_form(player_ids: Iterable[str], played: Sequence[Played], length: int = FORM_LENGTH) -> dict[str, list]:
    """Each player's last ``length`` results, oldest first (as sports tables show form)."""
    form: dict[str, list[dict[str, Any]]] = {pid: [] for pid in player_ids}
    # Newest first, round by round, and only until every player has its ``length``: a league's
    # page is rebuilt at every version, and most of its results are older than anyone's form
    # (so the results are put in their rounds, and only the latest rounds are sorted).
    by_round: dict[int, list[Played]] = {}
    for p in played:
        by_round.setdefault(p.round, []).append(p)
    short = sum(1 for marks in form.values() if len(marks) < length)
    for number in sorted(by_round, reverse=True):
        if not short:
            break
        for p in sorted(by_round[number], key=lambda p: p.match_id, reverse=True):
            for pid in (p.player_a, p.player_b):
                marks = form.get(pid)
                if marks is not None and len(marks) < length:
                    marks.append(p.seen_by(pid))
                    short -= len(marks) == length
    return {pid: marks[::-1] for pid, marks in form.items()}


def crosstable(order: Sequence[Mapping[str, Any]], played: Iterable[Played]) -> dict[str, Any]:
    """Every pair's results as a grid, rows and columns in standings order: row i's ``cells[j]``
    lists row player i's results against column player j (two in a double round-robin, none yet
    before they meet; None on the diagonal)."""
    ids = [row["player_id"] for row in order]
    index = {pid: i for i, pid in enumerate(ids)}
    cells: list[list[list[dict[str, Any]] | None]] = [[[] if i != j else None for j in ids] for i in ids]
    for p in sorted(played, key=lambda p: (p.round, p.match_id)):
        if p.player_a in index and p.player_b in index and p.player_a != p.player_b:
            a, b = index[p.player_a], index[p.player_b]
            cells[a][b].append(_cell(p.seen_by(p.player_a)))  # type: ignore[union-attr]
            cells[b][a].append(_cell(p.seen_by(p.player_b)))  # type: ignore[union-attr]
    return {
        "rows": [
            {"player_id": row["player_id"], "display_name": row["display_name"], "cells": cells[i]}
            for i, row in enumerate(order)
        ]
    }


def _cell(seen: dict[str, Any]) -> dict[str, Any]:
    return {k: seen[k] for k in ("match_id", "mark", "score", "technical")}


def percentile(sorted_values: Sequence[float], fraction: float) -> float | None:
    """The nearest-rank percentile of already sorted values (None when there are none)."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


@dataclass(frozen=True)
class Call:
    """One call the league (its referee or its conductor) made to an agent, and how it ended."""

    at: str | None  # ISO 8601, UTC
    what: str  # the method or message type
    outcome: str  # ok, timeout, connection_error, error, invalid, …
    latency_ms: float | None = None
    error: str = ""


def agent_health(calls: Iterable[Call], last_seen_at: str | None = None) -> dict[str, Any]:
    """Answer latency (p50/p95 of answered calls), timeouts, errors and the last contact.

    ``state`` is "ok" when the latest call was answered, "failing" when it was not, "silent"
    when no call was ever answered, and "not_called" before the league called the agent."""
    calls = sorted(calls, key=lambda c: c.at or "")
    latencies = sorted(c.latency_ms for c in calls if c.outcome in OK_OUTCOMES and c.latency_ms is not None)
    timeouts = sum(1 for c in calls if c.outcome in TIMEOUT_OUTCOMES)
    answered = sum(1 for c in calls if c.outcome in OK_OUTCOMES)
    errors = len(calls) - answered - timeouts
    last = calls[-1] if calls else None
    if last is None:
        state = "not_called"
    elif last.outcome in OK_OUTCOMES:
        state = "ok"
    else:
        state = "failing" if answered else "silent"
    failing_streak = 0
    for call in reversed(calls):
        if call.outcome in OK_OUTCOMES:
            break
        failing_streak += 1
    return {
        "state": state,
        "calls": len(calls),
        "answered": answered,
        "timeouts": timeouts,
        "errors": errors,
        "failing_streak": failing_streak,
        "latency_p50_ms": percentile(latencies, 0.50),
        "latency_p95_ms": percentile(latencies, 0.95),
        "last_contact": (
            {
                "at": last.at,
                "what": last.what,
                "outcome": last.outcome,
                "latency_ms": last.latency_ms,
                "why": health_reason(last),
            }
            if last
            else None
        ),
        "last_seen_at": last_seen_at,
        "summary": health_summary(state, len(calls), timeouts, errors, failing_streak, last),
    }


def slow_note(latencies_ms: Iterable[float], move_timeout: float) -> str | None:
    """The sentence a player's page shows when its answers to moves are slow, else None.

    ``latencies_ms`` are its answer times to move calls (ms), ``move_timeout`` the league's
    (s). Slow: the median answer takes more than :data:`SLOW_SHARE` of the timeout. The rules
    allow it, but a round ends only when its last match does, so every round waits for it."""
    ordered = sorted(latencies_ms)
    median = percentile(ordered, 0.50)
    if median is None or len(ordered) < SLOW_MIN_ANSWERS or median <= SLOW_SHARE * move_timeout * 1000:
        return None
    p90 = percentile(ordered, 0.90) or median
    return (
        f"Slow: in its recent matches it answers a move in {median / 1000:.1f} s "
        f"(median; 9 in 10 within {p90 / 1000:.1f} s) "
        f"and the move timeout is {move_timeout:g} s: every round waits for this player. "
        "The rules allow it; a faster answer makes the whole league faster."
    )


def health_reason(call: Call) -> str:
    if call.outcome in OK_OUTCOMES:
        return "answered"
    if call.outcome in TIMEOUT_OUTCOMES:
        return f"no answer to {call.what} in time (timeout)"
    if call.outcome == "connection_error":
        return f"could not connect for {call.what}" + (f": {call.error}" if call.error else "")
    if call.outcome == "invalid":
        return f"answered {call.what} with an invalid reply" + (f": {call.error}" if call.error else "")
    return f"{call.what} failed ({call.outcome})" + (f": {call.error}" if call.error else "")


def health_summary(state: str, calls: int, timeouts: int, errors: int, streak: int, last: Call | None) -> str:
    """One sentence a teacher can act on."""
    if state == "not_called" or last is None:
        return "Not called by the league yet."
    if state == "ok":
        return f"Answering: {calls - timeouts - errors} of {calls} calls answered."
    why = health_reason(last)
    if state == "silent":
        return f"Never answered: {calls} call{'s' if calls != 1 else ''}, {timeouts} timed out; last: {why}."
    return f"Failing: the last {streak} call{'s' if streak != 1 else ''} went unanswered; last: {why}."
