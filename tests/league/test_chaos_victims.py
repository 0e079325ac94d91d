"""league/bench/chaos.py: when a process the chaos bench restarted may be killed again."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from league.bench.chaos import Victim
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


def test_a_process_that_started_slowly_is_left_alone_as_long_as_it_took_to_start(victim):
    victim.ready_at = 110.0  # a loaded machine: 10 s to serve
    assert not victim.settled(113.0, settle=3.0)
    assert not victim.settled(119.9, settle=3.0)
    assert victim.settled(120.0, settle=3.0)


def test_a_process_not_serving_yet_or_down_is_never_settled(victim):
    assert not victim.settled(1_000.0, settle=3.0)  # never seen serving
    victim.ready_at = 101.0
    victim.restart_at = 2_000.0  # killed on purpose, its restart planned
    assert not victim.settled(1_000.0, settle=3.0)
