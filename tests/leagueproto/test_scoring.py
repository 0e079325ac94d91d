"""The scoring rules: points per result, counting, the tie-breaks and ``decided_by``, and the
incremental table equal to a recomputation."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from league.schedule import schedule_matches
from leagueproto.scoring import (
    BYE_POINTS,
    OUTCOME_POINTS,
    SWISS_TIE_BREAK_RULE,
    SWISS_TIE_BREAKS,
    TIE_BREAK_TEXT,
    TIE_BREAKS,
    ResultRow,
    StandingsTable,
    compute_standings,
    id_sort_key,
    match_score,
    record_field,
    result_mark,
)


def win(match_id: str, winner: str, loser: str) -> ResultRow:
    return ResultRow(match_id, winner, loser, 3, 0)


def draw(match_id: str, a: str, b: str) -> ResultRow:
    return ResultRow(match_id, a, b, 1, 1)


def by_id(rows):
    return {row.player_id: row for row in rows}


def test_a_win_scores_3_a_draw_1_and_a_loss_0_technical_or_not():
    assert match_score("P01", "P02", "P02") == {"P01": 0, "P02": 3}
    assert match_score("P01", "P02", None) == {"P01": 1, "P02": 1}
    assert match_score("P01", "P02", "P01", ["P02"]) == {"P01": 3, "P02": 0}  # P02 failed
    assert match_score("P01", "P02", None, ["P01", "P02"]) == {"P01": 0, "P02": 0}  # both failed
    assert OUTCOME_POINTS == {"WIN_A": (3, 0), "WIN_B": (0, 3), "DRAW": (1, 1), "BOTH_LOSE": (0, 0)}
    assert [record_field(points) for points in (3, 1, 0)] == ["wins", "draws", "losses"]
    assert [result_mark(points) for points in (3, 1, 0)] == ["W", "D", "L"]


def test_it_counts_wins_draws_losses_and_technical_losses():
    rows = by_id(
        compute_standings(
            ["P01", "P02", "P03"],
            [
                win("R1M1", "P01", "P02"),
                draw("R2M1", "P01", "P03"),
                ResultRow("R3M1", "P02", "P03", 3, 0, technical_loss_b=True),
            ],
        )
    )
    assert (rows["P01"].played, rows["P01"].wins, rows["P01"].draws, rows["P01"].losses, rows["P01"].points) == (
        2,
        1,
        1,
        0,
        4,
    )
    p3 = rows["P03"]
    assert (p3.played, p3.wins, p3.draws, p3.losses, p3.technical_losses, p3.points) == (2, 0, 1, 1, 1, 1)


def test_it_counts_a_loss_for_both_when_both_fail():
    rows = by_id(compute_standings(["P01", "P02"], [ResultRow("R1M1", "P01", "P02", 0, 0, True, True)]))
    for player_id in ("P01", "P02"):
        assert (rows[player_id].losses, rows[player_id].technical_losses, rows[player_id].points) == (1, 1, 0)


def test_it_ranks_by_points_then_wins_then_draws():
    # P02: 1 win 1 loss (3 pts); P03: 3 draws (3 pts) → P02 ahead on wins.
    rows = compute_standings(
        ["P01", "P02", "P03", "P04"],
        [
            win("A", "P02", "P01"),
            win("B", "P04", "P02"),
            draw("C", "P03", "P01"),
            draw("D", "P03", "P04"),
            draw("E", "P03", "P01"),
        ],
    )
    ranked = [(r.rank, r.player_id, r.points) for r in rows]
    assert ranked[0] == (1, "P04", 4)
    assert [r.player_id for r in rows].index("P02") < [r.player_id for r in rows].index("P03")


def test_it_breaks_a_tie_by_head_to_head_among_the_tied_players():
    # P01, P02, P03 all have 3 points from 1 win. Head-to-head inside that group:
    # P02 3 (beat P03), P03 3 (beat P01), P01 0 → P02, P03 (ids), then P01.
    rows = compute_standings(
        ["P01", "P02", "P03", "P04"],
        [win("M1", "P03", "P01"), win("M2", "P01", "P04"), win("M3", "P02", "P03")],
    )
    assert [(r.rank, r.player_id) for r in rows] == [(1, "P02"), (2, "P03"), (3, "P01"), (4, "P04")]


def test_it_uses_head_to_head_among_exactly_the_tied_group():
    # Everyone has 3 points, but only P02 and P03 are tied on wins and draws (1 win each);
    # P01 and P04 have 3 draws. Inside {P02, P03}, P03 beat P02 → P03 first. Counting P02's
    # win over P01 (tied on points only) would wrongly level them and put P02 first.
    results = [
        win("M1", "P03", "P02"),
        win("M2", "P02", "P01"),
        draw("M3", "P01", "P04"),
        draw("M4", "P01", "P04"),
        draw("M5", "P04", "P01"),
    ]
    rows = compute_standings(["P01", "P02", "P03", "P04"], results)
    assert {r.points for r in rows} == {3}
    assert [r.player_id for r in rows] == ["P03", "P02", "P01", "P04"]


def test_it_ignores_matches_against_players_outside_the_tied_group_for_head_to_head():
    # P01 and P02 tie (6 pts, 2 wins). P01 took 3 h2h points from P02. P02 beat P03 twice,
    # which must not count as head-to-head (P03 is not tied with them).
    results = [
        win("M1", "P01", "P02"),
        win("M2", "P01", "P04"),
        win("M3", "P02", "P03"),
        win("M4", "P02", "P03"),
        win("M5", "P03", "P01"),
        win("M6", "P04", "P02"),
    ]
    rows = compute_standings(["P01", "P02", "P03", "P04"], results)
    p = by_id(rows)
    assert (p["P01"].points, p["P01"].wins) == (p["P02"].points, p["P02"].wins) == (6, 2)
    assert [r.player_id for r in rows][:2] == ["P01", "P02"]


def test_it_falls_back_to_numeric_id_order():
    rows = compute_standings(["P100", "P99", "P9"], [])
    assert [r.player_id for r in rows] == ["P9", "P99", "P100"]
    assert [r.rank for r in rows] == [1, 2, 3]
    assert [r.decided_by for r in rows] == [None, "player_id", "player_id"]
    assert id_sort_key("P100") > id_sort_key("P99")


def test_decided_by_names_each_rule_in_the_ranking_order():
    # P01 and P02 drew each other and both beat P03: level on everything, so P02 is below on id.
    rows = compute_standings(
        ["P01", "P02", "P03"], [draw("R1M1", "P01", "P02"), win("R2M1", "P01", "P03"), win("R3M1", "P02", "P03")]
    )
    assert [(r.player_id, r.decided_by) for r in rows] == [("P01", None), ("P02", "player_id"), ("P03", "points")]


def test_decided_by_head_to_head_wins_and_draws():
    # P01 and P04 both won one and lost one (level on points, wins and draws); P04 beat P01.
    results = [
        win("R1M1", "P02", "P01"),
        win("R1M2", "P01", "P03"),
        win("R2M1", "P02", "P04"),
        win("R2M2", "P04", "P01"),
    ]
    rows = compute_standings(["P01", "P02", "P03", "P04"], results)
    assert [(r.player_id, r.decided_by) for r in rows] == [
        ("P02", None),
        ("P04", "points"),
        ("P01", "head_to_head"),
        ("P03", "points"),
    ]
    # Same points, one side with more wins (3 = one win, or three draws).
    results = [win("A", "P01", "P09"), draw("B", "P02", "P08"), draw("C", "P02", "P07"), draw("D", "P02", "P06")]
    rows = compute_standings(["P01", "P02", "P06", "P07", "P08", "P09"], results)
    assert (rows[1].player_id, rows[1].decided_by) == ("P02", "wins")


def test_it_refuses_to_count_a_match_twice():
    table = StandingsTable.for_players(["P01", "P02"])
    table.add(win("R1M1", "P01", "P02"))
    try:
        table.add(win("R1M1", "P01", "P02"))
    except ValueError:
        pass
    else:
        raise AssertionError("a duplicate result was counted")
    assert by_id(table.rows())["P01"].points == 3


def random_results(rng: random.Random, n: int, double: bool) -> list[ResultRow]:
    outcomes = [(3, 0, False, False), (0, 3, False, False), (1, 1, False, False), (3, 0, False, True),
                (0, 3, True, False), (0, 0, True, True)]  # fmt: skip
    results = []
    for m in schedule_matches([f"P{i}" for i in range(1, n + 1)], double=double):
        pa, pb, ta, tb = rng.choice(outcomes)
        results.append(ResultRow(m.match_id, m.player_a, m.player_b, pa, pb, ta, tb))
    return results


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=2, max_value=14), st.booleans(), st.randoms(use_true_random=False))
def test_it_keeps_the_incremental_table_equal_to_a_recomputation(n, double, rng):
    players = [f"P{i}" for i in range(1, n + 1)]
    results = random_results(rng, n, double)
    rng.shuffle(results)
    table = StandingsTable.for_players(players)
    for index, result in enumerate(results):
        table.add(result)
        assert table.rows() == compute_standings(players, results[: index + 1])
    final = table.rows()
    assert sum(r.played for r in final) == 2 * len(results)
    keys = [(r.points, r.wins, r.draws) for r in final]
    assert keys == sorted(keys, reverse=True), "primary keys are ranked descending"


def reference_order(players: list[str], results: list[ResultRow]) -> list[str]:
    """The ranking rule written plainly, for checking the table: points, wins, draws; then the head-to-head
    points taken from exactly the players tied on all three; then the numeric id."""
    tally = {p: [0, 0, 0] for p in players}
    taken: dict[tuple[str, str], int] = {}
    for r in results:
        for me, other, points in ((r.player_a, r.player_b, r.points_a), (r.player_b, r.player_a, r.points_b)):
            tally[me][0] += points
            tally[me][1] += points == 3
            tally[me][2] += points == 1
            taken[(me, other)] = taken.get((me, other), 0) + points

    def key(p: str) -> tuple:
        tied = [q for q in players if q != p and tally[q] == tally[p]]
        return (-tally[p][0], -tally[p][1], -tally[p][2], -sum(taken.get((p, q), 0) for q in tied), id_sort_key(p))

    return sorted(players, key=key)


def reference_decided_by(rows, results: list[ResultRow]) -> list[str | None]:
    """For each row, the first of the rules in TIE_BREAKS on which it differs from the row above."""
    taken: dict[tuple[str, str], int] = {}
    for r in results:
        taken[(r.player_a, r.player_b)] = taken.get((r.player_a, r.player_b), 0) + r.points_a
        taken[(r.player_b, r.player_a)] = taken.get((r.player_b, r.player_a), 0) + r.points_b

    def head_to_head(row) -> int:
        tied = [o.player_id for o in rows if (o.points, o.wins, o.draws) == (row.points, row.wins, row.draws)]
        return sum(taken.get((row.player_id, other), 0) for other in tied if other != row.player_id)

    out: list[str | None] = [None] if rows else []
    for above, row in zip(rows, rows[1:], strict=False):
        values = {rule: (getattr(above, rule), getattr(row, rule)) for rule in ("points", "wins", "draws")}
        values["head_to_head"] = (head_to_head(above), head_to_head(row))
        out.append(next((rule for rule in TIE_BREAKS[:-1] if values[rule][0] != values[rule][1]), "player_id"))
    return out


@settings(max_examples=80, deadline=None)
@given(st.integers(min_value=2, max_value=16), st.booleans(), st.randoms(use_true_random=False))
def test_the_order_is_the_plain_reading_of_the_tie_breaks_at_every_point_of_a_league(n, double, rng):
    # From the first result to the last, so that both ways of summing head-to-head points are
    # taken: from the pairs that met while few have (large tied groups), from the pairs within
    # each tied group once many have.
    players = [f"P{i}" for i in range(1, n + 1)]
    results = random_results(rng, n, double)
    table = StandingsTable.for_players(players)
    for index, result in enumerate(results):
        table.add(result)
        rows = table.rows()
        assert [row.player_id for row in rows] == reference_order(players, results[: index + 1])
        assert [row.decided_by for row in rows] == reference_decided_by(rows, results[: index + 1])


# Swiss: Buchholz and byes ----------------------------------------------------------------------


def swiss_event() -> list[ResultRow]:
    # P1 and P4 both win twice (6 points); P1 met stronger players (P3 and P2, 3 points each)
    # than P4 did (P5: 3, P6: 0).
    return [
        win("R1M1", "P1", "P3"),
        win("R1M2", "P4", "P5"),
        win("R1M3", "P2", "P6"),
        win("R2M1", "P1", "P2"),
        win("R2M2", "P4", "P6"),
        win("R2M3", "P3", "P5"),
        win("R3M1", "P5", "P6"),
    ]


def test_buchholz_is_the_sum_of_the_opponents_points_and_breaks_a_points_tie_in_swiss():
    players = [f"P{i}" for i in range(1, 7)]
    rows = compute_standings(players, swiss_event(), tie_breaks=SWISS_TIE_BREAKS)
    table = by_id(rows)
    assert (table["P1"].buchholz, table["P4"].buchholz) == (3 + 3, 3 + 0)
    assert [r.player_id for r in rows][:2] == ["P1", "P4"]
    assert rows[1].decided_by == "buchholz"
    assert "Buchholz" in SWISS_TIE_BREAK_RULE and "opponents' points" in TIE_BREAK_TEXT["buchholz"]


def test_round_robin_order_ignores_buchholz():
    # Same results, the round-robin rules: P1 and P4 level on points, wins, draws; no
    # head-to-head; the lower id goes first, whatever their Buchholz.
    players = ["P4", "P1", "P2", "P3", "P5", "P6"]
    results = [win("R1M1", "P4", "P3"), win("R1M2", "P1", "P5"), draw("R2M1", "P3", "P6")]
    rows = compute_standings(players, results)
    assert [r.player_id for r in rows][:2] == ["P1", "P4"] and rows[1].decided_by == "player_id"
    swiss = compute_standings(players, results, tie_breaks=SWISS_TIE_BREAKS)
    assert [r.player_id for r in swiss][:2] == ["P4", "P1"] and swiss[1].decided_by == "buchholz"


def test_a_bye_scores_a_win_s_points_but_no_match_and_no_buchholz():
    rows = by_id(compute_standings(["P1", "P2", "P3"], [win("R1M1", "P1", "P2")], byes=["P3"]))
    assert BYE_POINTS == 3
    assert (rows["P3"].points, rows["P3"].played, rows["P3"].wins, rows["P3"].byes) == (3, 0, 0, 1)
    assert rows["P3"].buchholz == 0
    rows = by_id(compute_standings(["P1", "P2", "P3"], [], byes=["P3", "P3"], bye_points=1))
    assert rows["P3"].points == 2


def test_it_refuses_tie_breaks_it_cannot_apply():
    for bad in (
        ("points", "player_id"),
        ("buchholz", "points", "player_id", "head_to_head"),
        ("points", "points", "head_to_head", "player_id"),
    ):
        try:
            StandingsTable.for_players(["P1"], bad)  # type: ignore[arg-type]
        except ValueError:
            continue
        raise AssertionError(f"{bad} was accepted")


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=2, max_value=12), st.randoms(use_true_random=False))
def test_swiss_standings_are_the_plain_reading_of_points_then_buchholz(n, rng):
    players = [f"P{i}" for i in range(1, n + 1)]
    results = random_results(rng, n, False)[: rng.randint(0, n * 2)]
    rows = compute_standings(players, results, tie_breaks=SWISS_TIE_BREAKS)
    points = {r.player_id: r.points for r in rows}
    for row in rows:
        met = [r.player_b for r in results if r.player_a == row.player_id]
        met += [r.player_a for r in results if r.player_b == row.player_id]
        assert row.buchholz == sum(points[o] for o in met)
    keys = [(r.points, r.buchholz, r.wins, r.draws) for r in rows]
    assert keys == sorted(keys, reverse=True)
