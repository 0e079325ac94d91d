"""league/bench/chaos.py: when a process the chaos bench restarted may be killed again, and which
kind of process is killed next."""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from league.bench.chaos import ROLES, Turn, Victim, killable
from league.bench.processes import Child


@pytest.fixture
def victim(tmp_path: Path) -> Iterator[Victim]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        yield Victim(Child("lm", "lm", proc), tmp_path, started_at=100.0)
    finally:
        proc.kill()
        proc.wait()


def test_a_process_that_started_quickly_is_left_alone_for_the_settle_time(victim):
    victim.ready_at = 101.0  # served 1 s after its start
    assert not victim.settled(103.9, settle=3.0)
    assert victim.settled(104.0, settle=3.0)


def test_a_process_that_came_back_slowly_is_left_alone_as_long_as_it_took_to_start(victim):
    victim.restarted = True
    victim.ready_at = 110.0  # a loaded machine: 10 s to serve again
    assert not victim.settled(113.0, settle=3.0)
    assert not victim.settled(119.9, settle=3.0)
    assert victim.settled(120.0, settle=3.0)


def test_a_first_start_however_slow_is_left_alone_for_the_settle_time_only(victim):
    # A league's agents start all at once; their slow first start says nothing of a restart's.
    victim.ready_at = 110.0
    assert not victim.settled(112.9, settle=3.0)
    assert victim.settled(113.0, settle=3.0)


def test_a_process_not_serving_yet_or_down_is_never_settled(victim):
    assert not victim.settled(1_000.0, settle=3.0)  # never seen serving
    victim.ready_at = 101.0
    victim.restart_at = 2_000.0  # killed on purpose, its restart planned
    assert not victim.settled(1_000.0, settle=3.0)


def _child(role: str) -> Child:
    return Child(role, role, subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]))


def test_neither_the_lm_nor_the_conductor_is_killed_while_the_other_is_away(tmp_path):
    lm, conductor, referee, host = (
        Victim(_child(role), tmp_path, started_at=100.0) for role in ("lm", "conductor", "referee", "players")
    )
    everyone = [lm, conductor, referee, host]
    try:
        lm.ready_at, conductor.ready_at, referee.ready_at = 101.0, 101.0, 101.0
        # A league's host starting for the first time is not killed before it has settled.
        assert killable(everyone, 110.0, settle=3.0) == [lm, conductor, referee]
        host.ready_at = 101.0
        assert killable(everyone, 110.0, settle=3.0) == everyone
        referee.restart_at, referee.restarted = 111.0, True  # a referee away holds nothing up
        assert killable(everyone, 110.5, settle=3.0) == [lm, conductor, host]
        lm.restart_at, lm.restarted = 111.0, True  # the LM killed, its restart planned
        assert killable(everyone, 110.5, settle=3.0) == [host]
        lm.restart_at, lm.started_at, lm.ready_at = None, 111.0, None  # started again
        assert killable(everyone, 115.0, settle=3.0) == [host]  # not serving yet
        lm.ready_at = 119.0  # served after 8 s: left alone 8 s more
        assert killable(everyone, 126.9, settle=3.0) == [host]
        assert killable(everyone, 127.0, settle=3.0) == [lm, conductor, host]
        host.child.proc.kill()
        host.child.proc.wait()  # a host that ended with its league is killed no more
        assert killable(everyone, 127.0, settle=3.0) == [lm, conductor]
    finally:
        for victim in everyone:
            victim.child.proc.kill()
            victim.child.proc.wait()


def test_every_kind_is_killed_once_a_turn_in_a_shuffled_order():
    turn = Turn(random.Random(1), now=0.0)
    for start in (0, 4, 8):
        killed = [turn.next(list(ROLES), now=float(start + i)) for i in range(4)]
        assert sorted(killed) == sorted(ROLES)


def test_a_turn_waits_for_a_kind_not_killable_yet_then_goes_on_without_it():
    """A short league's referees serve a few seconds only: the turn waits for them (up to its
    patience) instead of killing the LM and the conductor again in their place."""
    turn = Turn(random.Random(2), now=0.0, patience=30.0)
    others = [role for role in ROLES if role != "referee"]
    killed = []
    while (role := turn.next(others, now=1.0)) is not None:
        killed.append(role)
    assert sorted(killed) == sorted(others)  # the turn's other kinds, once each
    assert turn.next(others, now=29.0) is None  # waiting for a referee
    assert turn.next(list(ROLES), now=29.5) == "referee"  # one is killable: its turn
    # A kind that never becomes killable holds the next turn up only for the patience.
    turn = Turn(random.Random(3), now=0.0, patience=30.0)
    while turn.next(others, now=1.0) is not None:
        pass
    assert turn.next(others, now=31.0) in others
