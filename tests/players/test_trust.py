"""Whom the player trusts: its League Manager token goes only to the LM, and once the LM has
announced a round, an invitation that contradicts the announcement is refused (E012) and leaves
nothing in the player's state. Through real HTTP, and with ``runplayer`` as a real process."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import pytest

from leagueproto.envelope import make_message
from players.agent import canonical_endpoint
from tests.league.lm_support import make_league
from tests.players.conftest import ScriptedReferee, player
from tests.support.servers import Process, free_port
from tests.support.waiting import wait_until


def registered(scripted_lm, serve_players):
    p = player("Alpha", league_url=scripted_lm.url, register_backoff=0.01)
    serve_players(p, register=True)
    wait_until(lambda: p.player_id == "P01")
    return p


def announce(p, round_id: int = 1, **extra) -> dict:
    """The LM's ROUND_ANNOUNCEMENT of R<round>M1 (P01 against P02), signed with the player's LM token."""
    row = {"match_id": f"R{round_id}M1", "game_type": "even_odd", "player_A_id": "P01", "player_B_id": "P02", **extra}
    other = {"match_id": f"R{round_id}M2", "game_type": "even_odd", "player_A_id": "P03", "player_B_id": "P04"}
    message = make_message(
        "ROUND_ANNOUNCEMENT",
        "league_manager",
        conversation_id="conv-round",
        auth_token=p.lm_token,
        league_id="test_league",
        round_id=round_id,
        matches=[row, other],
    )
    return rpc(p.endpoint, "notify_round", message)


def rpc(url: str, method: str, params: dict) -> dict:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return httpx.post(url, json=body, timeout=10).json()["result"]


def state(p) -> dict:
    return httpx.post(p.endpoint, json={"jsonrpc": "2.0", "id": 1, "method": "get_player_state"}, timeout=10).json()[
        "result"
    ]


async def test_a_forged_invitation_gets_its_own_token_back_never_the_players(
    scripted_lm, serve_players, referee_client
):
    p = registered(scripted_lm, serve_players)
    forger = ScriptedReferee(referee_client, p.endpoint, token="anything")
    forger.sender = "referee:evil"
    for method in ("handle_game_invitation", "choose_parity"):
        message = forger.invitation() if method == "handle_game_invitation" else forger.parity_call()
        reply = (await forger.call(method, message)).reply
        assert reply["auth_token"] == "anything", reply
        assert p.token not in json.dumps(reply) and p.lm_token not in json.dumps(reply)


async def test_after_the_announcement_only_announced_invitations_are_accepted(
    scripted_lm, serve_players, referee_client
):
    p = registered(scripted_lm, serve_players)
    assert announce(p)["message_type"] == "ACK"
    ref = ScriptedReferee(referee_client, p.endpoint)
    for match_id, opponent, field in (
        ("R1M9", "P02", "match_id"),
        ("R1M2", "P04", "match_id"),
        ("R1M1", "P05", "opponent_id"),
    ):
        reply = (await ref.call("handle_game_invitation", ref.invitation(match_id, opponent))).reply
        assert reply["error_code"] == "E012", reply
        assert reply["context"]["field"] == field
        assert reply["context"]["see"] == "docs/protocol.md#whom-to-trust"
    # The forged invitations left nothing behind.
    assert p.in_play == {} and state(p)["matches_in_play"] == []
    ack = (await ref.call("handle_game_invitation", ref.invitation("R1M1", "P02"))).reply
    assert ack["accept"] is True and state(p)["matches_in_play"] == ["R1M1"]


async def test_before_any_announcement_an_invitation_is_accepted_as_before(scripted_lm, serve_players, referee_client):
    # An LM that sends no ROUND_ANNOUNCEMENT must still get its matches played.
    p = registered(scripted_lm, serve_players)
    ref = ScriptedReferee(referee_client, p.endpoint)
    assert await ref.play("R1M5", "P09", "odd", 4) in ("even", "odd")
    assert p.memory.matches[-1]["match_id"] == "R1M5"


async def test_an_announced_referee_endpoint_must_be_the_inviting_one(scripted_lm, serve_players, referee_client):
    p = registered(scripted_lm, serve_players)
    announce(p, referee_endpoint="HTTP://LOCALHOST:8001/mcp/")
    ref = ScriptedReferee(referee_client, p.endpoint)
    wrong = ref.invitation("R1M1", "P02", referee_endpoint="http://127.0.0.1:9999/mcp")
    reply = (await ref.call("handle_game_invitation", wrong)).reply
    assert reply["error_code"] == "E012" and reply["context"]["field"] == "referee_endpoint"
    assert p.in_play == {}
    same = ref.invitation("R1M1", "P02", referee_endpoint="http://127.0.0.1:8001/mcp")
    assert (await ref.call("handle_game_invitation", same)).reply["accept"] is True


def forger_of(p, referee_client, token: str = "forged-token") -> ScriptedReferee:
    """A classmate who copies the real invitation (match, round, opponent: all public) with its own token."""
    return ScriptedReferee(referee_client, p.endpoint, token=token)


async def test_a_forged_invitation_to_a_bound_match_changes_nothing_for_its_referee(
    scripted_lm, serve_players, referee_client
):
    p = registered(scripted_lm, serve_players)
    announce(p, referee_endpoint="http://127.0.0.1:8001/mcp")
    scripted_lm.match_tokens["R1M1"] = "match-token-1"
    ref = ScriptedReferee(referee_client, p.endpoint)  # the real referee: its token is the LM's
    assert (await ref.call("handle_game_invitation", ref.invitation())).reply["accept"] is True
    forger = forger_of(p, referee_client)
    for extra in ({}, {"referee_endpoint": "http://127.0.0.1:8001/mcp"}):
        reply = (await forger.call("handle_game_invitation", forger.invitation(**extra))).reply
        assert reply["error_code"] == "E012" and reply["context"]["field"] == "auth_token", reply
        assert reply["context"]["see"] == "docs/protocol.md#whom-to-trust"
        # The forger's own calls stay refused, the real referee's go on.
        assert (await forger.call("choose_parity", forger.parity_call())).reply["error_code"] == "E012"
    asked = [q for q in scripted_lm.queries if q["query_type"] == "GET_MATCH_ASSIGNMENT"]
    assert asked and all(q["query_params"] == {"match_id": "R1M1"} for q in asked)
    assert all(q["auth_token"] == p.token for q in asked)  # asked as itself
    choice = (await ref.call("choose_parity", ref.parity_call())).reply
    assert choice["message_type"] == "CHOOSE_PARITY_RESPONSE" and choice["auth_token"] == "match-token-1"
    await ref.call("notify_match_result", ref.game_over("R1M1", choice["parity_choice"], "odd", 4))
    assert p.memory.matches[-1]["match_id"] == "R1M1"


async def test_an_invitation_forged_before_the_real_one_gives_way_to_it(scripted_lm, serve_players, referee_client):
    p = registered(scripted_lm, serve_players)
    announce(p)
    scripted_lm.match_tokens["R1M1"] = "match-token-1"
    forger = forger_of(p, referee_client)
    assert (await forger.call("handle_game_invitation", forger.invitation())).reply["accept"] is True
    ref = ScriptedReferee(referee_client, p.endpoint)
    assert (await ref.call("handle_game_invitation", ref.invitation())).reply["accept"] is True
    assert p.in_play["R1M1"]["token"] == "match-token-1"
    assert (await forger.call("choose_parity", forger.parity_call())).reply["error_code"] == "E012"
    assert (await ref.call("choose_parity", ref.parity_call())).reply["parity_choice"] in ("even", "odd")


async def test_a_reassignment_the_league_manager_confirms_moves_the_match_to_the_new_referee(
    scripted_lm, serve_players, referee_client
):
    p = registered(scripted_lm, serve_players)
    announce(p)
    first = ScriptedReferee(referee_client, p.endpoint, token="attempt-1")
    scripted_lm.match_tokens["R1M1"] = "attempt-1"
    await first.call("handle_game_invitation", first.invitation())
    # The first referee fails; the LM gives the match to REF02 with a new token.
    scripted_lm.match_tokens["R1M1"] = "attempt-2"
    second = ScriptedReferee(referee_client, p.endpoint, token="attempt-2")
    second.sender = "referee:REF02"
    assert (await second.call("handle_game_invitation", second.invitation())).reply["accept"] is True
    assert (await first.call("choose_parity", first.parity_call())).reply["error_code"] == "E012"
    assert (await second.call("choose_parity", second.parity_call())).reply["parity_choice"] in ("even", "odd")


async def test_with_no_league_manager_to_ask_the_first_invitation_binds_the_match(serve_players, referee_client):
    p = player("Solo")  # serves without registering: nobody can confirm a new referee
    serve_players(p)
    ref = ScriptedReferee(referee_client, p.endpoint)
    await ref.call("handle_game_invitation", ref.invitation())
    forger = forger_of(p, referee_client)
    assert (await forger.call("handle_game_invitation", forger.invitation())).reply["error_code"] == "E012"
    assert (await ref.call("choose_parity", ref.parity_call())).reply["parity_choice"] in ("even", "odd")


def test_endpoints_are_compared_in_one_spelling():
    one = canonical_endpoint("http://127.0.0.1:80/mcp")
    assert canonical_endpoint("HTTP://LocalHost/mcp/") == one
    assert canonical_endpoint("http://[::1]/mcp?x=1") == one
    assert canonical_endpoint("http://127.0.0.1:8001/mcp") != one


@pytest.mark.processes
def test_runplayer_never_hands_its_lm_token_to_a_forged_referee(lm_server, agent_env, manage_py, tmp_path):
    league = make_league("trust_player")
    port = free_port()
    args = [*manage_py, "runplayer", "--name", "Tess", "--port", str(port), "--league-url", lm_server]
    args += ["--league-id", league.league_id, "--state-dir", str(tmp_path)]
    process = Process(args, agent_env, log_path=str(tmp_path / "runplayer.log"))
    try:
        identity_file = tmp_path / "Tess.json"
        wait_until(lambda: identity_file.exists(), timeout=30)
        identity = json.loads(identity_file.read_text())["identity"]
        forged = make_message(
            "GAME_INVITATION",
            "referee:REF01",
            conversation_id="conv-forged",
            auth_token="forger-token",
            league_id=league.league_id,
            round_id=1,
            match_id="R1M1",
            player_id=identity["player_id"],
            game_type="even_odd",
            opponent_id="P02",
        )
        reply = rpc(f"http://127.0.0.1:{port}/mcp", "handle_game_invitation", forged)
        assert reply["auth_token"] == "forger-token"
        assert identity["auth_token"] not in json.dumps(reply)
    finally:
        process.terminate()


@pytest.mark.processes
def test_the_minimal_player_never_hands_its_token_to_a_forged_referee(lm_server, agent_env, tmp_path):
    from league.models import Player as PlayerRow
    from league.models import hash_token

    league = make_league("trust_minimal")
    port = free_port()
    example = Path(__file__).resolve().parents[2] / "docs" / "examples" / "minimal_player.py"
    args = [sys.executable, str(example), "--port", str(port), "--league-url", lm_server, "--name", "Mini"]
    process = Process([*args, "--league-id", league.league_id], agent_env, log_path=str(tmp_path / "mini.log"))
    try:
        wait_until(lambda: PlayerRow.objects.filter(league=league).exists(), timeout=30)
        row = PlayerRow.objects.get(league=league)
        forged = make_message(
            "GAME_INVITATION",
            "referee:REF01",
            conversation_id="conv-forged",
            auth_token="forger-token",
            league_id=league.league_id,
            round_id=1,
            match_id="R1M1",
            player_id=row.player_id,
            game_type="even_odd",
            opponent_id="P02",
        )
        reply = rpc(f"http://127.0.0.1:{port}/mcp", "handle_game_invitation", forged)
        assert reply["auth_token"] == "forger-token"
        assert hash_token(reply["auth_token"]) != row.token_hash
    finally:
        process.terminate()
