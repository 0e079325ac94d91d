"""Kill an LM process while relay players are connected, start it again: the players reconnect
and the league completes with nothing lost (every match played, no technical loss).

With the in-memory channel layer the LM is one process. With Redis (REDIS_URL) there are two:
the players' sockets are held by one, the relay endpoints (LM_BASE_URL) point at the other, so
every call crosses processes through the channel layer; the socket holder is the one killed."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading

import pytest

from league import actions
from league.conductor.worker import Conductor
from league.models import League, MatchResult
from league.models import Player as PlayerRow
from league.models import Referee as RefereeRow
from leagueproto.serve import ThreadedServer
from players.agent import Player, PlayerConfig
from players.connect import ConnectHost
from referee.agent import Referee, RefereeConfig
from tests.league.lm_support import make_league
from tests.support.servers import REDIS_URL, Process, free_port, redis_up, wait_for_port
from tests.support.waiting import wait_until

# Long enough retries that a call made while the LM restarts is retried after it is back (a
# refused connection fails at once: 40 tries a second apart outlast a restart on a loaded machine).
PATIENT = {
    "join_timeout": 3.0,
    "move_timeout": 3.0,
    "game_over_timeout": 3.0,
    "report_timeout": 3.0,
    "default_timeout": 3.0,
    "retries": 40,
    "retry_delay": 1.0,
    "match_deadline": 120.0,
    "round_pause": 0.5,
}


def _lm(port: int, env: dict[str, str], log: str) -> Process:
    args = [sys.executable, "-m", "uvicorn", "leaguesite.asgi:application", "--host", "127.0.0.1"]
    args += ["--port", str(port), "--log-level", "warning", "--no-access-log"]
    process = Process(args, env, log_path=log)
    wait_for_port(port, timeout=60)
    return process


@pytest.mark.processes
@pytest.mark.parametrize("layer", ["in-memory", "redis"])
def test_relay_players_reconnect_after_an_lm_restart_and_nothing_is_lost(layer, agent_env, tmp_path):
    if layer == "redis" and not redis_up():
        pytest.skip("no Redis at 127.0.0.1:6379")
    holder_port = free_port()
    env = dict(agent_env)
    processes: list[Process] = []
    caller_port = holder_port
    if layer == "redis":
        caller_port = free_port()
        # Both processes assign endpoints on the caller; the players' sockets go to the holder.
        env.update(REDIS_URL=REDIS_URL, LM_BASE_URL=f"http://127.0.0.1:{caller_port}")
        processes.append(_lm(caller_port, env, str(tmp_path / "caller.log")))
    holder = _lm(holder_port, env, str(tmp_path / "holder-1.log"))
    lm_url = f"http://127.0.0.1:{holder_port}/mcp"

    league = make_league(f"relay_restart_{layer.replace('-', '_')}", **PATIENT)
    referee = Referee(RefereeConfig(name="Ref", league_url=lm_url, league_id=league.league_id, backoff_initial=0.05))
    referee_server = ThreadedServer(referee.asgi_app())
    referee.config.endpoint = referee_server.url
    referee_server.start()
    players = [
        Player(PlayerConfig(name=name, strategy="random", league_url=lm_url, league_id=league.league_id))
        for name in ("Ann", "Ben", "Cat", "Dan")
    ]
    host = ConnectHost(players)
    hosting: dict[str, asyncio.AbstractEventLoop | asyncio.Task] = {}

    def host_players() -> None:
        async def main() -> None:
            hosting["loop"], hosting["task"] = asyncio.get_running_loop(), asyncio.current_task()
            with contextlib.suppress(asyncio.CancelledError):
                await host.run()

        asyncio.run(main())

    host_thread = threading.Thread(target=host_players, daemon=True)
    host_thread.start()
    conductor_done = threading.Event()
    try:
        wait_until(
            lambda: (
                PlayerRow.objects.filter(league=league, relay_channel__gt="").count() == 4
                and RefereeRow.objects.filter(league=league).exists()
            ),
            timeout=60,
        )
        if layer == "redis":
            assert all(f":{caller_port}/relay/" in p.endpoint for p in PlayerRow.objects.filter(league=league))
        actions.close_registration(league)

        def conduct() -> None:
            async def until_completed() -> None:
                # As the LM's own conductor does: on while the league is paused, until it ends.
                while await League.objects.filter(pk=league.pk).exclude(status=League.Status.COMPLETED).aexists():
                    await Conductor(league_id=league.league_id, poll=0.02).run(until_done=True)
                    await asyncio.sleep(0.05)

            asyncio.run(asyncio.wait_for(until_completed(), 240))
            conductor_done.set()

        conductor = threading.Thread(target=conduct, daemon=True)
        conductor.start()
        # Mid-league: once the first round's results are in, the socket holder dies and comes back.
        # The teacher holds the league meanwhile: players that stay away longer than the league's
        # patience are marked unreachable and lose their matches by design, and how long a loaded
        # machine takes to start a process is not this test's question. Matches already with the
        # referee play on across the restart (their calls are retried).
        wait_until(lambda: MatchResult.objects.filter(league=league).count() >= 2, timeout=60)
        actions.pause_league(league)
        holder.kill()
        holder = _lm(holder_port, env, str(tmp_path / "holder-2.log"))
        wait_until(lambda: all(link.connections >= 2 for link in host.links), timeout=60)
        away = PlayerRow.objects.filter(league=league, unreachable_since__isnull=False)
        wait_until(lambda: not away.exists(), timeout=60)
        actions.resume_league(league)
        conductor.join(240)
        assert conductor_done.is_set()

        league.refresh_from_db()
        assert league.status == League.Status.COMPLETED
        results = MatchResult.objects.filter(league=league)
        assert results.count() == 6
        assert not results.filter(technical_loss_a=True).exists()
        assert not results.filter(technical_loss_b=True).exists()
        assert all(link.connections >= 2 for link in host.links)  # every player reconnected
        # Each result is told once recorded: the last GAME_OVERs may come after the league ends.
        wait_until(lambda: all(player.memory.stats["played"] == 3 for player in players), what="every result told")
    finally:
        holder.kill()
        for process in processes:
            process.kill()
        referee_server.stop()
        # A player still reconnecting to a relay that is gone (one not told the league ended)
        # stops with the test, not later, logging into a closed capture.
        if host_thread.is_alive() and "task" in hosting:
            with contextlib.suppress(RuntimeError):  # its loop closed meanwhile
                hosting["loop"].call_soon_threadsafe(hosting["task"].cancel)
        host_thread.join(5)
