"""league/ratings.py: openskill's Plackett-Luce, wrapped; the numbers are the library's own."""

from __future__ import annotations

from openskill.models import PlackettLuce

from league import ratings
from league.ratings import Rating

# A known season of three players: (winner, loser, draw).
SEASON = [("ann", "bob", False), ("bob", "cy", False), ("ann", "cy", True), ("cy", "ann", False), ("ann", "bob", False)]


def test_a_known_sequence_of_results_gives_what_the_library_computes_directly() -> None:
    ours = {name: ratings.initial() for name in ("ann", "bob", "cy")}
    model = PlackettLuce()
    direct = {name: model.rating() for name in ("ann", "bob", "cy")}
    for first, second, draw in SEASON:
        ours[first], ours[second] = ratings.rate(ours[first], ours[second], draw=draw)
        [[a], [b]] = model.rate([[direct[first]], [direct[second]]], ranks=[1, 1] if draw else [1, 2])
        direct[first], direct[second] = a, b
    for name, rating in ours.items():
        assert (rating.mu, rating.sigma) == (direct[name].mu, direct[name].sigma)
        assert rating.ordinal == direct[name].ordinal()


def test_a_new_player_starts_at_the_models_defaults_with_ordinal_zero() -> None:
    fresh = ratings.initial()
    assert (fresh.mu, fresh.sigma) == (25.0, 25.0 / 3)
    assert abs(fresh.ordinal) < 1e-9


def test_the_winner_rises_the_loser_falls_and_both_grow_surer() -> None:
    winner, loser = ratings.rate(ratings.initial(), ratings.initial())
    assert winner.mu > 25.0 > loser.mu
    assert winner.sigma < 25.0 / 3 and loser.sigma < 25.0 / 3


def test_a_draw_between_equals_moves_neither_mean() -> None:
    a, b = ratings.rate(Rating(30.0, 5.0), Rating(30.0, 5.0), draw=True)
    assert a == b and abs(a.mu - 30.0) < 1e-9 and a.sigma < 5.0
