"""The token a player's invitation carries is its own: its opponent cannot use it on it.

The referee sends each player a token derived for it alone (leagueproto/matchtoken.py). The
attacker plays the victim in a best-of-5 match; on its first move it takes the token from its
own invitation and calls the victim as if it were the referee: ``make_move`` and
``choose_parity`` (to learn the victim's answer before giving its own: a deterministic or
stateful strategy answers the real referee the same), as a field and as a bearer, in both
dialects, then a GAME_OVER of its own. The victim refuses every call (E012), and plays the rest
of its match with the real referee as if nothing had been sent. A real ``runreferee``, the victim
as a real ``runplayer`` (own port, or through the LM's relay with ``--connect``), the real LM and
its conductor."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import httpx
import pytest

from league import actions
from league.conductor.common import match_token
from league.conductor.worker import Conductor
from league.models import League, MatchResult
from league.models import Player as PlayerRow
from league.models import Referee as RefereeRow
from leagueproto.envelope import make_message
from leagueproto.matchtoken import player_token, token_digest
from leagueproto.tools import same_token
from players.agent import Player, PlayerConfig, PlayerHost
from players.strategies.base import MoveSituation, ParitySituation, Strategy
from tests.league.lm_support import assigned_match, make_league, register_referee
from tests.support.servers import Process, free_port, wait_for_port
from tests.support.waiting import wait_until

TIMEOUTS = {
    "join_timeout": 5.0,
    "move_timeout": 10.0,  # the attacker's first move waits for its calls to the victim
    "game_over_timeout": 5.0,
    "report_timeout": 5.0,
    "default_timeout": 5.0,
    "retries": 1,
    "retry_delay": 0.05,
    "match_deadline": 60.0,
}


class Eavesdropper(Strategy):
    """Plays legal moves; on its first move it calls the victim with its own match token."""

    name = "eavesdropper"
    blocking = False

    def __init__(self, victim_endpoint: str) -> None:
        super().__init__()
        self.victim_endpoint = victim_endpoint
        self.player: Player | None = None  # set once built: its own invitation's token
        self.token: str | None = None
        self.replies: list[tuple[str, int, Any]] = []  # (what was sent, HTTP status, result or body)

    async def choose_parity(self, situation: ParitySituation) -> str:
        return "even"

    async def choose_move(self, situation: MoveSituation) -> int:
        if not self.replies:
            await self._call_the_victim(situation)
        return 2

    async def _call_the_victim(self, s: MoveSituation) -> None:
        assert self.player is not None
        self.token = token = self.player.in_play[s.match_id]["token"]
        round_id = int(s.match_id[1 : s.match_id.index("M")])
        common = {
            "league_id": self.player.league_id,
            "round_id": round_id,
            "match_id": s.match_id,
            "player_id": s.opponent_id,
        }
        asks = {
            "make_move": ("MOVE_REQUEST", {"game_round": s.game_round, "game_state": {}, "time_limit_seconds": 5}),
            "choose_parity": ("CHOOSE_PARITY_CALL", {"game_type": "even_odd", "context": {"opponent_id": s.player_id}}),
        }
        async with httpx.AsyncClient(timeout=8) as http:
            for tool, (message_type, fields) in asks.items():
                for as_bearer in (False, True):
                    message = self._message(message_type, None if as_bearer else token, **common, **fields)
                    headers = {"Authorization": f"Bearer {token}"} if as_bearer else {}
                    for body in (
                        {"jsonrpc": "2.0", "id": 1, "method": tool, "params": message},
                        {
                            "jsonrpc": "2.0",
                            "id": 2,
                            "method": "tools/call",
                            "params": {"name": tool, "arguments": message},
                        },
                    ):
                        await self._send(http, f"{tool} bearer={as_bearer} {body['method']}", body, headers)
            over = self._message(
                "GAME_OVER",
                token,
                **common,
                game_type="even_odd_bo5",
                game_result={"status": "WIN", "winner_player_id": s.player_id, "reason": "you lost"},
            )
            body = {"jsonrpc": "2.0", "id": 3, "method": "notify_match_result", "params": over}
            await self._send(http, "notify_match_result", body, {})

    @staticmethod
    def _message(message_type: str, token: str | None, **fields: Any) -> dict[str, Any]:
        conversation = f"conv-{secrets.token_hex(4)}"
        return make_message(message_type, "referee:REF01", conversation_id=conversation, auth_token=token, **fields)

    async def _send(self, http: httpx.AsyncClient, what: str, body: dict[str, Any], headers: dict[str, str]) -> None:
        response = await http.post(self.victim_endpoint, json=body, headers=headers)
        try:
            result = response.json().get("result")
        except ValueError:
            result = response.text
        if isinstance(result, dict) and isinstance(result.get("structuredContent"), dict):
            result = result["structuredContent"]  # the MCP dialect's answer
        self.replies.append((what, response.status_code, result))


@pytest.mark.processes
@pytest.mark.parametrize("connect", [False, True], ids=["direct", "relay"])
def test_the_opponents_token_gets_nothing_from_the_victim(lm_server, agent_env, manage_py, tmp_path, connect):
    league = make_league(f"opptoken_{'relay' if connect else 'direct'}", game_type="even_odd_bo5", **TIMEOUTS)
    port = free_port()
    args = [*manage_py, "runreferee", "--port", str(port), "--league-url", lm_server]
    args += ["--league-id", league.league_id, "--name", "Ref", "--grace", "2"]
    referee = Process(args, agent_env, str(tmp_path / "referee.log"))

    args = [*manage_py, "runplayer", "--name", "Victim", "--league-url", lm_server, "--league-id", league.league_id]
    args += ["--connect"] if connect else ["--port", str(victim_port := free_port())]
    victim_process = Process(args, agent_env, log_path=str(tmp_path / "victim.log"))
    attacker_server = None
    try:
        wait_for_port(port)
        wait_until(lambda: PlayerRow.objects.filter(league=league, display_name="Victim").exists(), timeout=60)
        victim = PlayerRow.objects.get(league=league, display_name="Victim")
        spy = Eavesdropper(victim.endpoint if connect else f"http://127.0.0.1:{victim_port}/mcp")
        attacker = Player(PlayerConfig(name="Mallory", league_url=lm_server, league_id=league.league_id), strategy=spy)
        spy.player = attacker
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

        # It tried, with a token the real referee gave it, and every call was refused: no move,
        # no parity choice, no acknowledgement of its GAME_OVER.
        assert spy.token and len(spy.token) == 64
        assert len(spy.replies) == 9, spy.replies
        for what, status, result in spy.replies:
            assert not (isinstance(result, dict) and ("move" in result or "parity_choice" in result)), what
            assert not (isinstance(result, dict) and result.get("message_type") == "ACK"), what
            if status == 200 and isinstance(result, dict):
                # The relay does not pass an Authorization header on: a bearer arrives as no token.
                refused = {"E011", "E012"} if connect and "bearer=True" in what else {"E012"}
                assert result["error_code"] in refused and result["context"]["field"] == "auth_token", (what, result)
            else:  # the relay may refuse a caller before the victim is asked: never a 5xx
                assert status < 500, (what, status, result)

        # The victim played its whole match with the real referee: every call answered, the
        # turns after the fake GAME_OVER included.
        league.refresh_from_db()
        assert league.status == League.Status.COMPLETED
        result = MatchResult.objects.get(match__league=league)
        assert not result.technical_loss_a and not result.technical_loss_b, result.details
        assert len(result.details["rounds"]) >= 3
        to_victim = [e for e in result.log if e["peer"] == victim.player_id]
        moves = [e for e in to_victim if e["direction"] == "OUT" and e["method"] == "make_move"]
        assert len(moves) == len(result.details["rounds"]), to_victim
        assert all(e["outcome"] == "ok" for e in to_victim if e["direction"] == "OUT"), to_victim
        assert not [e for e in to_victim if e["direction"] == "IN" and e["outcome"] != "ok"], to_victim
        assert victim_process.proc.wait(30) == 0
    finally:
        victim_process.terminate()
        if attacker_server is not None:
            attacker_server.stop()
        referee.terminate()


@pytest.mark.processes
def test_the_lm_confirms_to_each_player_only_its_own_token(lm_server):
    """The League Manager's GET_MATCH_ASSIGNMENT answers each player the hash of its own token:
    a player bound to a copy takes the real referee's invitation (its token confirmed), and never
    one with its opponent's token, genuine as that is for the opponent. Real ``Player`` agents
    (players/agent.py) over HTTP, the real LM."""
    league = make_league("opptoken_confirm")
    register_referee(lm_server, "ref")
    config = {"league_url": lm_server, "league_id": league.league_id}
    agents = [Player(PlayerConfig(name=name, **config)) for name in ("Ann", "Bob")]
    server = PlayerHost(agents, stay=True).start_in_thread()
    try:
        wait_until(lambda: all(agent.player_id for agent in agents), timeout=30)
        ann, bob = sorted(agents, key=lambda agent: agent.player_id or "")
        match = assigned_match(league, a=ann.player_id, b=bob.player_id)
        secret = match_token(league.league_id, match.match_id, match.attempt)
        tokens = {agent.player_id: player_token(secret, agent.player_id) for agent in agents}

        def invite(agent: Player, token: str) -> dict[str, Any]:
            opponent = bob if agent is ann else ann
            invitation = Eavesdropper._message(
                "GAME_INVITATION",
                token,
                league_id=league.league_id,
                round_id=1,
                match_id=match.match_id,
                player_id=agent.player_id,
                game_type="even_odd",
                role_in_match="PLAYER_A" if agent is ann else "PLAYER_B",
                opponent_id=opponent.player_id,
            )
            body = {"jsonrpc": "2.0", "id": 1, "method": "handle_game_invitation", "params": invitation}
            return httpx.post(agent.endpoint, json=body, timeout=10).json()["result"]

        for agent, opponent in ((ann, bob), (bob, ann)):
            # Each asks the LM itself: the hash of its own token, not of the match token.
            reply = asyncio.run(_assignment(agent, match.match_id))
            assert reply["match_token_sha256"] == token_digest(tokens[agent.player_id])
            assert reply["match_token_sha256"] not in (token_digest(secret), token_digest(tokens[opponent.player_id]))

            # Bound to a copy first, the player takes the real invitation (the LM confirms it) ...
            assert invite(agent, secrets.token_hex(32))["accept"] is True
            assert invite(agent, tokens[agent.player_id])["accept"] is True
            # ... and never its opponent's token, which the LM confirms to the opponent only.
            refused = invite(agent, tokens[opponent.player_id])
            assert (refused["error_code"], refused["context"]["field"]) == ("E012", "auth_token"), refused
            assert same_token(agent.in_play[match.match_id]["token"], tokens[agent.player_id])
    finally:
        server.stop()


async def _assignment(agent: Player, match_id: str) -> dict[str, Any]:
    """``agent``'s own GET_MATCH_ASSIGNMENT, asked with its own token over a client of this loop."""
    message = make_message(
        "LEAGUE_QUERY",
        agent.sender,
        auth_token=agent.token,
        league_id=agent.league_id,
        query_type="GET_MATCH_ASSIGNMENT",
        query_params={"match_id": match_id},
    )
    async with httpx.AsyncClient(timeout=10) as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "league_query", "params": message}
        reply = (await http.post(agent.config.league_url, json=body)).json()["result"]
    assert reply["success"] is True, reply
    return reply["data"]
