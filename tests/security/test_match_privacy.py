"""A match is private while it is played: a player that polls every referee tool (and the League
Manager's reads of the match) during its own turn learns nothing of the opponent's answer, sees
no player's endpoint and wins nothing beyond chance. A real ``runreferee`` process, real players
(runplayer's Player over HTTP), the real LM and its conductor."""

from __future__ import annotations

import asyncio

import pytest

from league import actions
from league.conductor.worker import Conductor
from league.models import League, MatchResult
from league.models import Player as PlayerRow
from league.models import Referee as RefereeRow
from players.agent import Player, PlayerConfig, PlayerHost
from tests.league.lm_support import make_league
from tests.security.cheater import Cheater
from tests.support.servers import Process, free_port, wait_for_port
from tests.support.waiting import wait_until

FAST = {
    "join_timeout": 2.0,
    "move_timeout": 3.0,
    "game_over_timeout": 2.0,
    "report_timeout": 2.0,
    "default_timeout": 2.0,
    "retries": 1,
    "retry_delay": 0.05,
    "match_deadline": 60.0,
}


@pytest.mark.processes
@pytest.mark.parametrize("game_type", ["even_odd_bo5", "even_odd"])
def test_a_player_polling_every_referee_tool_during_its_turn_learns_nothing(
    game_type, lm_server, agent_env, manage_py, tmp_path
):
    league = make_league(f"privacy_{game_type}", game_type=game_type, schedule_format="double", **FAST)
    port = free_port()
    args = [*manage_py, "runreferee", "--port", str(port), "--league-url", lm_server]
    args += ["--league-id", league.league_id, "--name", "Ref", "--grace", "2"]
    referee = Process(args, agent_env, str(tmp_path / "referee.log"))
    cheater = Cheater(f"http://127.0.0.1:{port}/mcp", lm_server, league.league_id)
    config = {"league_url": lm_server, "league_id": league.league_id}
    players = [
        Player(PlayerConfig(name="Sly", **config), strategy=cheater),
        Player(PlayerConfig(name="Ada", strategy="random", **config)),
        Player(PlayerConfig(name="Bob", strategy="random", **config)),
    ]
    cheater.player = players[0]
    server = PlayerHost(players, stay=False).start_in_thread()
    try:
        wait_for_port(port)
        wait_until(
            lambda: (
                PlayerRow.objects.filter(league=league).count() == 3
                and RefereeRow.objects.filter(league=league).exists()
            ),
            timeout=30,
        )
        cheater.watch_for = list(PlayerRow.objects.filter(league=league).values_list("endpoint", flat=True))
        actions.close_registration(league)
        asyncio.run(asyncio.wait_for(Conductor(league_id=league.league_id, poll=0.02).run(until_done=True), 180))
    finally:
        server.stop()
        referee.terminate()

    league.refresh_from_db()
    assert league.status == League.Status.COMPLETED
    results = list(MatchResult.objects.filter(league=league).select_related("match__player_a", "match__player_b"))
    assert len(results) == 6
    assert not any(r.technical_loss_a or r.technical_loss_b for r in results)

    # It tried: every turn of its own, every tool, every credential.
    sly = players[0].player_id
    mine = [r for r in results if sly in (r.match.player_a.player_id, r.match.player_b.player_id)]
    turns = sum(len(r.details["rounds"]) if game_type == "even_odd_bo5" else 1 for r in mine)
    assert cheater.decisions >= turns and cheater.polls > 0
    assert {"get_match_state", "start_match", "notify_round"} <= set(cheater.refusals)
    # And learned nothing: no reply showed the opponent's answer to the turn being played, the
    # referee's match state answered no one but the LM, and no reply named a player's endpoint.
    assert cheater.learned == 0
    assert "get_match_state" not in cheater.answered
    assert cheater.refusals["get_match_state"] <= {"E011", "E012"}
    assert cheater.leaks == []
    if game_type == "even_odd_bo5":
        # Nothing beyond chance: one spy that sees every opponent's number wins every round it
        # plays; a fair player wins them all with a chance of 1 in 2^turns (turns >= 12 here).
        won = sum(r.details["scores"][sly] for r in mine)
        assert turns >= 12 and won < turns
