"""Players in a real league: the live LM (Django site), a real referee, the conductor; our
runplayer players and the student's minimal_player.py (a separate process) play it to the end."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from league import actions
from league.conductor.worker import Conductor
from league.models import League, MatchResult
from league.models import Player as PlayerRow
from league.models import Referee as RefereeRow
from leagueproto.serve import ThreadedServer
from players.agent import Lifecycle, Player, PlayerConfig, PlayerHost
from referee.agent import Referee, RefereeConfig
from tests.league.lm_support import make_league
from tests.support.servers import Process, free_port
from tests.support.waiting import wait_until

MINIMAL_PLAYER = Path(__file__).resolve().parents[2] / "docs" / "examples" / "minimal_player.py"
FAST = {
    "join_timeout": 1.0,
    "move_timeout": 1.0,
    "game_over_timeout": 1.0,
    "report_timeout": 1.0,
    "default_timeout": 1.0,
    "retries": 1,
    "retry_delay": 0.05,
    "match_deadline": 20.0,
}


@pytest.mark.processes
@pytest.mark.parametrize("game_type", ["even_odd", "even_odd_bo5"])
def test_runplayer_players_and_the_minimal_player_play_a_real_league(game_type, lm_server, agent_env, tmp_path):
    league = make_league(f"players_{game_type}", game_type=game_type, **FAST)
    referee = Referee(RefereeConfig(name="Ref", league_url=lm_server, league_id=league.league_id, backoff_initial=0.05))
    referee_server = ThreadedServer(referee.asgi_app())
    referee.config.endpoint = referee_server.url
    referee_server.start()
    ours = [
        Player(PlayerConfig(name=name, strategy=strategy, league_url=lm_server, league_id=league.league_id))
        for name, strategy in (("Ada", "adaptive"), ("Rand", "random"), ("Evan", "always_even"))
    ]
    host = PlayerHost(ours, stay=False)
    player_server = host.start_in_thread()
    log_path = tmp_path / "minimal.log"
    student = Process(
        [sys.executable, str(MINIMAL_PLAYER), "--port", str(free_port()), "--league-url", lm_server]
        + ["--league-id", league.league_id, "--name", "Student"],
        agent_env,
        log_path=str(log_path),
    )
    try:
        wait_until(
            lambda: (
                PlayerRow.objects.filter(league=league).count() == 4
                and RefereeRow.objects.filter(league=league).exists()
            ),
            timeout=20,
        )
        actions.close_registration(league)
        asyncio.run(asyncio.wait_for(Conductor(league_id=league.league_id, poll=0.02).run(until_done=True), 40))

        league.refresh_from_db()
        assert league.status == League.Status.COMPLETED
        results = MatchResult.objects.filter(league=league)
        assert results.count() == 6
        assert not results.filter(technical_loss_a=True).exists() and not results.filter(technical_loss_b=True).exists()
        for p in ours:
            # LEAGUE_COMPLETED received; the last GAME_OVER may come just after it (told once recorded).
            wait_until(lambda p=p: p.lifecycle == Lifecycle.SHUTDOWN, what=f"{p.name} shut down")
            assert p.memory.stats["played"] == 3
            assert {m["game_type"] for m in p.memory.matches} == {game_type}
            assert p.memory.standings and p.memory.league["champion"]
        assert student.proc.wait(10) == 0  # the starter exits after LEAGUE_COMPLETED
        output = log_path.read_text()
        assert output.count(": won") + output.count(": lost") + output.count(": draw") == 3
        assert "league completed, champion P0" in output
    finally:
        student.kill()
        player_server.stop()
        referee_server.stop()
