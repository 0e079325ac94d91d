"""league/arena.py: continuous pairing, rest after failures, the hourly cap, identity."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from league.arena import Entrant, hour_count, identity_of, pair_free, rest_seconds, under_cap


def test_each_agent_meets_the_free_agent_nearest_in_rating() -> None:
    free = [Entrant(1, 30.0), Entrant(2, 10.0), Entrant(3, 29.0), Entrant(4, 11.0)]
    assert pair_free(free) == [(1, 3), (4, 2)]


def test_the_longest_waiting_agents_are_paired_first() -> None:
    # The referees have room for one match: it goes to the newcomer (never played, unrated) and
    # its nearest in rating, not to the two best-rated agents, who played more recently.
    free = [
        Entrant(1, 30.0, last_match=50),
        Entrant(2, 29.0, last_match=51),
        Entrant(3, 0.0),
        Entrant(4, 1.0, last_match=40),
    ]
    assert pair_free(free) == [(4, 3), (1, 2)]
    assert pair_free(free)[:1] == [(4, 3)]


def test_the_higher_rated_agent_is_first_and_the_input_order_does_not_matter() -> None:
    free = [Entrant(k, float(k % 7)) for k in range(1, 13)]
    shuffled = free[:]
    random.Random(4).shuffle(shuffled)
    assert pair_free(shuffled) == pair_free(free)
    ordinal = {e.key: e.ordinal for e in free}
    assert all((ordinal[a], -a) >= (ordinal[b], -b) for a, b in pair_free(free))


def test_no_immediate_rematch_while_another_free_agent_is_there() -> None:
    # 1 and 2 are nearest but just played each other: each meets someone else.
    free = [Entrant(1, 20.0, last_opponent=2), Entrant(2, 19.9, last_opponent=1), Entrant(3, 5.0), Entrant(4, 4.0)]
    pairs = pair_free(free)
    assert {frozenset(p) for p in pairs} == {frozenset((1, 3)), frozenset((2, 4))}


def test_an_agent_alone_plays_a_house_bot() -> None:
    free = [Entrant(1, 12.0), Entrant(8, 0.0, house=True), Entrant(9, 13.0, house=True)]
    assert pair_free(free) == [(9, 1)]  # the nearest house bot


def test_a_house_bot_it_did_not_just_play_comes_before_a_rematch() -> None:
    free = [
        Entrant(1, 12.0, last_opponent=2),
        Entrant(2, 12.0, last_opponent=1),
        Entrant(8, 0.0, house=True),
    ]
    pairs = pair_free(free)
    assert pairs == [(1, 8)]  # 2 waits for the next free agent rather than meeting 1 again at once


def test_two_agents_alone_play_again_rather_than_wait_forever() -> None:
    free = [Entrant(1, 12.0, last_opponent=2), Entrant(2, 11.0, last_opponent=1)]
    assert pair_free(free) == [(1, 2)]


def test_house_bots_never_play_each_other() -> None:
    assert pair_free([Entrant(8, 0.0, house=True), Entrant(9, 0.0, house=True)]) == []


def test_nobody_is_paired_twice_and_an_odd_one_waits() -> None:
    free = [Entrant(k, float(k)) for k in range(1, 8)]
    pairs = pair_free(free)
    seen = [k for pair in pairs for k in pair]
    assert len(seen) == len(set(seen)) == 6


def test_a_failing_agent_rests_with_a_doubling_backoff_up_to_the_longest() -> None:
    assert rest_seconds(0, 2.0, 300.0) == 0.0
    assert [rest_seconds(n, 2.0, 300.0) for n in range(1, 6)] == [2.0, 4.0, 8.0, 16.0, 32.0]
    assert rest_seconds(9, 2.0, 300.0) == 300.0
    assert rest_seconds(10_000, 2.0, 300.0) == 300.0  # never dropped, never an overflow


def test_the_hourly_cap() -> None:
    assert under_cap(59, 60) and not under_cap(60, 60)
    assert under_cap(10_000, 0)  # 0: no cap


def test_the_cap_counts_an_hour_from_the_first_match_of_the_hour() -> None:
    began = datetime(2026, 11, 27, 10, 0, tzinfo=UTC)
    assert hour_count(None, 0, began) == (None, 0)  # no match yet: a new hour begins with the next
    assert hour_count(began, 7, began + timedelta(minutes=59)) == (began, 7)
    assert hour_count(began, 7, began + timedelta(hours=1)) == (None, 0)


def test_identity_is_the_seat_or_the_relay_name() -> None:
    assert identity_of("direct", "http://127.0.0.1:8101/mcp", "Ann") == "seat:http://127.0.0.1:8101/mcp"
    assert identity_of("relay", "ws://lm/relay/a1/P01", "Ann") == "relay:Ann"


def test_two_hundred_free_agents_make_a_hundred_pairs() -> None:
    rng = random.Random(1)
    free = [Entrant(k, rng.uniform(-5, 40), last_opponent=(k + 1) % 200) for k in range(200)]
    assert len(pair_free(free)) == 100
