"""Ratings with an uncertainty: a thin wrapper round openskill's Plackett-Luce model.

Pure: no Django, no clock. A rating is a (mu, sigma) pair; players are ranked by its ordinal
(mu - 3 sigma, openskill's conservative estimate), which starts at 0 and rises as the model
grows sure of a player. All the maths is the library's (``PlackettLuce().rate``) with its
documented defaults (mu 25, sigma 25/3): nothing here computes a rating by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

from openskill.models import PlackettLuce

# One model for the whole site, with openskill's defaults: every rating is on one scale.
MODEL = PlackettLuce()


@dataclass(frozen=True, slots=True)
class Rating:
    mu: float
    sigma: float

    @property
    def ordinal(self) -> float:
        """What players are ranked by: openskill's ordinal (mu - 3 sigma)."""
        return MODEL.rating(mu=self.mu, sigma=self.sigma).ordinal()


def initial() -> Rating:
    """The rating of a player never rated: the model's default mu and sigma."""
    fresh = MODEL.rating()
    return Rating(fresh.mu, fresh.sigma)


def rate(first: Rating, second: Rating, *, draw: bool = False) -> tuple[Rating, Rating]:
    """The two ratings after one game in which ``first`` beat ``second`` (``draw``: neither
    won). Returned in the order given."""
    a = MODEL.rating(mu=first.mu, sigma=first.sigma)
    b = MODEL.rating(mu=second.mu, sigma=second.sigma)
    [[a_after], [b_after]] = MODEL.rate([[a], [b]], ranks=[1, 1] if draw else [1, 2])
    return Rating(a_after.mu, a_after.sigma), Rating(b_after.mu, b_after.sigma)
