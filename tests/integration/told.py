"""Told equals recorded for the recovery tests: what every player was told at the end of each
match (GAME_OVER, as ``runplayer`` prints it: ``Name/P03: R2M1 vs P07: WIN …``) is the result the
LM recorded (league/bench/told.py compares them). A match played twice, or replaced after its
players were told, shows as a player told an outcome the record does not hold."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from league.bench.told import Told, recorded_outcomes, told_problems
from league.models import League

TOLD = re.compile(r"^\S+/(?P<player>P\d+): (?P<match>R\d+M\d+) vs \S+: (?P<outcome>WIN|DRAW|LOSS|TECHNICAL_LOSS)\b")


def told_results(logs: list[Path]) -> Told:
    """(player_id, match_id) → every outcome the player was told, in order, from players' logs."""
    told: Told = defaultdict(list)
    for path in logs:
        for line in path.read_text(errors="replace").splitlines():
            found = TOLD.match(line)
            if found:
                told[found["player"], found["match"]].append(found["outcome"])
    return told


def assert_told_equals_recorded(league: League, logs: list[Path]) -> int:
    """Every outcome a player was told is the one recorded for it (however often it was told);
    the number of (player, match) pairs checked, for a test to assert it saw them."""
    told = told_results(logs)
    problems = told_problems(told, recorded_outcomes(league))
    assert not problems, f"players were told other outcomes than those recorded: {problems}"
    return len(told)
