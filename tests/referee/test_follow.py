"""Referees follow the League Manager: one ``runreferee`` process, started before any league
exists and pinned to none, registers with each league as it opens (one line each) and referees
both of two leagues created one after the other, through the real LM, to completion."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from league import actions
from league.bench.league_run import QUICK_TIMEOUTS
from league.conductor.worker import Conductor
from league.models import League, MatchResult
from league.models import Referee as RefereeRow
from players.agent import Player, PlayerConfig, PlayerHost
from tests.league.lm_support import make_league
from tests.support.servers import Process, free_port, wait_for_port
from tests.support.waiting import wait_until

FAST = {**QUICK_TIMEOUTS, "retry_delay": 0.05}


def play(league: League, lm_server: str) -> None:
    """Two players join ``league``; once the referee has too, the conductor plays it to the end."""
    players = [
        Player(PlayerConfig(name=f"{league.league_id}-{n}", league_url=lm_server, league_id=league.league_id))
        for n in (1, 2)
    ]
    server = PlayerHost(players, stay=False).start_in_thread()
    try:
        wait_until(lambda: all(p.player_id for p in players), timeout=20)
        wait_until(lambda: RefereeRow.objects.filter(league=league).exists(), timeout=30)
        actions.close_registration(league)
        asyncio.run(asyncio.wait_for(Conductor(league_id=league.league_id, poll=0.02).run(until_done=True), 60))
    finally:
        server.stop()


def test_the_lm_lists_the_leagues_open_or_in_play(lm_server):
    make_league("listed_one")
    done = make_league("listed_done")
    done.status = League.Status.COMPLETED
    done.save(update_fields=["status"])
    body = {"jsonrpc": "2.0", "id": 1, "method": "list_leagues", "params": {}}
    reply = httpx.post(lm_server, json=body, timeout=10).json()["result"]
    assert reply["message_type"] == "LEAGUE_LIST"
    (entry,) = reply["leagues"]
    assert entry["league_id"] == "listed_one" and entry["status"] == "REGISTERING"
    assert entry["game_type"] == "even_odd" and entry["registration_closes_at"].endswith("Z")


@pytest.mark.processes
def test_one_runreferee_serves_two_leagues_created_one_after_the_other(lm_server, agent_env, manage_py, tmp_path):
    port = free_port()
    log_path = tmp_path / "referee.log"
    args = [*manage_py, "runreferee", "--port", str(port), "--league-url", lm_server, "--name", "Follower"]
    referee = Process([*args, "--grace", "2"], agent_env, str(log_path))
    try:
        wait_for_port(port)
        first = make_league("follow_first", **FAST)
        play(first, lm_server)
        second = make_league("follow_second", **FAST)
        play(second, lm_server)
        for league in (first, second):
            league.refresh_from_db()
            assert league.status == League.Status.COMPLETED
            row = RefereeRow.objects.get(league=league)
            assert row.endpoint == f"http://127.0.0.1:{port}/mcp"
            assert MatchResult.objects.filter(league=league, referee=row).count() == 1
        assert referee.terminate() == 0
    finally:
        referee.kill()
    output = log_path.read_text()
    assert "Traceback" not in output
    for league_id in ("follow_first", "follow_second"):
        line = f"referee Follower registered as REF01 in league {league_id} ({lm_server}); waiting for matches"
        assert output.count(line) == 1, output


@pytest.mark.processes
def test_a_referee_with_one_leagues_key_stays_when_another_league_refuses_it(
    lm_server, agent_env, manage_py, tmp_path, settings
):
    """The README's command with a league's own key and no --league-id: another league opening
    refuses that key, which is logged; the referee keeps serving (and playing) its own league."""
    settings.REFEREE_KEY = ""
    env = {**agent_env, "REFEREE_KEY": ""}
    first = make_league("own_key_first", **FAST)
    key = actions.generate_referee_key(first)
    port = free_port()
    log_path = tmp_path / "referee.log"
    args = [*manage_py, "runreferee", "--port", str(port), "--league-url", lm_server, "--name", "Keyed", "--key", key]
    referee = Process([*args, "--grace", "2"], env, str(log_path))
    try:
        wait_for_port(port)
        wait_until(lambda: RefereeRow.objects.filter(league=first).exists(), timeout=30)
        make_league("own_key_second", **FAST)
        wait_until(lambda: "league own_key_second (REGISTERING) refused our referee key" in log_path.read_text(), 30)
        play(first, lm_server)  # the referee is still there and referees its league to the end
        first.refresh_from_db()
        assert first.status == League.Status.COMPLETED
        assert MatchResult.objects.filter(league=first).count() == 1
        assert referee.proc.poll() is None, log_path.read_text()
        assert referee.terminate() == 0
    finally:
        referee.kill()
    output = log_path.read_text()
    assert "registration refused" not in output and "Traceback" not in output
