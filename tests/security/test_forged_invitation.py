"""A classmate cannot make a player lose by copying its invitation (issue: a forged
GAME_INVITATION with the same match, round and opponent, all public, and another token).

The opponent is the attacker: while it plays its own first move of a best-of-5 match it sends
the victim copies of the real invitation with tokens of its own, with and without the announced
``referee_endpoint``. The victim is ``runplayer`` as a real process, serving its own port or
playing through the LM's relay (``--connect``); the LM, the referee and the conductor are real.
The victim plays the rest of its match with the real referee as if nothing had been sent."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import httpx
import pytest

from league import actions
from league.conductor.worker import Conductor
from league.models import League, MatchResult
from league.models import Player as PlayerRow
from league.models import Referee as RefereeRow
from leagueproto.envelope import make_message
from leagueproto.serve import ThreadedServer
from players.agent import Player, PlayerConfig, PlayerHost
from players.strategies.base import MoveSituation, ParitySituation, Strategy
from referee.agent import Referee, RefereeConfig
from tests.league.lm_support import make_league
from tests.support.servers import Process, free_port
from tests.support.waiting import wait_until

TIMEOUTS = {
    "join_timeout": 5.0,
    "move_timeout": 10.0,  # the forger's first move waits for its forgeries to be answered
    "game_over_timeout": 5.0,
    "report_timeout": 5.0,
    "default_timeout": 5.0,
    "retries": 1,
    "retry_delay": 0.05,
    "match_deadline": 60.0,
}


class Forger(Strategy):
    """Plays legal moves; on its first move it sends the opponent two forged invitations."""

    name = "forger"
    blocking = False

    def __init__(self, victim_endpoint: str) -> None:
        super().__init__()
        self.victim_endpoint = victim_endpoint
        self.player: Player | None = None  # set once built: the announcement it received
        self.replies: list[tuple[int, Any]] = []  # (HTTP status, JSON-RPC result or body text)

    async def choose_parity(self, situation: ParitySituation) -> str:
        return "even"

    async def choose_move(self, situation: MoveSituation) -> int:
        if not self.replies:
            await self._forge(situation)
        return 2

    async def _forge(self, situation: MoveSituation) -> None:
        assert self.player is not None
        round_id = int(situation.match_id[1 : situation.match_id.index("M")])
        row = self.player.announced[str(round_id)][situation.match_id]
        async with httpx.AsyncClient() as http:
            for extra in ({}, {"referee_endpoint": row["referee_endpoint"]}):
                forged = make_message(
                    "GAME_INVITATION",
                    "referee:REF01",
                    conversation_id=f"conv-{secrets.token_hex(4)}",
                    auth_token=secrets.token_hex(32),
                    league_id=self.player.league_id,
                    round_id=round_id,
                    match_id=situation.match_id,
                    player_id=situation.opponent_id,
                    game_type="even_odd_bo5",
                    role_in_match="PLAYER_A",
                    opponent_id=situation.player_id,
                    **extra,
                )
                body = {"jsonrpc": "2.0", "id": 1, "method": "handle_game_invitation", "params": forged}
                response = await http.post(self.victim_endpoint, json=body, timeout=8)
                try:
                    self.replies.append((response.status_code, response.json().get("result")))
                except ValueError:
                    self.replies.append((response.status_code, response.text))


@pytest.mark.processes
@pytest.mark.parametrize("connect", [False, True], ids=["direct", "relay"])
def test_a_forged_invitation_does_not_cost_the_victim_its_match(lm_server, agent_env, manage_py, tmp_path, connect):
    league = make_league(f"forged_{'relay' if connect else 'direct'}", game_type="even_odd_bo5", **TIMEOUTS)
    referee = Referee(RefereeConfig(name="Ref", league_url=lm_server, league_id=league.league_id, backoff_initial=0.05))
    referee_server = ThreadedServer(referee.asgi_app())
    referee.config.endpoint = referee_server.url
    referee_server.start()

    args = [*manage_py, "runplayer", "--name", "Victim", "--league-url", lm_server, "--league-id", league.league_id]
    args += ["--connect"] if connect else ["--port", str(port := free_port())]
    victim_process = Process(args, agent_env, log_path=str(tmp_path / "victim.log"))
    attacker_server = None
    try:
        wait_until(lambda: PlayerRow.objects.filter(league=league, display_name="Victim").exists(), timeout=60)
        victim = PlayerRow.objects.get(league=league, display_name="Victim")
        victim_endpoint = victim.endpoint if connect else f"http://127.0.0.1:{port}/mcp"
        forger = Forger(victim_endpoint)
        config = PlayerConfig(name="Mallory", league_url=lm_server, league_id=league.league_id)
        attacker = Player(config, strategy=forger)
        forger.player = attacker
        attacker_server = PlayerHost([attacker], stay=True).start_in_thread()
        wait_until(
            lambda: (
                PlayerRow.objects.filter(league=league).count() == 2
                and RefereeRow.objects.filter(league=league).exists()
            ),
            timeout=30,
        )
        actions.close_registration(league)
        asyncio.run(asyncio.wait_for(Conductor(league_id=league.league_id, poll=0.02).run(until_done=True), 120))

        # The forgeries were sent, and none was taken: the victim (or the relay) refused each.
        assert len(forger.replies) == 2, forger.replies
        for status, result in forger.replies:
            taken = status == 200 and isinstance(result, dict) and result.get("accept") is True
            assert not taken, (status, result)
            if status == 200 and isinstance(result, dict):
                assert result["error_code"] == "E012" and result["context"]["field"] == "auth_token", result

        # The victim played its match with the real referee, every call answered.
        league.refresh_from_db()
        assert league.status == League.Status.COMPLETED
        result = MatchResult.objects.get(match__league=league)
        assert not result.technical_loss_a and not result.technical_loss_b, result.details
        to_victim = [e for e in result.log if e["peer"] == victim.player_id]
        assert [e for e in to_victim if e["direction"] == "OUT" and e["method"] == "make_move"], to_victim
        assert all(e["outcome"] == "ok" for e in to_victim if e["direction"] == "OUT"), to_victim
        assert not [e for e in to_victim if e["direction"] == "IN" and e["outcome"] != "ok"], to_victim
        # And it left when the league was over, as a player does.
        assert victim_process.proc.wait(30) == 0
    finally:
        victim_process.terminate()
        if attacker_server is not None:
            attacker_server.stop()
        referee_server.stop()
