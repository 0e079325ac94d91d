"""A referee killed with SIGKILL mid-round and started again (same port, same --state-dir): its
matches are given back and played again at once, long before the match deadline, and the
referee, answering again, is not suspended. Real processes: the LM site, the conductor and two
referees; the players are served from the test's own process, so that it can hold their moves."""

from __future__ import annotations

import random
import sys
import threading
import time
from dataclasses import replace

import pytest

from league.models import AgentStatus, Event, Match, Referee
from players.agent import Player, PlayerConfig, PlayerHost
from players.strategies.base import MoveSituation, ParitySituation
from tests.integration.test_recovery import FAST
from tests.integration.worlds import Host, MixedWorld
from tests.support.servers import Process, free_ports, wait_for_port
from tests.support.waiting import wait_until

pytestmark = pytest.mark.processes

# Eight players in the test's process (named like a runplayer host's, "Bot-1" …).
PLAYERS = Host("Bot", count=8)
# A move may take 15 s: the players hold theirs until the test has killed the referee (``Held``),
# and a player thinks 10 s at most (PlayerConfig.decision_cap). The deadline is far beyond the
# test's time: a league that completes did not wait for it. The pause between rounds leaves
# rounds to play after the restart.
SETTINGS = {**FAST, "move_timeout": 15.0, "match_deadline": 300.0, "round_pause": 1.5}
# How long the league may take to complete after the restart: far less than the match deadline.
COMPLETED_WITHIN = 90


class Held:
    """A strategy that answers at random once the test releases it: until then every match that
    has begun stays in play, however slow the machine, so the referee killed has matches to lose.
    A hold the test never ends lasts the player's own decision budget."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.rng = random.Random()

    def choose_parity(self, situation: ParitySituation) -> str:
        self.released.wait(situation.budget)
        return self.rng.choice(("even", "odd"))

    def choose_move(self, situation: MoveSituation) -> int:
        self.released.wait(situation.budget)
        return self.rng.randint(1, 5)


class RestartWorld(MixedWorld):
    """MixedWorld whose referees keep their identity in a --state-dir, so that one restarted
    comes back as the same referee (the way to run a referee that may be restarted), and whose
    players hold their moves until ``release``."""

    def start(self) -> None:
        site = [sys.executable, "-m", "uvicorn", "leaguesite.asgi:application", "--port", str(self.lm_port)]
        self.spawn("lm", [*site, "--log-level", "warning"])
        wait_for_port(self.lm_port)
        self.ref_port = free_ports(2)
        self.referees = [self.start_referee(i) for i in (0, 1)]
        self.start_players()
        self.wait_registered()

    def start_players(self) -> None:
        """The players, on a thread of this process; each GAME_OVER goes to host-Bot.log as
        runplayer prints it (told equals recorded reads it)."""
        self.held = Held()
        told = (self.tmp / "host-Bot.log").open("a", buffering=1)
        self.told_log = told
        config = PlayerConfig(name=PLAYERS.name, league_url=self.lm_url, league_id=self.league.league_id)
        players = [
            Player(
                replace(config, name=f"{PLAYERS.name}-{i}"),
                strategy=self.held,
                echo=lambda line: print(line, file=told),
            )
            for i in range(1, PLAYERS.count + 1)
        ]
        self.player_server = PlayerHost(players, stay=True).start_in_thread()

    def release(self) -> None:
        """The players answer every move at once from now on."""
        self.held.released.set()

    def stop(self) -> None:
        self.release()
        super().stop()
        self.player_server.stop()
        self.told_log.close()

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
        try:
            wait_until(lambda: self.running_on(referee), 60, "a match running on the referee", 0.005)
        except AssertionError as exc:
            # What the referee went through, for a run that gave it no match.
            rows = Event.objects.filter(league=self.league, agent=referee.referee_id).order_by("pk")
            seen = [(f"{e.at:%H:%M:%S.%f}", e.direction, e.kind, e.match_id, e.payload.get("reason")) for e in rows]
            statuses = list(Match.objects.filter(league=self.league).values_list("match_id", "status", "referee"))
            raise AssertionError(f"{exc}; its events: {seen}; the matches: {statuses}") from None

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
    lost = world.running_on(victim)  # none of them finished: their players were holding their moves
    world.release()
    time.sleep(3.0)  # the operator's restart, as in the field
    world.referees[0] = world.start_referee(0, run=2)
    world.wait_reregistered(victim, killed_at)
    world.wait_completed(timeout=COMPLETED_WITHIN)
    world.assert_each_match_recorded_once()
    world.assert_told_equals_recorded()

    released = Event.objects.filter(league=world.league, kind="match_released", pk__gt=killed_at)
    assert lost
    for pk, attempt in lost:
        match = Match.objects.get(pk=pk)
        assert match.attempt > attempt, match.match_id  # given back and played again
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
    lost = world.running_on(victim)  # none of them finished: their players were holding their moves
    world.release()  # the other referee's matches go on meanwhile
    world.referees[0] = world.start_referee(0, run=2)
    world.wait_reregistered(victim, mark)
    # Nothing moves a match off the victim while no conductor runs.
    assert world.running_on(victim) == lost
    world.conductor()
    world.wait_completed(timeout=COMPLETED_WITHIN)
    world.assert_each_match_recorded_once()
    world.assert_told_equals_recorded()

    assert lost
    for pk, attempt in lost:
        match = Match.objects.get(pk=pk)
        assert match.attempt > attempt, match.match_id  # given back and played again
        reasons = [
            e.payload["reason"]
            for e in Event.objects.filter(league=world.league, kind="match_released", match_id=match.match_id)
        ]
        assert any("does not know match" in r for r in reasons), (match.match_id, reasons)
    victim.refresh_from_db()
    assert victim.status != AgentStatus.SUSPENDED
    assert not Event.objects.filter(
        league=world.league, agent=victim.referee_id, kind__in=("referee_failed", "referee_suspended"), pk__gt=mark
    ).exists()
