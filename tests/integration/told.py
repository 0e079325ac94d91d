"""Told equals recorded: what every player was told at the end of each match (GAME_OVER, as
``runplayer`` prints it: ``Name/P03: R2M1 vs P07: WIN …``) is the result the LM recorded.

Run after every recovery test: a match played twice, or replaced after its players were told,
shows here as a player told an outcome the record does not hold (or told two)."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from league.models import League, MatchResult

TOLD = re.compile(r"^\S+/(?P<player>P\d+): (?P<match>R\d+M\d+) vs \S+: (?P<outcome>WIN|DRAW|LOSS|TECHNICAL_LOSS)\b")


def told_results(logs: list[Path]) -> dict[tuple[str, str], list[str]]:
    """(player_id, match_id) → every outcome the player was told, in order, from players' logs."""
    told: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in logs:
        for line in path.read_text(errors="replace").splitlines():
            found = TOLD.match(line)
            if found:
                told[found["player"], found["match"]].append(found["outcome"])
    return told


def recorded_results(league: League) -> dict[tuple[str, str], str]:
    """(player_id, match_id) → the outcome recorded for that player, as a player names it."""
    recorded: dict[tuple[str, str], str] = {}
    results = MatchResult.objects.filter(league=league).select_related("match__player_a", "match__player_b")
    for result in results:
        match = result.match
        for player, lost in ((match.player_a, result.technical_loss_a), (match.player_b, result.technical_loss_b)):
            if result.winner_id == player.pk:
                outcome = "WIN"
            elif result.outcome == MatchResult.Outcome.DRAW:
                outcome = "DRAW"
            elif lost:
                outcome = "TECHNICAL_LOSS"
            else:
                outcome = "LOSS"
            recorded[player.player_id, match.match_id] = outcome
    return recorded


def assert_told_equals_recorded(league: League, logs: list[Path]) -> int:
    """Every outcome a player was told is the one recorded for it (however often it was told);
    the number of (player, match) pairs checked, for a test to assert it saw them all."""
    told = told_results(logs)
    recorded = recorded_results(league)
    wrong = {
        key: (outcomes, recorded.get(key))
        for key, outcomes in told.items()
        if any(outcome != recorded.get(key) for outcome in outcomes)
    }
    assert not wrong, f"players were told other outcomes than those recorded (told, recorded): {wrong}"
    return len(told)
