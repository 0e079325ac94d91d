"""A player's memory: the per-opponent index of our own choices stays what a scan would give."""

from __future__ import annotations

import random

import pydantic
import pytest

from leagueproto.envelope import make_message
from leagueproto.jsonutil import dumps, loads
from leagueproto.messages import FROM_JSON
from players import memory
from players import messages as m


def test_my_parity_history_follows_the_kept_matches():
    rng = random.Random(5)
    mem = memory.Memory(max_matches=20)
    for i in range(200):
        record: dict = {"match_id": f"M{i}", "result": "WIN"}
        if rng.random() < 0.9:
            record["opponent_id"] = rng.choice(["P01", "P02", "P03"])
        if rng.random() < 0.8:
            record["my_choice"] = rng.choice(["even", "odd", ""])
        mem.record_match(record)
        for opponent in ("P01", "P02", "P03", "P99", None):
            expected = [x["my_choice"] for x in mem.matches if x.get("opponent_id") == opponent and x.get("my_choice")]
            assert mem.my_parity_history(opponent) == expected
    assert len(mem.matches) == 20  # the oldest were dropped, and their choices with them
    restored = memory.Memory.from_dict(mem.to_dict())
    assert all(restored.my_parity_history(o) == mem.my_parity_history(o) for o in ("P01", "P02", "P03"))


def test_rows_are_taken_as_parsed_and_bad_rows_still_refused():
    rows = [{"rank": 1, "player_id": "P01"}, {"rank": 2, "player_id": "P02"}]
    update = m.StandingsUpdate.model_validate(make_message("LEAGUE_STANDINGS_UPDATE", "league_manager", standings=rows))
    assert update.standings is rows  # not copied
    as_tuple = m.StandingsUpdate.model_validate(
        make_message("LEAGUE_STANDINGS_UPDATE", "league_manager", standings=tuple(rows))
    )
    assert as_tuple.standings == rows and type(as_tuple.standings) is list  # pydantic's own path
    # A non-str key in a later row, a row that is a list of strs, a row that is no dict at all.
    for bad in ([{"rank": 1}, 3], [{1: "x"}], [{"rank": 1}, {"a": 1, 2: "b"}], [["rank", "player_id"]], [3], "table"):
        message = make_message("LEAGUE_STANDINGS_UPDATE", "league_manager", standings=bad)
        with pytest.raises(pydantic.ValidationError):
            m.StandingsUpdate.model_validate(message)


def test_rows_parsed_from_json_are_not_walked_for_their_keys():
    rows = loads(dumps([{"rank": 1, "player_id": "P01"}, {"rank": 2, "player_id": "P02"}]))
    message = make_message("LEAGUE_STANDINGS_UPDATE", "league_manager", standings=rows)
    assert m.StandingsUpdate.model_validate(message, context=FROM_JSON).standings is rows
    # The context is trusted for the keys only (JSON writes nothing else): rows must still be
    # objects, and the same rows from Python, keys and all, get the whole check.
    for bad in ([{"rank": 1}, 3], [["rank", "player_id"]], [3], "table"):
        with pytest.raises(pydantic.ValidationError):
            m.StandingsUpdate.model_validate({**message, "standings": bad}, context=FROM_JSON)
    with pytest.raises(pydantic.ValidationError):
        m.StandingsUpdate.model_validate({**message, "standings": [{1: "x"}]})
    with pytest.raises(pydantic.ValidationError):
        m.StandingsUpdate.model_validate({**message, "standings": [{1: "x"}]}, context={"parsed_json": True})
