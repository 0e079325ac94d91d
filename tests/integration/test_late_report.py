"""A referee cut off from the LM past a match's deadline (a TCP proxy between them, as
league/bench/outage.py cuts the database): the match is given back at its deadline, and the
report that comes once the link is back is recorded as the match's result (the first valid one,
the one its players were told), never refused and lost. Finding 1 and 2 of issue 33."""

from __future__ import annotations

import pytest

from league.bench.outage import TcpCut
from league.models import Event, Match
from tests.integration.test_recovery import FAST
from tests.integration.worlds import Host, MixedWorld
from tests.support.servers import free_ports
from tests.support.waiting import wait_until

pytestmark = pytest.mark.processes


class CutRefereeWorld(MixedWorld):
    """One referee, which reaches the LM only through a proxy the test can cut."""

    def start(self) -> None:
        self.proxy_port = free_ports(1)
        self.proxy = TcpCut("127.0.0.1", self.lm_port, self.proxy_port)
        super().start()

    def referee_args(self, n: int) -> list[str]:
        via = f"http://127.0.0.1:{self.proxy_port}/mcp"
        return [via if arg == self.lm_url else arg for arg in super().referee_args(n)]

    def stop(self) -> None:
        super().stop()
        self.proxy.close()


@pytest.fixture
def world(agent_env, manage_py, tmp_path):
    settings = {**FAST, "match_deadline": 5.0}
    w = CutRefereeWorld(agent_env, manage_py, tmp_path, "latereport", [Host("Bot", "slow", 4)], referees=1, **settings)
    try:
        w.start()
        yield w
    finally:
        w.stop()


def test_a_report_that_comes_after_the_match_was_given_back_is_recorded(world):
    world.conductor()
    running = Match.objects.filter(league=world.league, status=Match.Status.RUNNING)
    wait_until(running.exists, 40, "the league got going", interval=0.01)
    world.proxy.cut()
    released = Event.objects.filter(league=world.league, kind="match_released")
    # The match deadline passes while the referee cannot report.
    wait_until(released.exists, 60, "a match given back at its deadline", interval=0.05)
    world.proxy.restore()
    world.wait_completed(timeout=45)
    world.assert_each_match_recorded_once()
    world.assert_told_equals_recorded()
