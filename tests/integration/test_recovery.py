"""Recovery with real processes: kill -9 the conductor or a referee mid-league; nothing is lost
or counted twice."""

from __future__ import annotations

import random
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from league import actions
from league.bench.league_run import QUICK_TIMEOUTS as FAST
from league.models import Event, League, Match, MatchResult, Referee
from leagueproto.envelope import parse_timestamp
from tests.integration.told import assert_told_equals_recorded
from tests.support.servers import Process, free_ports, wait_for_port
from tests.support.waiting import wait_until

pytestmark = pytest.mark.processes

PLAYERS = 12


class World:
    """The LM site, two referees and twelve players as processes, around one league."""

    def __init__(self, env: dict[str, str], manage: list[str], tmp_path) -> None:
        self.env, self.manage, self.tmp = env, manage, tmp_path
        self.procs: list[Process] = []
        self.lm_port = free_ports(1)
        self.lm_url = f"http://127.0.0.1:{self.lm_port}/mcp"
        self.league = actions.open_registration(
            actions.create_league(name="Recovery", league_id="recovery", **FAST), 120
        )

    def spawn(self, name: str, args: list[str]) -> Process:
        proc = Process(args, self.env, str(self.tmp / f"{name}.log"))
        self.procs.append(proc)
        return proc

    def start(self) -> None:
        site = [sys.executable, "-m", "uvicorn", "leaguesite.asgi:application", "--port", str(self.lm_port)]
        self.spawn("lm", [*site, "--log-level", "warning"])
        wait_for_port(self.lm_port)
        common = ["--league-url", self.lm_url, "--league-id", self.league.league_id]
        ref_port = self.ref_port = free_ports(2)
        self.referees = [
            self.spawn(f"ref{i}", [*self.manage, "runreferee", "--port", str(ref_port + i), *common]) for i in (0, 1)
        ]
        player_port = free_ports(PLAYERS)
        self.spawn("players", [*self.manage, "runplayer", "--port", str(player_port), "--count", str(PLAYERS), *common])

        def registered() -> bool:
            return self.league.players.count() >= PLAYERS and self.league.referees.count() >= 2

        wait_until(registered, 120, "agents registered", interval=0.1)  # a loaded machine starts agents slowly
        actions.start_league(self.league)

    def conductor(self) -> Process:
        return self.spawn("conductor", [*self.manage, "runleague", "--league", self.league.league_id, "--poll", "0.05"])

    def player_logs(self) -> list[Path]:
        """The logs of the player processes: each match's GAME_OVER as the players were told it."""
        return sorted([*self.tmp.glob("players*.log"), *self.tmp.glob("host-*.log")])

    def assert_told_equals_recorded(self) -> None:
        """What each player was told (GAME_OVER) is what the LM recorded, for every match played."""
        # Not every result was told (a GAME_OVER may not get through, a match may be decided by
        # the LM for an unreachable player); every one told is checked.
        assert assert_told_equals_recorded(self.league, self.player_logs()) > 0, "no player printed an outcome"

    def results(self) -> int:
        return MatchResult.objects.filter(league=self.league).count()

    def wait_completed(self, timeout: float = 90) -> None:
        def completed() -> bool:
            self.league.refresh_from_db()
            return self.league.status == League.Status.COMPLETED

        try:
            wait_until(completed, timeout, "league completed", interval=0.1)
        except AssertionError as exc:
            raise AssertionError(f"league is {self.league.status} with {self.results()} results") from exc

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.terminate(5)

    def assert_each_match_recorded_once(self) -> None:
        total = PLAYERS * (PLAYERS - 1) // 2
        assert Match.objects.filter(league=self.league).count() == total
        assert self.results() == total
        assert not Match.objects.filter(league=self.league).exclude(status=Match.Status.FINISHED).exists()
        assert MatchResult.objects.filter(league=self.league).values("match").distinct().count() == total


@pytest.fixture
def world(agent_env, manage_py, tmp_path):
    w = World(agent_env, manage_py, tmp_path)
    try:
        w.start()
        yield w
    finally:
        w.stop()


def test_it_completes_when_the_conductor_is_killed_and_restarted(world):
    rng = random.Random(5)
    for _ in range(3):
        conductor = world.conductor()
        time.sleep(rng.uniform(0.3, 1.5))
        conductor.kill()  # SIGKILL: no clean-up at all
    world.conductor()
    world.wait_completed()
    world.assert_each_match_recorded_once()
    world.assert_told_equals_recorded()


def test_it_completes_when_a_referee_is_killed(world):
    world.conductor()
    wait_until(lambda: world.results() >= 5, 30, "5 results")
    world.referees[0].kill()
    world.killed_at = timezone.now()
    world.wait_completed()
    world.assert_each_match_recorded_once()
    world.assert_told_equals_recorded()
    dead = Referee.objects.get(league=world.league, endpoint__contains=f":{world.ref_port}/")
    assert Event.objects.filter(league=world.league, agent=dead.referee_id, kind__startswith="referee_").exists()
    # A report already on the wire at the kill may be recorded a moment later; what must never
    # happen is a result for a match the dead referee was still playing (or never played).
    killed_by_second = world.killed_at.replace(microsecond=0) + timedelta(seconds=1)
    for result in MatchResult.objects.filter(league=world.league, referee=dead):
        last_exchange = max(parse_timestamp(entry["at"]) for entry in result.log)
        assert last_exchange <= killed_by_second, result.match.match_id
