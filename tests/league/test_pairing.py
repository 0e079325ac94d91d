"""Swiss pairing and knockout brackets (league/pairing.py): every rule, checked round by round."""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from league.pairing import (
    Entrant,
    PlayerRecord,
    SwissHistory,
    SwissPairing,
    knockout_bracket,
    knockout_next_round,
    knockout_seeds,
    swiss_round,
    swiss_rounds,
)
from leagueproto.scoring import BYE_POINTS, DRAW_POINTS, LOSS_POINTS, WIN_POINTS


def entrants(n: int, rng: random.Random | None = None) -> list[Entrant]:
    return [Entrant(f"P{i}", rng.randint(1000, 2000) if rng else None) for i in range(1, n + 1)]


def play(rng: random.Random, history: SwissHistory, pairing: SwissPairing) -> None:
    for a, b in pairing.pairs:
        x = rng.random()
        if x < 0.45:
            history.record_match(a, b, WIN_POINTS, LOSS_POINTS)
        elif x < 0.9:
            history.record_match(a, b, LOSS_POINTS, WIN_POINTS)
        else:
            history.record_match(a, b, DRAW_POINTS, DRAW_POINTS)
    if pairing.bye:
        history.record_bye(pairing.bye)


def rematch_free_pairing_exists(players: list[str], history: SwissHistory) -> bool:
    graph = nx.Graph()
    graph.add_nodes_from(players)
    for i, x in enumerate(players):
        for y in players[i + 1 :]:
            if y not in history.record(x).opponents:
                graph.add_edge(x, y)
    return 2 * len(nx.max_weight_matching(graph, maxcardinality=True)) == len(players)


def fewest_floaters_in_a_full_round(pool: list[str], players: list[str], history: SwissHistory) -> int:
    """The fewest players of ``pool`` paired outside it by any pairing of ``players`` (the pool and
    everyone below it: the groups above are settled) without a rematch: a group pairs inside
    itself first, but never at the cost of a rematch further down."""
    inside = set(pool)
    graph = nx.Graph()
    graph.add_nodes_from(players)
    for i, x in enumerate(players):
        for y in players[i + 1 :]:
            if y not in history.record(x).opponents:
                graph.add_edge(x, y, weight=2 if x in inside and y in inside else 1)
    matching = nx.max_weight_matching(graph, maxcardinality=True)
    assert 2 * len(matching) == len(players)
    return len(pool) - 2 * sum(1 for x, y in matching if x in inside and y in inside)


@dataclass
class Checked:
    """What a simulated event showed, for the assertions and the bench print."""

    pairing_seconds: list[float] = field(default_factory=list)
    rematches: int = 0


def check_round(players: list[Entrant], before: SwissHistory, pairing: SwissPairing) -> None:
    """Every rule of one round's pairing, against the history it was made from."""
    ids = [e.player_id for e in players]
    seated = [p for pair in pairing.pairs for p in pair] + ([pairing.bye] if pairing.bye else [])
    assert sorted(seated) == sorted(ids), "everyone plays or has the bye, exactly once"
    assert (pairing.bye is not None) == (len(ids) % 2 == 1)

    # One bye per player: the bye goes to someone with the fewest byes so far.
    if pairing.bye:
        assert before.record(pairing.bye).byes == min(before.record(p).byes for p in ids)

    # No rematch while avoidable.
    met = [(a, b) for a, b in pairing.pairs if b in before.record(a).opponents]
    assert len(met) == pairing.rematches
    if met:
        paired = [p for p in ids if p != pairing.bye]
        assert not rematch_free_pairing_exists(paired, before)

    # Score groups: from the top, each group (with the players floated into it) floats down
    # only as many players as it cannot pair inside itself without a rematch.
    points = {p: before.record(p).points for p in ids}
    paired_ids = [p for p in ids if p != pairing.bye]
    partner = {a: b for a, b in pairing.pairs} | {b: a for a, b in pairing.pairs}
    carried: list[str] = []
    for score in sorted({points[p] for p in partner}, reverse=True):
        pool = carried + [p for p in partner if points[p] == score]
        carried = [p for p in pool if points[partner[p]] < score]
        if len(carried) > len(pool) % 2 and not met:
            below = [p for p in paired_ids if points[p] < score]
            assert len(carried) == fewest_floaters_in_a_full_round(pool, pool + below, before)


def simulate(n: int, rounds: int, seed: int, check: bool = True) -> tuple[SwissHistory, Checked]:
    rng = random.Random(seed)
    players = entrants(n, rng)
    history = SwissHistory()
    checked = Checked()
    for _ in range(rounds):
        started = time.perf_counter()
        pairing = swiss_round(players, history)
        checked.pairing_seconds.append(time.perf_counter() - started)
        checked.rematches += pairing.rematches
        if check:
            check_round(players, history, pairing)
        play(rng, history, pairing)
    return history, checked


def test_the_default_round_count_is_ceil_log2_n():
    assert [swiss_rounds(n) for n in (1, 2, 3, 4, 5, 8, 9, 1000)] == [0, 1, 2, 2, 3, 3, 4, 10]


def test_it_pairs_top_half_against_bottom_half_in_round_one():
    pairing = swiss_round(entrants(8), SwissHistory())
    assert sorted(tuple(sorted(pair)) for pair in pairing.pairs) == [
        ("P1", "P5"),
        ("P2", "P6"),
        ("P3", "P7"),
        ("P4", "P8"),
    ]
    assert pairing.bye is None


def test_it_seeds_round_one_by_rating():
    players = [Entrant("P1", 1000), Entrant("P2", 1900), Entrant("P3", 1500), Entrant("P4")]
    pairing = swiss_round(players, SwissHistory())
    # Ranked P2, P3, P1, P4 (unrated last): P2 v P1, P3 v P4.
    assert sorted(tuple(sorted(pair)) for pair in pairing.pairs) == [("P1", "P2"), ("P3", "P4")]


def test_it_avoids_the_rematch_a_greedy_pairing_would_force():
    # All on 3 points. Top-half v bottom-half says P1-P3 and P2-P4, but P2 and P4 have met:
    # pairing P1 greedily with P3 would leave P2-P4. The only rematch-free pairing is P1-P4, P2-P3.
    history = SwissHistory(
        {
            "P1": PlayerRecord(points=3, opponents={"P9"}, as_a=1),
            "P2": PlayerRecord(points=3, opponents={"P4"}, as_a=1),
            "P3": PlayerRecord(points=3, opponents={"P8"}, as_b=1),
            "P4": PlayerRecord(points=3, opponents={"P2"}, as_b=1),
        }
    )
    pairing = swiss_round(entrants(4), history)
    assert sorted(tuple(sorted(pair)) for pair in pairing.pairs) == [("P1", "P4"), ("P2", "P3")]
    assert pairing.rematches == 0


def test_it_floats_the_lowest_ranked_player_of_an_odd_group_down():
    history = SwissHistory({p: PlayerRecord(points=3) for p in ("P1", "P2", "P3")})
    pairing = swiss_round(entrants(6), history)
    pairs = {tuple(sorted(pair)) for pair in pairing.pairs}
    assert ("P1", "P2") in pairs  # the group of three keeps its two best; P3 floats
    assert ("P3", "P4") in pairs  # and meets the top of the next group


def test_it_floats_a_player_whose_group_has_only_opponents_it_met():
    history = SwissHistory(
        {
            "P1": PlayerRecord(points=6, opponents={"P2"}),
            "P2": PlayerRecord(points=6, opponents={"P1"}),
        }
    )
    pairing = swiss_round(entrants(4), history)
    assert pairing.rematches == 0
    assert all({a, b} not in ({"P1", "P2"}, {"P3", "P4"}) for a, b in pairing.pairs)


def test_it_allows_a_rematch_only_when_every_pairing_has_one():
    history = SwissHistory()
    history.record_match("P1", "P2", WIN_POINTS, LOSS_POINTS)
    pairing = swiss_round(entrants(2), history)
    assert pairing.pairs and pairing.rematches == 1


def test_the_bye_goes_to_the_lowest_ranked_player_without_one():
    history = SwissHistory({"P5": PlayerRecord(byes=1, points=BYE_POINTS)})
    pairing = swiss_round(entrants(5), history)
    assert pairing.bye == "P4"  # P5 is lowest by id but already had its bye (and has 3 points)
    history.record_bye("P4")
    assert history.record("P4").points == BYE_POINTS == WIN_POINTS
    history.record_bye("P3", points=1)
    assert history.record("P3").points == 1


def test_roles_go_to_the_player_who_was_b_more_often():
    history = SwissHistory(
        {
            "P1": PlayerRecord(points=3, as_a=2, as_b=0, last_role="A"),
            "P2": PlayerRecord(points=3, as_a=0, as_b=2, last_role="B"),
        }
    )
    assert swiss_round(entrants(2), history).pairs == [("P2", "P1")]
    history = SwissHistory(
        {
            "P1": PlayerRecord(points=3, as_a=1, as_b=1, last_role="B"),
            "P2": PlayerRecord(points=3, as_a=1, as_b=1, last_role="A"),
        }
    )
    assert swiss_round(entrants(2), history).pairs == [("P1", "P2")]  # P1 alternates to A


def test_it_is_deterministic_whatever_the_input_order():
    history, _ = simulate(30, 3, seed=4, check=False)
    players = entrants(30, random.Random(4))
    first = swiss_round(players, history)
    shuffled = list(players)
    random.Random(1).shuffle(shuffled)
    assert swiss_round(shuffled, history) == first == swiss_round(players, history)


@pytest.mark.parametrize("n", [7, 9])
def test_nobody_gets_two_byes_while_someone_has_none(n):
    for seed in range(20):
        history, _ = simulate(n, swiss_rounds(n) + 2, seed)
        byes = [history.record(f"P{i}").byes for i in range(1, n + 1)]
        assert max(byes) - min(byes) <= 1 and sum(byes) == swiss_rounds(n) + 2


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 24), extra=st.integers(0, 3), seed=st.integers(0, 10_000))
def test_every_rule_holds_in_every_round_of_small_events(n, extra, seed):
    simulate(n, swiss_rounds(n) + extra, seed)


def test_it_pairs_players_wanting_opposite_roles_when_the_group_allows():
    # Dutch order says P1-P3 (both owed A) and P2-P4 (both owed B): it pairs across instead.
    history = SwissHistory(
        {
            "P1": PlayerRecord(points=3, opponents={"P9"}, as_b=1, last_role="B"),
            "P2": PlayerRecord(points=3, opponents={"P8"}, as_a=1, last_role="A"),
            "P3": PlayerRecord(points=3, opponents={"P7"}, as_b=1, last_role="B"),
            "P4": PlayerRecord(points=3, opponents={"P6"}, as_a=1, last_role="A"),
        }
    )
    pairing = swiss_round(entrants(4), history)
    assert sorted(pairing.pairs) == [("P1", "P4"), ("P3", "P2")]  # everyone gets the role it is owed


def test_roles_stay_within_two_of_balance_and_mostly_even_after_an_even_number_of_rounds():
    # Score groups come first (as in the Dutch system): a group of winners who mostly played B
    # cannot all play A next, so a few players end two apart, never more.
    for seed in range(3):
        history, _ = simulate(64, 6, seed=seed)
        imbalance = Counter(abs(r.as_a - r.as_b) for r in history.records.values())
        assert set(imbalance) <= {0, 2} and imbalance[0] >= 48, imbalance


def test_a_long_event_whose_bottom_groups_need_looking_ahead_keeps_every_rule():
    # 101 players over 12 rounds: late rounds leave bottom players who have met everyone near
    # them, and the lowest groups are paired again looking ahead (without a rematch).
    _, checked = simulate(101, 12, seed=3)
    assert checked.rematches == 0


def test_a_thousand_player_ten_round_event_keeps_every_rule_every_round():
    started = time.perf_counter()
    history, checked = simulate(1000, 10, seed=1)
    total = time.perf_counter() - started
    print(
        f"\nbench swiss 1000 players: pairing per round mean {sum(checked.pairing_seconds) / 10:.3f}s "
        f"max {max(checked.pairing_seconds):.3f}s; 10 rounds with checks {total:.2f}s"
    )
    assert checked.rematches == 0
    imbalance = Counter(abs(r.as_a - r.as_b) for r in history.records.values())
    assert set(imbalance) <= {0, 2} and imbalance[0] >= 900, imbalance
    assert all(len(r.opponents) == 10 for r in history.records.values())


# Knockout ---------------------------------------------------------------------------------------


def test_eight_players_are_seeded_one_v_eight_and_one_and_two_meet_only_in_the_final():
    players = [Entrant(f"P{i}", 2000 - 10 * i) for i in range(1, 9)]
    assert knockout_bracket(players) == [("P1", "P8"), ("P4", "P5"), ("P2", "P7"), ("P3", "P6")]


def test_thirteen_players_give_the_top_three_seeds_byes():
    players = [Entrant(f"P{i}", 2000 - 10 * i) for i in range(1, 14)]
    bracket = knockout_bracket(players)
    assert len(bracket) == 8
    assert [m for m in bracket if m[1] is None] == [("P1", None), ("P2", None), ("P3", None)]
    assert bracket[0] == ("P1", None) and bracket[1] == ("P8", "P9") and bracket[4] == ("P2", None)
    assert sorted(p for m in bracket for p in m if p) == sorted(e.player_id for e in players)


def test_without_ratings_seeds_follow_player_id():
    assert knockout_bracket(entrants(4)) == [("P1", "P4"), ("P2", "P3")]
    assert knockout_seeds([Entrant("P2"), Entrant("P1", 1500)]) == {"P1": 1, "P2": 2}


def test_winners_advance_byes_pass_and_a_draw_goes_to_the_higher_seed_until_the_final():
    players = [Entrant(f"P{i}", 2000 - 10 * i) for i in range(1, 6)]
    seeds = knockout_seeds(players)
    first = knockout_bracket(players)
    assert first == [("P1", None), ("P4", "P5"), ("P2", None), ("P3", None)]
    second = knockout_next_round([(first[0], None), (first[1], "P5"), (first[2], None), (first[3], None)], seeds)
    assert second == [("P1", "P5"), ("P2", "P3")]
    final = knockout_next_round([(second[0], "P5"), (second[1], None)], seeds)  # P2-P3 drawn
    assert final == [("P2", "P5")]  # the higher seed goes first
    assert knockout_next_round([(final[0], "P5")], seeds) == []
    with pytest.raises(ValueError):
        knockout_next_round([(final[0], "P1")], seeds)
