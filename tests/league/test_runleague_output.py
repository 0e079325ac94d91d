"""What ``manage.py runleague`` prints: one line when it starts, one per league state change,
and one (not one per tick) when a league in play has no live referee, then one when it has."""

from __future__ import annotations

import time

import pytest

from league.models import League, Round
from tests.league.conductor_support import ScriptedPlayers, ScriptedReferee
from tests.league.lm_support import make_league
from tests.league.test_conductor import FAST, close_window
from tests.support.servers import Process
from tests.support.waiting import wait_until

pytestmark = pytest.mark.processes


def wait_for(predicate, what: str, timeout: float = 30.0) -> None:
    wait_until(predicate, timeout, what)


def test_runleague_prints_its_start_each_state_change_and_a_missing_referee(lm_server, agent_env, manage_py, tmp_path):
    league = make_league("conductor_lines", **FAST)
    players = ScriptedPlayers(4).start()
    referee = ScriptedReferee(lm_server)
    started = False
    try:
        players.register(lm_server, league.league_id)
        close_window(league)
        log_path = tmp_path / "runleague.log"
        args = [*manage_py, "runleague", "--league", league.league_id, "--until-done", "--poll", "0.02"]
        conductor = Process(args, agent_env, str(log_path))
        # Running, its first round announced, and no referee to play it: it says so, once.
        wait_for(
            lambda: Round.objects.filter(league=league, status=Round.Status.ANNOUNCED).exists(), "round 1 announced"
        )
        wait_for(lambda: "no live referee" in log_path.read_text(), "the missing referee is logged")
        time.sleep(1.0)  # ~50 ticks that find no referee either
        referee.start()
        started = True
        referee.register(league.league_id, capacity=2)
        assert conductor.proc.wait(60) == 0
    finally:
        if started:
            referee.stop()
        players.stop()
        conductor.terminate()

    league.refresh_from_db()
    assert league.status == League.Status.COMPLETED
    lines = log_path.read_text().splitlines()
    conductor_lines = [line for line in lines if "league.conductor" in line]
    assert sum("conductor started" in line for line in conductor_lines) == 1
    marker = f"league {league.league_id}: "
    changes = [line.split(marker, 1)[1] for line in conductor_lines if marker in line]
    states = [c for c in changes if c.split(" -> ")[-1] in League.Status.values]
    assert states == ["REGISTERING", "REGISTERING -> READY", "READY -> RUNNING", "RUNNING -> COMPLETED"], lines
    assert sum("has no live referee" in line for line in lines) == 1, lines
    assert sum("has a live referee again" in line for line in lines) == 1, lines
