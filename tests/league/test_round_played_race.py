"""The round becomes PLAYED exactly once even when its last two matches finish in two concurrent
transactions. On PostgreSQL (READ COMMITTED, several LM database threads) the test forces the
worst interleaving: both transactions check the round before either commits. SQLite runs one
writer at a time, so there the two transactions start together and the database orders them."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, connections, transaction

from league import actions
from league.models import Match, Round
from tests.league.lm_support import assigned_match, make_league, player_meta, referee_meta, site_referee_key

pytestmark = pytest.mark.django_db(transaction=True)


def _round_of_two_matches() -> tuple[Match, Match]:
    league = make_league("race_league")
    for n in range(4):
        actions.register_player(league.league_id, player_meta(display_name=f"p{n}"), None)
    actions.register_referee(league.league_id, referee_meta(display_name="ref"), None, referee_key=site_referee_key())
    return (
        assigned_match(league, a="P01", b="P02", match_id="R1M1"),
        assigned_match(league, a="P03", b="P04", match_id="R1M2"),
    )


def test_two_last_matches_finishing_together_mark_the_round_played_once():
    """Any database: the two transactions start at once; whichever commits second marks it."""
    first, second = _round_of_two_matches()
    start = threading.Barrier(2)
    marked: list[bool] = []
    errors: list[BaseException] = []

    def finish(match_pk: int) -> None:
        try:
            start.wait(10)
            with transaction.atomic():
                Match.objects.filter(pk=match_pk).update(status=Match.Status.FINISHED)
                marked.append(actions.mark_round_played(first.round_id))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=finish, args=(m.pk,)) for m in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors, errors
    assert sorted(marked) == [False, True]
    assert Round.objects.get(pk=first.round_id).status == Round.Status.PLAYED


@pytest.mark.skipif(connection.vendor == "sqlite", reason="SQLite has one writer at a time: no such interleaving")
def test_the_second_of_two_concurrent_last_matches_marks_the_round_played():
    first, second = _round_of_two_matches()
    round_pk = first.round_id
    steps = {name: threading.Event() for name in ("a_updated", "b_updated", "a_checked", "b_checking")}
    marked: dict[str, bool] = {}
    errors: list[BaseException] = []

    def finish(name: str, match_pk: int, before: list[str], signal: str, after: list[str]) -> None:
        try:
            with transaction.atomic():
                for step in before:
                    assert steps[step].wait(10), step
                Match.objects.filter(pk=match_pk).update(status=Match.Status.FINISHED)
                steps[signal].set()
                for step in after:
                    assert steps[step].wait(10), step
                if name == "b":
                    steps["b_checking"].set()
                marked[name] = actions.mark_round_played(round_pk)
                if name == "a":
                    steps["a_checked"].set()
                    assert steps["b_checking"].wait(10)
                    time.sleep(0.3)  # let B reach the round's lock before A commits
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            connections.close_all()

    # A and B each finish one match; both check the round before either has committed.
    a = threading.Thread(target=finish, args=("a", first.pk, [], "a_updated", ["b_updated"]))
    b = threading.Thread(target=finish, args=("b", second.pk, ["a_updated"], "b_updated", ["a_checked"]))
    a.start()
    b.start()
    a.join(30)
    b.join(30)
    assert not errors, errors
    assert sorted(marked.values()) == [False, True]
    assert Round.objects.get(pk=round_pk).status == Round.Status.PLAYED
