"""The round becomes PLAYED exactly once even when its last two matches finish in two concurrent
transactions (PostgreSQL, READ COMMITTED, several LM database threads). SQLite runs one writer at
a time, so the interleaving below cannot happen there."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, connections, transaction

from league import actions
from league.models import Match, Round
from tests.league.lm_support import assigned_match, make_league, player_meta, referee_meta, site_referee_key

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor == "sqlite", reason="needs concurrent writers (CI runs it on PostgreSQL)"),
]


def test_the_second_of_two_concurrent_last_matches_marks_the_round_played():
    league = make_league("race_league")
    for n in range(4):
        actions.register_player(league.league_id, player_meta(display_name=f"p{n}"), None)
    actions.register_referee(league.league_id, referee_meta(display_name="ref"), None, referee_key=site_referee_key())
    first = assigned_match(league, a="P01", b="P02", match_id="R1M1")
    second = assigned_match(league, a="P03", b="P04", match_id="R1M2")
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
