"""Told equals recorded: the outcome every player was told at the end of a match (GAME_OVER) is
the result the LM recorded for it. ``bench chaos`` reads what the players were told from their
``--state-dir`` (each match a player finished, in order); the recovery tests from their logs."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from league.models import League, MatchResult

Told = dict[tuple[str, str], list[str]]  # (player_id, match_id) → outcomes told, in order


def recorded_outcomes(league: League) -> dict[tuple[str, str], str]:
    """(player_id, match_id) → the recorded outcome as the player names it (WIN, DRAW, LOSS,
    TECHNICAL_LOSS: players/agent.py ``_finish_match``)."""
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


def told_in_states(state_dir: Path, league_id: str) -> Told:
    """What the players whose state files are under ``state_dir`` (``players-*/``, as the bench
    starts its hosts) were told in ``league_id``: each match as the seat it names (the id its
    referee addressed, which a player that has not heard its registration reply yet goes by),
    else the player's own id."""
    told: Told = defaultdict(list)
    for path in sorted(state_dir.glob("players-*/*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # a referee's files, or one being replaced
        own = (data.get("identity") or {}).get("player_id") if isinstance(data, dict) else None
        memory = data.get("memory") if isinstance(data, dict) else None
        if not isinstance(memory, dict):
            continue
        for match in memory.get("matches") or []:
            if not isinstance(match, dict) or match.get("league_id") != league_id or not match.get("result"):
                continue
            player_id = match.get("player_id") or own
            if player_id:
                told[str(player_id), str(match.get("match_id"))].append(str(match["result"]))
    return told


def told_problems(told: Told, recorded: dict[tuple[str, str], str]) -> list[str]:
    """One line per player told an outcome other than the one recorded for it."""
    return [
        f"{player_id} was told {'/'.join(outcomes)} in {match_id}; recorded {recorded.get((player_id, match_id))}"
        for (player_id, match_id), outcomes in sorted(told.items())
        if any(outcome != recorded.get((player_id, match_id)) for outcome in outcomes)
    ]
