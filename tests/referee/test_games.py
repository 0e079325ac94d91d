"""The game rules, tested directly: pure functions of the moves and the injected RNG."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest

from referee.games import GAMES, InvalidMove, MoveContext, get_game
from referee.games.even_odd import EvenOdd
from referee.games.even_odd_bo5 import EvenOddBestOf5

INVALID_INPUTS = ["EVEN", "Even", "0", "", None, 6, -1, "3", True]


class Fixed(random.Random):
    """An RNG whose next draws are given (the rules take their randomness injected)."""

    def __init__(self, *values: int) -> None:
        super().__init__()
        self.values = list(values)

    def randint(self, a: int, b: int) -> int:
        value = self.values.pop(0)
        assert a <= value <= b
        return value


def play_even_odd(choice_a: str, choice_b: str, number: int):
    game = EvenOdd(Fixed(number))
    state = game.new_state("P01", "P02")
    game.apply(state, {"P01": choice_a, "P02": choice_b})
    assert game.is_finished(state)
    return game.outcome(state), game.details(state)


def test_it_registers_both_games():
    assert set(GAMES) == {"even_odd", "even_odd_bo5"}
    assert isinstance(get_game("even_odd"), EvenOdd)
    assert isinstance(get_game("even_odd_bo5"), EvenOddBestOf5)
    with pytest.raises(KeyError):
        get_game("chess")


@pytest.mark.parametrize("number", range(1, 11))
@pytest.mark.parametrize("choice", ["even", "odd"])
def test_it_draws_when_both_choose_the_same_whatever_the_number(choice, number):
    outcome, details = play_even_odd(choice, choice, number)
    assert (outcome.status, outcome.winner) == ("DRAW", None)
    assert details["drawn_number"] == number
    assert details["number_parity"] == ("even" if number % 2 == 0 else "odd")


@pytest.mark.parametrize("number", range(1, 11))
def test_it_gives_the_win_to_the_player_matching_the_parity(number):
    parity = "even" if number % 2 == 0 else "odd"
    other = "odd" if parity == "even" else "even"
    a_wins, _ = play_even_odd(parity, other, number)
    b_wins, details = play_even_odd(other, parity, number)
    assert (a_wins.status, a_wins.winner) == ("WIN", "P01")
    assert (b_wins.status, b_wins.winner) == ("WIN", "P02")
    assert details["choices"] == {"P01": other, "P02": parity}
    assert str(number) in b_wins.reason


def test_it_has_not_finished_before_both_choices():
    game = EvenOdd(Fixed())
    state = game.new_state("P01", "P02")
    assert not game.is_finished(state)
    assert game.details(state) == {"drawn_number": None, "number_parity": None, "choices": {}}


@pytest.mark.parametrize("value", INVALID_INPUTS)
def test_it_rejects_invalid_parity_choices(value):
    game = EvenOdd()
    with pytest.raises(InvalidMove) as err:
        game.validate_move(game.new_state("P01", "P02"), "P01", {"parity_choice": value})
    assert repr(value) in err.value.description


def test_it_rejects_a_missing_parity_choice_and_accepts_exact_lower_case():
    game = EvenOdd()
    state = game.new_state("P01", "P02")
    with pytest.raises(InvalidMove, match="missing"):
        game.validate_move(state, "P01", {})
    assert game.validate_move(state, "P01", {"parity_choice": "even"}) == "even"
    assert game.validate_move(state, "P01", {"parity_choice": "odd"}) == "odd"


def test_it_asks_for_a_parity_choice_with_the_context():
    game = EvenOdd()
    context = MoveContext(round_id=2, opponent_id="P02", time_limit_seconds=30, standings={"wins": 1})
    request = game.move_request(game.new_state("P01", "P02"), "P01", context)
    assert (request.tool, request.message_type) == ("choose_parity", "CHOOSE_PARITY_CALL")
    assert request.fields["context"] == {"opponent_id": "P02", "round_id": 2, "your_standings": {"wins": 1}}


def test_it_draws_uniformly_from_one_to_ten():
    """Chi-square over 10,000 draws from the default (cryptographic) source: p > 0.001."""
    game = EvenOdd()
    counts = Counter(game.draw_number() for _ in range(10_000))
    assert set(counts) == set(range(1, 11))
    expected = 1000
    chi_square = sum((counts[n] - expected) ** 2 / expected for n in range(1, 11))
    assert chi_square < 27.877  # critical value for 9 degrees of freedom at p = 0.001


def bo5_play(moves_a, moves_b):
    game = EvenOddBestOf5()
    state = game.new_state("P01", "P02")
    notices = []
    for a, b in zip(moves_a, moves_b, strict=True):
        assert not game.is_finished(state)
        notices.append(game.apply(state, {"P01": a, "P02": b}))
    return game, state, notices


@pytest.mark.parametrize(("a", "b"), list(itertools.product(range(1, 6), repeat=2)))
def test_it_gives_a_bo5_round_to_odd_on_an_odd_sum_and_to_even_otherwise(a, b):
    _, state, (notice,) = bo5_play([a], [b])
    odd = (a + b) % 2 == 1
    assert notice.message_type == "ROUND_RESULT"
    assert notice.fields["sum"] == a + b
    assert notice.fields["sum_type"] == ("ODD" if odd else "EVEN")
    assert notice.fields["round_winner"] == ("P01" if odd else "P02")
    assert state.scores == ({"P01": 1, "P02": 0} if odd else {"P01": 0, "P02": 1})


def test_it_ends_bo5_at_three_round_wins():
    game, state, _ = bo5_play([1, 1, 2], [2, 2, 1])  # sums 3, 3, 3: ODD (P01) takes three
    assert game.is_finished(state)
    outcome = game.outcome(state)
    assert (outcome.status, outcome.winner) == ("WIN", "P01")
    assert game.details(state)["scores"] == {"P01": 3, "P02": 0}
    assert [r["game_round"] for r in game.details(state)["rounds"]] == [1, 2, 3]


def test_it_plays_bo5_to_the_fifth_round_at_two_all():
    game, state, _ = bo5_play([1, 1, 1, 1], [2, 2, 1, 1])  # ODD, ODD, EVEN, EVEN
    assert not game.is_finished(state)
    game.apply(state, {"P01": 2, "P02": 2})  # EVEN wins the decider
    assert game.is_finished(state)
    outcome = game.outcome(state)
    assert (outcome.status, outcome.winner) == ("WIN", "P02")
    assert state.scores == {"P01": 2, "P02": 3}


def test_it_tells_each_bo5_player_its_role_and_the_previous_rounds():
    game, state, _ = bo5_play([3], [2])
    context = MoveContext(round_id=1, opponent_id="P01", time_limit_seconds=30)
    request = game.move_request(state, "P02", context)
    assert (request.tool, request.message_type) == ("make_move", "MOVE_REQUEST")
    assert request.fields["game_round"] == 2
    assert request.fields["game_state"]["your_role"] == "EVEN"
    assert request.fields["game_state"]["previous_rounds"][0]["moves"] == {"P01": 3, "P02": 2}
    start = game.start_notice(state, "P01", 30)
    assert start.fields["players"] == [{"player_id": "P01", "role": "ODD"}, {"player_id": "P02", "role": "EVEN"}]


@pytest.mark.parametrize("value", [*INVALID_INPUTS, 0, 7, 2.5])
def test_it_rejects_invalid_bo5_numbers(value):
    game = EvenOddBestOf5()
    with pytest.raises(InvalidMove):
        game.validate_move(game.new_state("P01", "P02"), "P01", {"move": {"number": value}})


def test_it_accepts_bo5_numbers_one_to_five_and_rejects_a_missing_move():
    game = EvenOddBestOf5()
    state = game.new_state("P01", "P02")
    assert [game.validate_move(state, "P01", {"move": {"number": n}}) for n in range(1, 6)] == [1, 2, 3, 4, 5]
    with pytest.raises(InvalidMove, match="missing"):
        game.validate_move(state, "P01", {})
