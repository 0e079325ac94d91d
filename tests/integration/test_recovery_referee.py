"""A referee killed with SIGKILL mid-round and started again (same port, same --state-dir): its
matches are given back and played again at once, long before the match deadline, and the
referee, answering again, is not suspended. Real processes: the LM site, the conductor, two
referees and a player host."""

from __future__ import annotations

import sys
import time

import pytest

from league.models import AgentStatus, Event, Match, Referee
from tests.integration.test_recovery import FAST
from tests.integration.worlds import Host, MixedWorld
from tests.support.servers import Process, free_ports, wait_for_port
from tests.support.waiting import wait_until

pytestmark = pytest.mark.processes

# "slow" answers each move at 60% of its time (1.2 s here): a match is still in play when the
# referee is killed, so there is a lost match to give back (a finished one is written ahead and
# delivered by the restarted referee instead). The time from seeing the match running to the kill
# is a loaded machine's scheduling: the move must outlast it.
PLAYERS = Host("Bot", "slow", 8)
# The deadline is far beyond the test's time: a league that completes did not wait for it. The pause
# between rounds leaves rounds to play after the restart.
SETTINGS = {**FAST, "move_timeout": 2.0, "match_deadline": 300.0, "round_pause": 1.5}
# How long the league may take to complete after the restart: far less than the match deadline.
COMPLETED_WITHIN = 90


class RestartWorld(MixedWorld):
    """MixedWorld whose referees keep their identity in a --state-dir, so that one restarted
    comes back as the same referee (the way to run a referee that may be restarted)."""

    def start(self) -> None:
        site = [sys.executable, "-m", "uvicorn", "leaguesite.asgi:application", "--port", str(self.lm_port)]
        self.spawn("lm", [*site, "--log-level", "warning"])
        wait_for_port(self.lm_port)
        self.ref_port = free_ports(2)
        self.referees = [self.start_referee(i) for i in (0, 1)]
        self.host_ports[PLAYERS.name] = free_ports(PLAYERS.count)
        self.start_host(PLAYERS)
        self.wait_registered()

    def start_referee(self, i: int, run: int = 1) -> Process:
        args = [*self.manage, "runreferee", "--port", str(self.ref_port + i), "--state-dir", str(self.tmp / f"ref{i}")]
        return self.spawn(f"ref{i}-{run}", [*args, *self.common()])

    def wait_registered(self) -> None:
        from league import actions

        # Registered: a loaded machine starts agents slowly.
        wait_until(
            lambda: self.league.players.count() >= self.players and self.league.referees.count() >= 2,
            120,
            "agents registered",
            0.1,
        )
        actions.start_league(self.league)

    def referee(self, i: int) -> Referee:
        return Referee.objects.get(league=self.league, endpoint__contains=f":{self.ref_port + i}/")

    def running_on(self, referee: Referee) -> set[tuple[int, int]]:
        return set(Match.objects.filter(referee=referee, status=Match.Status.RUNNING).values_list("pk", "attempt"))

    def wait_running_on(self, referee: Referee) -> None:
        # A loaded machine plays its first round slowly.
        wait_until(lambda: self.running_on(referee), 60, "a match running on the referee", 0.005)

    def wait_reregistered(self, referee: Referee, after: int) -> None:
        """The restarted referee has registered again with its stored token (same id)."""
        wait_until(
            lambda: Event.objects.filter(
                league=self.league, kind="referee_endpoint_updated", agent=referee.referee_id, pk__gt=after
            ).exists(),
            30,
            "the restarted referee registered again",
            0.05,
        )


@pytest.fixture
def world(agent_env, manage_py, tmp_path):
    w = RestartWorld(agent_env, manage_py, tmp_path, "refrestart", [PLAYERS], **SETTINGS)
    try:
        w.start()
        yield w
    finally:
        w.stop()


def last_event_pk() -> int:
    return Event.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


def test_a_restarted_referee_gets_its_lost_matches_back_at_once(world):
    """SIGKILL mid-round, started again 3 s later: the league completes without waiting for the
    match deadline, every match once, and the referee is not SUSPENDED (suspended while it was
    down, it is probed and let back in once it answers)."""
    world.conductor()
    victim = world.referee(0)
    world.wait_running_on(victim)
    world.referees[0].kill()
    killed_at = last_event_pk()
    lost = world.running_on(victim)
    time.sleep(3.0)  # the operator's restart, as in the field
    world.referees[0] = world.start_referee(0, run=2)
    world.wait_reregistered(victim, killed_at)
    world.wait_completed(timeout=COMPLETED_WITHIN)
    world.assert_each_match_recorded_once()
    world.assert_told_equals_recorded()

    released = Event.objects.filter(league=world.league, kind="match_released", pk__gt=killed_at)
    for pk, attempt in lost:
        match = Match.objects.get(pk=pk)
        if match.attempt == attempt:
            # Its outcome was saved before the kill (written ahead of GAME_OVER): the restarted
            # referee, with the same --state-dir, delivered it; nothing was given back.
            assert match.result.referee_id == victim.pk, match.match_id
        else:
            assert released.filter(match_id=match.match_id).exists(), match.match_id
    assert not any("match deadline" in e.payload["reason"] for e in released)
    victim.refresh_from_db()
    assert victim.status != AgentStatus.SUSPENDED, victim.unreachable_reason


def test_a_referee_that_lost_its_matches_gives_them_back_without_a_failure(world):
    """The conductor is stopped while the referee is killed and started again, and a conductor
    started then finds a referee that answers pings but does not know its matches (E006): each is
    given back at once, and no failure is counted against the referee. (Killed, not frozen: a
    conductor frozen inside a transaction would hold the database's lock, and the referee could
    not register again.)"""
    conductor = world.conductor()
    victim = world.referee(0)
    world.wait_running_on(victim)
    conductor.kill()
    world.referees[0].kill()
    mark = last_event_pk()
    world.referees[0] = world.start_referee(0, run=2)
    world.wait_reregistered(victim, mark)
    # The matches lost are read only now: the LM runs on, so a result the referee sent before it
    # was killed is recorded meanwhile and that match is finished, not lost. Nothing else moves a
    # match off the victim while no conductor runs.
    lost = world.running_on(victim)
    world.conductor()
    world.wait_completed(timeout=COMPLETED_WITHIN)
    world.assert_each_match_recorded_once()
    world.assert_told_equals_recorded()

    given_back = 0
    for pk, attempt in lost:
        match = Match.objects.get(pk=pk)
        if match.attempt == attempt:
            # Finished and its report kept on disk just before the kill: the restarted referee
            # (same --state-dir) delivers it, so there is nothing to give back.
            assert match.result.referee_id == victim.pk, match.match_id
            continue
        given_back += 1
        assert match.attempt > attempt, match.match_id  # played again
        reasons = [
            e.payload["reason"]
            for e in Event.objects.filter(league=world.league, kind="match_released", match_id=match.match_id)
        ]
        assert any("does not know match" in r for r in reasons), (match.match_id, reasons)
    # A match the referee had not finished when killed: the E006 path this test is about.
    assert given_back or not lost, "no lost match was given back"
    victim.refresh_from_db()
    assert victim.status != AgentStatus.SUSPENDED
    assert not Event.objects.filter(
        league=world.league, agent=victim.referee_id, kind__in=("referee_failed", "referee_suspended"), pk__gt=mark
    ).exists()
