"""Strategies, measured: adaptive against the fixed strategies over many simulated matches."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from players.strategies import make_strategy
from players.strategies.adaptive import predict_even
from players.strategies.base import MoveSituation, ParitySituation

MATCHES = 1000


def simulate_even_odd(name_a: str, name_b: str, matches: int = MATCHES, seed: int = 7) -> tuple[float, float]:
    """Mean points per match of A and B over ``matches`` even_odd matches (each sees the other's
    past choices, as a player's memory does). Numbers are drawn 1-10 as the referee does."""
    rng = random.Random(seed)
    a = make_strategy(name_a, rng=random.Random(seed + 1))
    b = make_strategy(name_b, rng=random.Random(seed + 2))
    a_choices: list[str] = []
    b_choices: list[str] = []
    points_a = points_b = 0
    for i in range(matches):
        choice_a = a.choose_parity(ParitySituation("A", "B", f"M{i}", opponent_history=b_choices[-200:]))
        choice_b = b.choose_parity(ParitySituation("B", "A", f"M{i}", opponent_history=a_choices[-200:]))
        a_choices.append(choice_a)
        b_choices.append(choice_b)
        if choice_a == choice_b:
            points_a, points_b = points_a + 1, points_b + 1
        else:
            parity = "even" if rng.randint(1, 10) % 2 == 0 else "odd"
            if choice_a == parity:
                points_a += 3
            else:
                points_b += 3
    return points_a / matches, points_b / matches


OPPONENTS = ("always_even", "always_odd", "alternate")


@pytest.mark.parametrize("opponent", OPPONENTS)
def test_adaptive_finds_the_best_reply_to_each_predictable_opponent(opponent):
    # The best reply to a predictable opponent is the other parity: 1.5 expected points.
    adaptive, _ = simulate_even_odd("adaptive", opponent)
    assert adaptive > 1.4


def test_adaptive_beats_always_even_and_always_odd_on_points():
    """Against the same opponents, over 1,000 matches each, adaptive earns clearly more."""

    def mean_points(name: str) -> float:
        return sum(simulate_even_odd(name, opponent)[0] for opponent in OPPONENTS) / len(OPPONENTS)

    adaptive = mean_points("adaptive")
    for fixed in ("always_even", "always_odd", "random"):
        assert adaptive > mean_points(fixed) + 0.15, fixed


def test_a_copy_only_draws():
    assert simulate_even_odd("always_even", "always_even") == (1.0, 1.0)


def test_the_predictor_catches_frequencies_and_alternation():
    assert predict_even([])[1] == 0
    assert predict_even(["even"] * 6)[0] > 0.8
    assert predict_even(["odd"] * 6)[0] < 0.2
    p_even, _ = predict_even(["even", "odd"] * 4)  # last was odd: an alternator says even next
    assert p_even >= 0.8


def bo5_round_wins(name: str, role: str, opponent: str, rounds: int = 600, seed: int = 3) -> float:
    """Share of bo5 rounds ``name`` wins in ``role`` against ``opponent`` (ODD wins odd sums)."""
    me = make_strategy(name, rng=random.Random(seed))
    them = make_strategy(opponent, rng=random.Random(seed + 1))
    their_role = "EVEN" if role == "ODD" else "ODD"
    mine: list[int] = []
    theirs: list[int] = []
    wins = 0
    for i in range(rounds):
        a = me.choose_move(MoveSituation("A", "B", f"M{i // 5}", role, opponent_moves=theirs[-200:]))
        b = them.choose_move(MoveSituation("B", "A", f"M{i // 5}", their_role, opponent_moves=mine[-200:]))
        mine.append(a)
        theirs.append(b)
        odd_sum = (a + b) % 2 == 1
        wins += odd_sum == (role == "ODD")
    return wins / rounds


@pytest.mark.parametrize("role", ["ODD", "EVEN"])
@pytest.mark.parametrize("opponent", ["always_odd", "always_even", "alternate"])
def test_adaptive_exploits_a_predictable_bo5_opponent(role, opponent):
    assert bo5_round_wins("adaptive", role, opponent) > 0.8


def test_adaptive_plays_the_bo5_equilibrium_without_evidence():
    strategy = make_strategy("adaptive", rng=random.Random(11))
    picks = Counter(strategy.choose_move(MoveSituation("A", None, "M", "ODD")) % 2 for _ in range(4000))
    # Half odd, half even (a uniform 1-5 would be 60% odd, which an opponent could exploit).
    assert 0.46 < picks[1] / 4000 < 0.54


def test_random_and_fixed_strategies_answer_legal_moves():
    for name in ("random", "always_even", "always_odd", "alternate", "adaptive"):
        strategy = make_strategy(name, rng=random.Random(1))
        for _ in range(50):
            assert strategy.choose_parity(ParitySituation("A", "B", "M")) in ("even", "odd")
            assert strategy.choose_move(MoveSituation("A", "B", "M", "ODD")) in (1, 2, 3, 4, 5)
    assert {make_strategy("always_odd").choose_move(MoveSituation("A", "B", "M", "ODD")) for _ in range(30)} <= {
        1,
        3,
        5,
    }
    alternate = make_strategy("alternate")
    assert [alternate.choose_parity(ParitySituation("A", "B", "M")) for _ in range(4)] == ["even", "odd"] * 2
