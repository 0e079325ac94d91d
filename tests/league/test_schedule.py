"""The circle-method round robin: the spec's table, and every property for 2…60 players."""

from __future__ import annotations

from collections import Counter
from itertools import combinations

import pytest

from league.schedule import round_count, round_robin, schedule_matches


def ids(n: int) -> list[str]:
    return [f"P{i:02d}" for i in range(1, n + 1)]


def test_it_matches_the_spec_table_for_four_players():
    assert round_robin(ids(4)) == [
        [("P01", "P02"), ("P03", "P04")],
        [("P03", "P01"), ("P04", "P02")],
        [("P04", "P01"), ("P03", "P02")],
    ]


def test_it_orders_players_by_number_not_text():
    players = ["P100", "P99", "P9", "P10"]
    rounds = round_robin(players)
    # P9 < P10 < P99 < P100 plays the same as P01..P04 in the spec table.
    rename = {"P9": "P01", "P10": "P02", "P99": "P03", "P100": "P04"}
    assert [[(rename[a], rename[b]) for a, b in r] for r in rounds] == round_robin(ids(4))


def test_it_numbers_matches_per_round():
    matches = schedule_matches(ids(4))
    assert [(m.round_number, m.match_id, m.player_a, m.player_b) for m in matches] == [
        (1, "R1M1", "P01", "P02"),
        (1, "R1M2", "P03", "P04"),
        (2, "R2M1", "P03", "P01"),
        (2, "R2M2", "P04", "P02"),
        (3, "R3M1", "P04", "P01"),
        (3, "R3M2", "P03", "P02"),
    ]


@pytest.mark.parametrize("n", range(2, 61))
def test_it_pairs_everyone_once_per_cycle(n):
    players = ids(n)
    rounds = round_robin(players)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n) == round_count(n)
    for pairs in rounds:
        seen = [p for pair in pairs for p in pair]
        assert len(seen) == len(set(seen)), "nobody plays twice in a round"
        assert len(pairs) == n // 2
        assert set(seen) <= set(players)
    played = Counter(frozenset(pair) for pairs in rounds for pair in pairs)
    assert set(played) == {frozenset(pair) for pair in combinations(players, 2)}
    assert set(played.values()) == {1}
    if n % 2:
        sitting_out = [(set(players) - {p for pair in pairs for p in pair}).pop() for pairs in rounds]
        assert sorted(sitting_out) == players, "each player has exactly one bye"


@pytest.mark.parametrize("n", range(2, 61))
def test_it_swaps_sides_in_the_second_cycle_of_a_double_round_robin(n):
    single = round_robin(ids(n))
    double = round_robin(ids(n), double=True)
    assert len(double) == 2 * len(single) == round_count(n, double=True)
    assert double[: len(single)] == single
    assert double[len(single) :] == [[(b, a) for a, b in pairs] for pairs in single]
    ordered = Counter(pair for pairs in double for pair in pairs)
    assert set(ordered.values()) == {1}, "every ordered pair (home and away) exactly once"


def test_it_has_no_rounds_for_fewer_than_two_players():
    assert round_robin([]) == []
    assert round_robin(["P01"]) == []
    assert schedule_matches(["P01"]) == []
