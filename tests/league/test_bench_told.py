"""What the players were told, read from their state files (league/bench/told.py), as ``bench
chaos`` compares it with the record."""

from __future__ import annotations

import json
from pathlib import Path

from league.bench.told import told_in_states, told_problems


def state(directory: Path, name: str, player_id: str | None, matches: list[dict]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    identity = {"display_name": name, "player_id": player_id}
    (directory / f"{name}.json").write_text(json.dumps({"identity": identity, "memory": {"matches": matches}}))


def test_each_match_counts_for_the_seat_it_was_told_as_and_other_leagues_do_not_count(tmp_path):
    state(
        tmp_path / "players-a",
        "Heard",
        "P01",
        [
            {"league_id": "L", "match_id": "R1M1", "result": "WIN"},  # written before seats were kept
            {"league_id": "L", "match_id": "R2M1", "result": "LOSS", "player_id": "P01"},
            {"league_id": "other", "match_id": "R1M1", "result": "LOSS", "player_id": "P01"},
        ],
    )
    # Never heard its registration reply: no id of its own, each match told to the seat P05.
    state(
        tmp_path / "players-b",
        "Unheard",
        None,
        [{"league_id": "L", "match_id": "R1M3", "result": "WIN", "player_id": "P05"}],
    )
    state(tmp_path / "players-b", "Silent", None, [{"league_id": "L", "match_id": "R1M2", "result": "LOSS"}])
    (tmp_path / "players-b" / "torn.json").write_text("{")
    told = told_in_states(tmp_path, "L")
    assert dict(told) == {("P01", "R1M1"): ["WIN"], ("P01", "R2M1"): ["LOSS"], ("P05", "R1M3"): ["WIN"]}
    recorded = {("P01", "R1M1"): "WIN", ("P01", "R2M1"): "LOSS", ("P05", "R1M3"): "LOSS"}
    assert told_problems(told, recorded) == ["P05 was told WIN in R1M3; recorded LOSS"]
