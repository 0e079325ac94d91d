"""A league across separate hosts (network namespaces, tests/support/netns.py): the LM and the
conductor on one host, two referees on a second, players on three more, every call crossing the
bridge by address. Clean links first, then 2 % packet loss on the players' links (nftables), then
delay with jitter as well (``tc netem``, where the kernel has it): the league completes with every
result once, and technical losses fall only on the one player that never answers in time."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from league import actions
from league.bench.outage import TcpCut
from league.models import League, Match, MatchResult, Player
from tests.integration.worlds import penalised
from tests.support import netns
from tests.support.servers import free_port, wait_for_port
from tests.support.waiting import wait_until

WHY_NOT = netns.unsupported()
pytestmark = [pytest.mark.processes, pytest.mark.skipif(WHY_NOT is not None, reason=str(WHY_NOT))]

LM_PORT, REFEREE_PORT, PLAYER_PORT = 8000, 8001, 8101  # each host has its own ports
# (host, display name, strategy, count): six players who answer in time, one who never does.
PLAYERS = [
    ("players1", "Left", "random", 2),
    ("players2", "Middle", "always_even,always_odd", 2),
    ("players3", "Right", "random", 2),
    ("players3", "Silent", "silent", 1),  # never answers a decision (its call hangs past every deadline)
]
TOTAL = sum(count for *_, count in PLAYERS)
# Generous next to what 2 % loss costs: a lost segment is sent again after ~0.2 s, a lost SYN
# after 1 s, so a call needs several losses in a row to take two seconds.
SETTINGS = {
    "join_timeout": 2.0,
    "move_timeout": 2.0,
    "game_over_timeout": 2.0,
    "report_timeout": 5.0,
    "default_timeout": 3.0,
    "retries": 1,
    "retry_delay": 0.2,
    "match_deadline": 60.0,
}


@dataclass
class HostedLeague:
    """One league whose agents run on the hosts of ``network``."""

    network: netns.Network
    env: dict[str, str]
    manage: list[str]
    logs: Path
    league: League = field(init=False)
    hosts: dict[str, netns.Host] = field(default_factory=dict)
    proxy: TcpCut | None = None  # to PostgreSQL, for processes in the namespaces

    def build(self) -> None:
        for name in ("lm", "referees", "players1", "players2", "players3"):
            self.hosts[name] = self.network.add_host(name)
        lm = self.hosts["lm"]
        # The LM checks the Host header: it is reached by its address on the bridge.
        self.env = {**self.env, "ALLOWED_HOSTS": f"{lm.address},localhost,127.0.0.1"}
        # A host's 127.0.0.1 is its own: PostgreSQL (on the machine's loopback) is reached through
        # a proxy on the bridge, and one LM process needs no Redis (the in-memory layer).
        self.env.pop("REDIS_URL", None)
        database = urlsplit(self.env["DATABASE_URL"])
        if database.scheme.startswith("postgres"):
            self.proxy = TcpCut(
                database.hostname or "127.0.0.1", database.port or 5432, free_port(), self.network.address
            )
            netloc = f"{database.username or 'postgres'}@{self.network.address}:{self.proxy.port}"
            self.env["DATABASE_URL"] = urlunsplit(database._replace(netloc=netloc))

    def close(self) -> None:
        if self.proxy is not None:
            self.proxy.close()

    def start(self, league_id: str) -> None:
        self.league = actions.open_registration(
            actions.create_league(name=league_id.title(), league_id=league_id, **SETTINGS), 120
        )
        lm, referees = self.hosts["lm"], self.hosts["referees"]
        lm_url = f"http://{lm.address}:{LM_PORT}/mcp"
        site = [sys.executable, "-m", "uvicorn", "leaguesite.asgi:application", "--log-level", "warning"]
        self.spawn(lm, "lm", [*site, "--host", lm.address, "--port", str(LM_PORT)])
        wait_for_port(LM_PORT, host=lm.address)
        common = ["--league-url", lm_url, "--league-id", league_id, "--log-level", "WARNING"]
        for i in range(2):
            port = str(REFEREE_PORT + i)
            where = ["--host", "0.0.0.0", "--advertise-host", referees.address, "--port", port]
            self.spawn(referees, f"referee{i}", [*self.manage, "runreferee", *where, *common])
        ports: dict[str, int] = {}
        for host_name, name, strategy, count in PLAYERS:
            host = self.hosts[host_name]
            port = ports.setdefault(host_name, PLAYER_PORT)
            ports[host_name] += count
            where = ["--host", "0.0.0.0", "--advertise-host", host.address, "--port", str(port)]
            args = [*self.manage, "runplayer", *where, "--count", str(count), "--name", name, "--strategy", strategy]
            self.spawn(host, name.lower(), [*args, *common])
        # Registered: a loaded machine starts agents slowly.
        wait_until(
            lambda: self.league.players.count() >= TOTAL and self.league.referees.count() >= 2,
            120,
            f"agents registered (logs in {self.logs})",
            0.1,
        )
        actions.start_league(self.league)
        self.spawn(lm, "conductor", [*self.manage, "runleague", "--league", league_id, "--poll", "0.05"])

    def spawn(self, host: netns.Host, name: str, args: list[str]) -> None:
        log = open(self.logs / f"{self.league.league_id}-{name}.log", "w")  # noqa: SIM115 (the test's tmp_path)
        host.popen(args, env=self.env, log=log)

    def wait_completed(self, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.league.refresh_from_db()
            if self.league.status == League.Status.COMPLETED:
                return
            time.sleep(0.2)
        results = MatchResult.objects.filter(league=self.league).count()
        raise AssertionError(f"league is {self.league.status} with {results} results (logs in {self.logs})")

    def assert_complete_and_only_the_silent_player_penalised(self) -> None:
        total = TOTAL * (TOTAL - 1) // 2
        assert Match.objects.filter(league=self.league).count() == total
        assert not Match.objects.filter(league=self.league).exclude(status=Match.Status.FINISHED).exists()
        results = list(
            MatchResult.objects.filter(league=self.league).select_related("match__player_a", "match__player_b")
        )
        assert len(results) == total
        assert len({r.match_id for r in results}) == total  # none twice
        (silent,) = Player.objects.filter(league=self.league, display_name="Silent").values_list("player_id", flat=True)
        for result in results:
            pair = {result.match.player_a.player_id, result.match.player_b.player_id}
            # The silent player never answers a decision and loses on time; nobody else ever does.
            assert penalised(result) == pair & {silent}, (result.match.match_id, result.details.get("reason"))
            if silent in pair:
                assert "E001" in result.details["reason"], result.details["reason"]


@pytest.fixture
def hosted(agent_env, manage_py, tmp_path) -> Iterator[HostedLeague]:
    with netns.Network() as network:
        world = HostedLeague(network, agent_env, manage_py, tmp_path)
        world.build()
        try:
            yield world
        finally:
            world.close()


def test_a_league_across_five_hosts_completes(hosted):
    hosted.start("hosts_clean")
    hosted.wait_completed()
    hosted.assert_complete_and_only_the_silent_player_penalised()


def test_a_league_over_lossy_player_links_completes_and_only_the_silent_player_loses_on_time(hosted):
    why = netns.loss_unsupported()
    if why is not None:
        pytest.skip(why)
    players = [hosted.hosts[name] for name in ("players1", "players2", "players3")]
    for host in players:
        host.lose(2.0)
    hosted.start("hosts_lossy")
    hosted.wait_completed()
    hosted.assert_complete_and_only_the_silent_player_penalised()
    assert sum(host.dropped() for host in players) > 0  # the loss was real: packets were dropped


def test_a_league_over_delayed_and_lossy_player_links_completes(hosted):
    why = netns.netem_unsupported()
    if why is not None:
        pytest.skip(f"no delay: {why} (loss alone is covered by the test above, with nftables)")
    for name in ("players1", "players2", "players3"):
        hosted.hosts[name].impair(delay_ms=100, jitter_ms=50, loss_percent=2.0)
    hosted.start("hosts_delayed")
    hosted.wait_completed()
    hosted.assert_complete_and_only_the_silent_player_penalised()
