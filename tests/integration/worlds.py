"""A league of real processes on loopback with any mix of player hosts (runplayer --strategy …),
built on the recovery test's World: the LM site, two referees, the players, the conductor."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from league import actions
from league.models import League, Match, MatchResult, Player
from tests.integration.test_recovery import World
from tests.support.servers import Process, free_ports, wait_for_port
from tests.support.waiting import wait_until


@dataclass(frozen=True)
class Host:
    """One ``runplayer`` process: ``count`` players named ``name``(-1, -2 …) playing ``strategy``."""

    name: str
    strategy: str = "random"
    count: int = 1


class MixedWorld(World):
    def __init__(
        self,
        env: dict[str, str],
        manage: list[str],
        tmp_path,
        league_id: str,
        hosts: list[Host],
        *,
        referees: int = 2,
        **settings: Any,
    ) -> None:
        self.referee_count = referees
        self.env, self.manage, self.tmp = env, manage, tmp_path
        self.procs: list[Process] = []
        self.lm_port = free_ports(1)
        self.lm_url = f"http://127.0.0.1:{self.lm_port}/mcp"
        self.hosts = hosts
        self.players = sum(h.count for h in hosts)
        self.host_procs: dict[str, Process] = {}
        self.host_ports: dict[str, int] = {}
        self.league = actions.open_registration(
            actions.create_league(name=league_id.title(), league_id=league_id, **settings), 120
        )

    def start_site(self) -> None:
        """The LM site alone (``start`` starts it with the agents)."""
        site = [sys.executable, "-m", "uvicorn", "leaguesite.asgi:application", "--port", str(self.lm_port)]
        self.spawn("lm", [*site, "--log-level", "warning"])
        wait_for_port(self.lm_port)

    def start(self) -> None:
        self.start_site()
        self.ref_port = free_ports(self.referee_count)
        self.referees = [self.spawn(f"ref{i}", self.referee_args(i)) for i in range(self.referee_count)]
        for host in self.hosts:
            self.host_ports[host.name] = free_ports(host.count)
            self.start_host(host)

        def registered() -> bool:
            return self.league.players.count() >= self.players and self.league.referees.count() >= self.referee_count

        wait_until(registered, 120, "agents registered", interval=0.1)  # a loaded machine starts agents slowly
        actions.start_league(self.league)

    def referee_args(self, n: int) -> list[str]:
        """``runreferee`` for the ``n``-th referee, with a state dir of its own (its reports survive it)."""
        port = ["--port", str(self.ref_port + n), "--state-dir", str(self.tmp / f"ref{n}-state")]
        return [*self.manage, "runreferee", *port, *self.common()]

    def common(self, league_url: str | None = None) -> list[str]:
        return ["--league-url", league_url or self.lm_url, "--league-id", self.league.league_id]

    def host_url(self, host: Host) -> str:
        """The LM's address as ``host`` reaches it."""
        return self.lm_url

    def start_host(self, host: Host) -> Process:
        args = [*self.manage, "runplayer", "--port", str(self.host_ports[host.name]), "--count", str(host.count)]
        args += ["--name", host.name, "--strategy", host.strategy, "--state-dir", str(self.tmp / host.name)]
        # INFO: each match's GAME_OVER is printed (told equals recorded reads it).
        proc = self.spawn(f"host-{host.name}", [*args, *self.common(self.host_url(host)), "--log-level", "INFO"])
        self.host_procs[host.name] = proc
        return proc

    def ids_of(self, host: Host) -> set[str]:
        """The player ids of a host's players (display names ``name`` or ``name-1`` …)."""
        names = {host.name} | {f"{host.name}-{i}" for i in range(1, host.count + 1)}
        ids = set(Player.objects.filter(league=self.league, display_name__in=names).values_list("player_id", flat=True))
        assert len(ids) == host.count, (host, ids)
        return ids

    def assert_each_match_recorded_once(self) -> None:
        total = self.players * (self.players - 1) // 2
        assert Match.objects.filter(league=self.league).count() == total
        assert self.results() == total
        assert not Match.objects.filter(league=self.league).exclude(status=Match.Status.FINISHED).exists()
        assert MatchResult.objects.filter(league=self.league).values("match").distinct().count() == total
        self.league.refresh_from_db()
        assert self.league.status == League.Status.COMPLETED


def penalised(result: MatchResult) -> set[str]:
    """The players a stored result counts a technical loss against."""
    pairs = ((result.match.player_a, result.technical_loss_a), (result.match.player_b, result.technical_loss_b))
    return {player.player_id for player, lost in pairs if lost}
