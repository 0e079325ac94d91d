"""The player agent over real HTTP: registration, the referee's calls in both dialects,
authentication, reply envelopes, deadlines, memory and lifecycle."""

from __future__ import annotations

import asyncio
import logging
import re
import time

import httpx
import pytest

from leagueproto.envelope import make_message
from leagueproto.tools import CallContext
from players.agent import Lifecycle, Player, PlayerConfig, PlayerHost, registered_id, time_budget
from players.strategies import make_strategy
from players.strategies.base import Strategy
from tests.players.conftest import ScriptedReferee, player
from tests.support.waiting import wait_until

WHOLE_SECOND_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


def registered(lm, serve_players, name: str = "Alpha", **config) -> Player:
    p = player(name, league_url=lm.url, register_backoff=0.01, **config)
    serve_players(p, register=True)
    wait_until(lambda: p.lifecycle == Lifecycle.REGISTERED)
    return p


def league_completed(p: Player) -> dict:
    """The LM's LEAGUE_COMPLETED of a one-match league that ``p`` won."""
    return make_message(
        "LEAGUE_COMPLETED",
        "league_manager",
        auth_token=p.lm_token,
        champion={"player_id": "P01", "display_name": p.name, "points": 3},
        final_standings=[{"rank": 1, "player_id": "P01", "points": 3}],
        total_rounds=1,
        total_matches=1,
    )


def test_it_registers_with_protocol_version_game_types_and_its_endpoint(scripted_lm, serve_players):
    p = registered(scripted_lm, serve_players)
    request = scripted_lm.registrations[0]
    assert request["message_type"] == "LEAGUE_REGISTER_REQUEST"
    assert request["sender"] == "player:Alpha"
    assert request["player_meta"] == {
        "display_name": "Alpha",
        "version": "1.0.0",
        "protocol_version": "2.1.0",
        "game_types": ["even_odd", "even_odd_bo5"],
        "contact_endpoint": p.endpoint,
    }
    assert p.player_id == "P01" and p.token == scripted_lm.tokens["P01"]
    assert p.lm_token == scripted_lm.lm_tokens["P01"]
    assert p.endpoint == f"http://127.0.0.1:{p.port}/mcp"


def test_it_retries_registration_until_a_league_opens(scripted_lm, serve_players):
    scripted_lm.refuse_first = 2  # E008 twice: no league open yet
    p = registered(scripted_lm, serve_players)
    assert len(scripted_lm.registrations) == 3
    assert p.player_id == "P01"


def test_it_is_suspended_then_shut_down_when_the_lm_never_answers(serve_players, caplog):
    # Nothing listens on port 9 (discard) on loopback: every attempt is a connection error.
    caplog.set_level(logging.DEBUG, logger="players")
    p = player("Lonely", league_url="http://127.0.0.1:9/mcp", register_backoff=0.01, register_attempts=4)
    serve_players(p, register=True)
    wait_until(lambda: p.lifecycle == Lifecycle.SHUTDOWN)
    # Its every change of state, as it logs them (polling its state could miss a short one).
    changes = [m for r in caplog.records if (m := r.getMessage()).startswith("Lonely: ") and " → " in m]
    states = [m.split(" → ")[1] for m in changes]
    assert Lifecycle.SUSPENDED in states and states[-1] == Lifecycle.SHUTDOWN
    assert states.index(Lifecycle.SUSPENDED) < states.index(Lifecycle.SHUTDOWN)
    assert p.failures == 4


async def test_it_answers_an_invitation_and_a_choice_in_dialect_a(scripted_lm, serve_players, referee_client):
    p = registered(scripted_lm, serve_players, strategy="always_odd")
    ref = ScriptedReferee(referee_client, p.endpoint)
    ack = (await ref.call("handle_game_invitation", ref.invitation())).reply
    assert ack["message_type"] == "GAME_JOIN_ACK"
    assert ack["accept"] is True and ack["player_id"] == "P01" and ack["match_id"] == "R1M1"
    assert ack["conversation_id"] == "conv-r1m1"
    assert WHOLE_SECOND_Z.match(ack["arrival_timestamp"])
    choice = (await ref.call("choose_parity", ref.parity_call())).reply
    assert choice["message_type"] == "CHOOSE_PARITY_RESPONSE"
    assert choice["parity_choice"] == "odd"
    for reply in (ack, choice):
        assert reply["protocol"] == "league.v2"
        assert reply["sender"] == "player:P01"
        assert reply["auth_token"] == ref.token  # the match's token: never the player's own
        assert WHOLE_SECOND_Z.match(reply["timestamp"])


async def test_it_answers_an_invitation_and_a_choice_in_dialect_b(scripted_lm, serve_players, referee_client):
    p = registered(scripted_lm, serve_players, strategy="always_even")
    ref = ScriptedReferee(referee_client, p.endpoint)
    result = await ref.call_mcp("handle_game_invitation", ref.invitation())
    assert result["isError"] is False
    assert result["structuredContent"]["message_type"] == "GAME_JOIN_ACK"
    result = await ref.call_mcp("choose_parity", ref.parity_call())
    reply = result["structuredContent"]
    assert reply["parity_choice"] == "even" and reply["auth_token"] == ref.token != p.token
    assert '"parity_choice":"even"' in result["content"][0]["text"]


async def test_it_lists_its_tools_with_input_schemas(serve_players):
    p = player()
    serve_players(p)
    async with httpx.AsyncClient() as http:
        response = await http.post(p.endpoint, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    tools = {t["name"]: t for t in response.json()["result"]["tools"]}
    expected = {
        "handle_game_invitation",
        "choose_parity",
        "notify_game_start",
        "make_move",
        "notify_round_result",
        "notify_match_result",
        "notify_game_error",
        "notify_round",
        "update_standings",
        "notify_round_completed",
        "notify_league_completed",
        "get_player_state",
    }
    assert expected <= set(tools)
    assert "deadline" in tools["choose_parity"]["inputSchema"]["properties"]


async def test_it_rejects_referee_calls_without_a_token(scripted_lm, serve_players, referee_client):
    p = registered(scripted_lm, serve_players)
    ref = ScriptedReferee(referee_client, p.endpoint)
    message = ref.invitation()
    del message["auth_token"]
    result = await ref.call("handle_game_invitation", message)
    assert result.is_error
    assert result.reply["message_type"] == "GAME_ERROR"
    assert result.reply["error_code"] == "E011"
    assert result.reply["match_id"] == "R1M1"


async def test_it_rejects_game_calls_from_a_non_referee(scripted_lm, serve_players, referee_client):
    p = registered(scripted_lm, serve_players)
    ref = ScriptedReferee(referee_client, p.endpoint)
    result = await ref.call("choose_parity", ref.parity_call(sender="player:P02"))
    assert result.reply["error_code"] == "E012"


async def test_it_rejects_a_choice_call_with_another_token_than_the_invitation(
    scripted_lm, serve_players, referee_client
):
    p = registered(scripted_lm, serve_players)
    ref = ScriptedReferee(referee_client, p.endpoint)
    await ref.call("handle_game_invitation", ref.invitation())
    result = await ref.call("choose_parity", ref.parity_call(auth_token="someone-elses-token"))
    assert result.reply["error_code"] == "E012"


async def test_it_checks_lm_notifications_against_the_league_manager_token(scripted_lm, serve_players, referee_client):
    p = registered(scripted_lm, serve_players)
    standings = [{"rank": 1, "player_id": "P01", "points": 3}]

    def update(token: str | None, sender: str = "league_manager") -> dict:
        return make_message("LEAGUE_STANDINGS_UPDATE", sender, auth_token=token, round_id=1, standings=standings)

    wrong = await referee_client.call(p.endpoint, "update_standings", update("forged"))
    assert wrong.reply["error_code"] == "E012"
    missing = await referee_client.call(p.endpoint, "update_standings", update(None))
    assert missing.reply["error_code"] == "E011"
    from_referee = await referee_client.call(p.endpoint, "update_standings", update(p.lm_token, "referee:REF01"))
    assert from_referee.reply["error_code"] == "E012"
    ok = await referee_client.call(p.endpoint, "update_standings", update(p.lm_token))
    assert ok.reply["message_type"] == "ACK" and ok.reply["status"] == "received"
    assert ok.reply["round_id"] == 1 and "match_id" not in ok.reply
    assert p.memory.standings == standings
    # An LM that adds a match_id of its own (an extra field) sees it echoed in the ACK, as before.
    extra = make_message("ROUND_COMPLETED", "league_manager", auth_token=p.lm_token, match_id="R1M1")
    done = await referee_client.call(p.endpoint, "notify_round_completed", extra)
    assert done.reply["match_id"] == "R1M1" and "round_id" not in done.reply


class Sleepy(Strategy):
    name = "sleepy"

    def choose_parity(self, situation):
        time.sleep(5)
        return "even"

    async def choose_move(self, situation):
        await asyncio.sleep(5)
        return 3


class Broken(Strategy):
    name = "broken"

    def choose_parity(self, situation):
        raise RuntimeError("strategy bug")

    def choose_move(self, situation):
        return 9  # not a legal move


@pytest.mark.parametrize("strategy", [Sleepy(), Broken()], ids=["sleeps", "raises"])
async def test_a_slow_or_failing_strategy_still_answers_a_valid_choice_in_time(
    strategy, scripted_lm, serve_players, referee_client
):
    p = registered(scripted_lm, serve_players, strategy_obj=strategy, decision_cap=0.3)
    ref = ScriptedReferee(referee_client, p.endpoint)
    await ref.call("handle_game_invitation", ref.invitation())
    # The referee waits at most 1 s; the strategy would need 5 s (or never answers well).
    reply = (await ref.call("choose_parity", ref.parity_call(seconds=1), timeout=1.0)).reply
    assert reply["parity_choice"] in ("even", "odd")
    assert p.in_play["R1M1"]["decided_by"] in ("fallback:timeout", "fallback:error")
    await ref.call("notify_game_start", ref.message("GAME_START", "R1M2", players=[]))
    move = ref.message("MOVE_REQUEST", "R1M2", game_round=1, game_state={"your_role": "ODD"}, time_limit_seconds=1)
    reply = (await ref.call("make_move", move, timeout=1.0)).reply
    assert reply["message_type"] == "MOVE_RESPONSE"
    assert reply["move"]["number"] in (1, 2, 3, 4, 5)
    assert p.in_play["R1M2"]["decided_by"] in ("fallback:timeout", "fallback:invalid")


def test_the_time_budget_keeps_a_margin_before_the_deadline():
    from datetime import UTC, datetime

    now = datetime(2025, 1, 15, 10, 30, 0, tzinfo=UTC)
    assert time_budget("2025-01-15T10:30:30Z", None, cap=10, margin=0.25, now=now) == 8.0  # the cap
    assert time_budget("2025-01-15T10:30:02Z", None, cap=10, margin=0.25, now=now) == 1.6
    assert time_budget("2025-01-15T10:29:00Z", None, cap=10, margin=0.25, now=now) == 0.05  # already late
    assert time_budget(None, 1.0, cap=10, margin=0.25) == 0.75
    assert time_budget("not a time", None, cap=2, margin=0.25) == 1.6


@pytest.mark.parametrize("has_id", [True, False], ids=["registered", "registration-reply-not-come"])
async def test_it_plays_a_best_of_five_match(scripted_lm, serve_players, referee_client, has_id):
    """Also as a player restarted before its registration reply came (no id of its own yet): it
    knows itself by the id the referee addresses it as, so its rounds and its result are its own."""
    if has_id:
        p = registered(scripted_lm, serve_players, strategy="always_odd")
    else:
        p = player("Alpha", strategy="always_odd")
        serve_players(p)
        assert p.player_id is None
    ref = ScriptedReferee(referee_client, p.endpoint)
    await ref.call("handle_game_invitation", ref.invitation(game_type="even_odd_bo5"))
    start = ref.message(
        "GAME_START",
        game_config={"game_type": "even_odd_bo5", "rounds_to_win": 3, "max_rounds": 5, "time_limit_seconds": 30},
        players=[{"player_id": "P01", "role": "ODD"}, {"player_id": "P02", "role": "EVEN"}],
    )
    assert (await ref.call("notify_game_start", start)).reply["message_type"] == "ACK"
    previous = []
    for game_round in (1, 2, 3):
        state = {"your_role": "ODD", "scores": {"P01": game_round - 1, "P02": 0}, "previous_rounds": previous}
        request = ref.message("MOVE_REQUEST", game_round=game_round, game_state=state, time_limit_seconds=30)
        reply = (await ref.call("make_move", request)).reply
        assert reply["game_round"] == game_round
        number = reply["move"]["number"]
        assert number in (1, 3, 5)
        moves = {"P01": number, "P02": 2}
        previous.append({"game_round": game_round, "moves": moves})
        result = ref.message(
            "ROUND_RESULT",
            game_round=game_round,
            moves=moves,
            sum=number + 2,
            sum_type="ODD",
            round_winner="P01",
            scores={"P01": game_round, "P02": 0},
        )
        assert (await ref.call("notify_round_result", result)).reply["status"] == "received"
    over = ref.message(
        "GAME_OVER",
        game_type="even_odd_bo5",
        game_result={"status": "WIN", "winner_player_id": "P01", "scores": {"P01": 3, "P02": 0}, "rounds": previous},
    )
    await ref.call("notify_match_result", over)
    record = p.memory.matches[-1]
    assert record["result"] == "WIN" and record["points"] == 3
    assert record["opponent_moves"] == [2, 2, 2]
    assert p.memory.move_history("P02") == [2, 2, 2]


async def test_a_player_without_its_id_yet_counts_each_outcome_as_the_referee_told_it(serve_players, referee_client):
    """Restarted before its registration reply came, a player has no id until it registers again,
    and the LM, which knows its endpoint, keeps it in its matches: what it remembers of each is
    the outcome told to the seat the referee addresses (a WIN is not a LOSS for want of an id)."""
    p = player("Zulu")
    serve_players(p)
    assert p.player_id is None
    ref = ScriptedReferee(referee_client, p.endpoint, player_id="P05")
    for match_id, theirs_same in (("R1M3", False), ("R2M3", True), ("R3M3", False)):
        await ref.call("handle_game_invitation", ref.invitation(match_id))
        mine = (await ref.call("choose_parity", ref.parity_call(match_id))).reply["parity_choice"]
        other = "odd" if mine == "even" else "even"
        number = {"R1M3": 4 if mine == "even" else 3, "R3M3": 3 if mine == "even" else 4}.get(match_id, 2)
        await ref.call("notify_match_result", ref.game_over(match_id, mine, mine if theirs_same else other, number))
    # Both lose on time: no winner, and the technical loss is ours only when it names us.
    both_lost = {"status": "TECHNICAL_LOSS", "winner_player_id": None, "technical_loss": ["P05", "P02"]}
    await ref.call("handle_game_invitation", ref.invitation("R4M3"))
    await ref.call("notify_match_result", ref.message("GAME_OVER", "R4M3", game_result=both_lost))
    told = [(m["match_id"], m["result"], m.get("opponent_id")) for m in p.memory.matches]
    assert told == [
        ("R1M3", "WIN", "P02"),
        ("R2M3", "DRAW", "P02"),
        ("R3M3", "LOSS", "P02"),
        ("R4M3", "TECHNICAL_LOSS", "P02"),
    ]
    assert p.memory.stats["wins"] == 1 and p.memory.parity_history("P02")
    assert {m["player_id"] for m in p.memory.matches} == {"P05"}  # the seat each was told as


async def test_it_remembers_results_and_keeps_them_across_a_restart(
    tmp_path, scripted_lm, serve_players, referee_client
):
    p = registered(scripted_lm, serve_players, strategy="adaptive", state_dir=tmp_path)
    ref = ScriptedReferee(referee_client, p.endpoint)
    for n in range(1, 4):
        await ref.play(f"R{n}M1", "P02", their_choice="even", number=n)
    assert p.memory.parity_history("P02") == ["even", "even", "even"]
    assert p.memory.stats["played"] == 3
    state_file = tmp_path / "Alpha.json"
    assert oct(state_file.stat().st_mode & 0o777) == "0o600"

    # The same player started again: same identity (sends its token), same memory.
    again = player("Alpha", league_url=scripted_lm.url, strategy="adaptive", state_dir=tmp_path, register_backoff=0.01)
    assert again.player_id == "P01" and again.memory.parity_history("P02") == ["even"] * 3
    serve_players(again, register=True)
    wait_until(lambda: again.lifecycle == Lifecycle.REGISTERED)
    assert scripted_lm.registrations[-1]["auth_token"] == p.token
    assert again.player_id == "P01"
    # Having learnt that P02 always says even, the adaptive player now says odd.
    ref2 = ScriptedReferee(referee_client, again.endpoint)
    assert await ref2.play("R4M1", "P02", their_choice="even", number=4) == "odd"


async def test_get_player_state_returns_history_and_statistics_but_no_secrets(
    scripted_lm, serve_players, referee_client
):
    p = registered(scripted_lm, serve_players, strategy="always_even")
    ref = ScriptedReferee(referee_client, p.endpoint)
    await ref.play("R1M1", "P02", their_choice="odd", number=8)
    async with httpx.AsyncClient() as http:
        response = await http.post(p.endpoint, json={"jsonrpc": "2.0", "id": 1, "method": "get_player_state"})
    state = response.json()["result"]
    assert state["message_type"] == "PLAYER_STATE"
    assert state["player_id"] == "P01" and state["strategy"] == "always_even"
    assert state["lifecycle"] == Lifecycle.ACTIVE
    assert state["stats"]["wins"] == 1 and state["stats"]["points"] == 3
    assert state["matches"][0]["opponent_choice"] == "odd"
    assert state["opponents"]["P02"]["parity_choices"] == ["odd"]
    assert p.token not in response.text and p.lm_token not in response.text


def test_a_host_serves_many_players_each_with_its_own_identity_and_strategy(scripted_lm):
    config = PlayerConfig(name="Beta", strategy="alternate", league_url=scripted_lm.url, register_backoff=0.01)
    host = PlayerHost.build(config, 3, stay=True)
    server = host.start_in_thread()
    try:
        wait_until(lambda: all(p.lifecycle == Lifecycle.REGISTERED for p in host.players))
        assert [p.name for p in host.players] == ["Beta-1", "Beta-2", "Beta-3"]
        assert len({p.port for p in host.players}) == 3
        assert len({p.token for p in host.players}) == 3
        assert len({id(p.strategy) for p in host.players}) == 3
        endpoints = {r["player_meta"]["contact_endpoint"] for r in scripted_lm.registrations}
        assert endpoints == {p.endpoint for p in host.players}
        for p in host.players:  # each port answers as its own player
            response = httpx.post(p.endpoint, json={"jsonrpc": "2.0", "id": 1, "method": "get_player_state"})
            assert response.json()["result"]["player_id"] == p.player_id
    finally:
        server.stop()


def test_a_host_deals_out_a_mix_of_strategies_in_turn_with_options_for_their_own_strategy():
    config = PlayerConfig(name="Mix", strategy="llm", strategy_options={"model": "gemini-test"})
    host = PlayerHost.build(config, 5, strategies=["always_even", "llm", "alternate"])
    assert [p.strategy.name for p in host.players] == ["always_even", "llm", "alternate", "always_even", "llm"]
    assert [p.name for p in host.players] == ["Mix-1", "Mix-2", "Mix-3", "Mix-4", "Mix-5"]
    # The LLM's options reach the LLM players only, not the rest of the mix.
    assert [p.config.strategy_options for p in host.players] == [
        {},
        {"model": "gemini-test"},
        {},
        {},
        {"model": "gemini-test"},
    ]
    assert host.players[1].strategy.model == "gemini-test"


async def test_it_shuts_down_after_league_completed(scripted_lm, referee_client):
    config = PlayerConfig(name="Gamma", league_url=scripted_lm.url, register_backoff=0.01)
    host = PlayerHost.build(config, 1, stay=False)
    server = host.start_in_thread()
    try:
        p = host.players[0]
        await asyncio.to_thread(wait_until, lambda: p.lifecycle == Lifecycle.REGISTERED)
        announce = make_message(
            "ROUND_ANNOUNCEMENT",
            "league_manager",
            auth_token=p.lm_token,
            round_id=1,
            matches=[{"match_id": "R1M1", "game_type": "even_odd", "player_A_id": "P01", "player_B_id": "P02"}],
        )
        await referee_client.call(p.endpoint, "notify_round", announce)
        assert p.lifecycle == Lifecycle.ACTIVE and p.memory.league["my_matches"][0]["match_id"] == "R1M1"
        reply = (await referee_client.call(p.endpoint, "notify_league_completed", league_completed(p))).reply
        assert reply["message_type"] == "ACK"
        assert p.lifecycle == Lifecycle.SHUTDOWN
        await asyncio.to_thread(wait_until, lambda: not server.running)  # the server stopped by itself
    finally:
        server.stop()


async def test_a_game_over_sent_again_counts_once(scripted_lm, serve_players, referee_client):
    """The referee sends GAME_OVER again when our ACK was lost (the relay or the LM restarted
    in between): the player answers it again and counts the match once."""
    p = registered(scripted_lm, serve_players, name="Echo")
    ref = ScriptedReferee(referee_client, p.endpoint)
    await ref.call("handle_game_invitation", ref.invitation("R1M1"))
    mine = (await ref.call("choose_parity", ref.parity_call("R1M1"))).reply["parity_choice"]
    over = ref.game_over("R1M1", mine, "even", 4)
    for _ in range(2):
        assert (await ref.call("notify_match_result", over)).reply["message_type"] == "ACK"
    assert p.memory.stats["played"] == 1 and [m["match_id"] for m in p.memory.matches] == ["R1M1"]
    await ref.play("R2M1", "P02", their_choice="odd", number=3)  # the next match counts
    assert p.memory.stats["played"] == 2


async def test_it_waits_for_the_result_of_its_last_match_after_league_completed(
    scripted_lm, serve_players, referee_client
):
    """A referee tells a result once the LM has recorded it, so LEAGUE_COMPLETED can overtake the
    last GAME_OVER: the player stays until the match it is in is told, and counts it."""
    p = registered(scripted_lm, serve_players, name="Delta")
    ref = ScriptedReferee(referee_client, p.endpoint)
    await ref.call("handle_game_invitation", ref.invitation("R1M1"))
    mine = (await ref.call("choose_parity", ref.parity_call("R1M1"))).reply["parity_choice"]
    done = league_completed(p)
    assert (await referee_client.call(p.endpoint, "notify_league_completed", done)).reply["message_type"] == "ACK"
    assert p.lifecycle != Lifecycle.SHUTDOWN and "R1M1" in p.in_play  # its match is not told yet
    await ref.call("notify_match_result", ref.game_over("R1M1", mine, "even", 4))
    await asyncio.to_thread(wait_until, lambda: p.lifecycle == Lifecycle.SHUTDOWN, what="shut down once told")
    assert p.memory.stats["played"] == 1


async def test_it_asks_the_lm_a_league_query(scripted_lm, serve_players):
    p = registered(scripted_lm, serve_players)
    from leagueproto.client import AgentClient

    p.client = AgentClient()
    try:
        reply = await p.query("GET_NEXT_MATCH")
    finally:
        await p.client.close()
    assert reply["message_type"] == "LEAGUE_QUERY_RESPONSE" and reply["success"] is True
    query = scripted_lm.queries[-1]
    assert query["query_type"] == "GET_NEXT_MATCH" and query["query_params"] == {"player_id": "P01"}
    assert query["sender"] == "player:P01" and query["auth_token"] == p.token


def test_strategies_are_chosen_by_name():
    assert make_strategy("adaptive").name == "adaptive"
    with pytest.raises(ValueError, match="unknown strategy"):
        make_strategy("clairvoyant")


class AsyncParity(Strategy):
    name = "async_parity"

    async def choose_parity(self, situation):
        await asyncio.sleep(0)
        return "odd"


class PlainParity(Strategy):
    name = "plain_parity"
    blocking = False

    def choose_parity(self, situation):
        return "even"


def test_decide_awaits_coroutine_strategies_and_calls_plain_ones_whatever_came_before():
    """decide() remembers which strategy methods are coroutine functions; swapping the strategy
    (or its class) must still run each the right way."""
    import functools

    from players.strategies.base import ParitySituation

    p = player("Switcher")
    situation = ParitySituation(player_id="P01", opponent_id="P02", match_id="R1M1", budget=1.0)
    for strategy, expected in [(AsyncParity(), "odd"), (PlainParity(), "even"), (AsyncParity(), "odd")]:
        p.strategy = strategy
        assert asyncio.run(p.decide("choose_parity", situation, lambda: "none", lambda x: x)) == (expected, "strategy")

    async def coroutine(situation):
        return "odd"

    def plain(situation):
        return "even"

    # A strategy's method set on the instance is no bound method: a function or a partial, each
    # run the right way too (a coroutine taken for a plain function would be the answer itself).
    for func, expected in [
        (coroutine, "odd"),
        (functools.partial(coroutine), "odd"),
        (plain, "even"),
        (functools.partial(plain), "even"),
    ]:
        strategy = PlainParity()
        strategy.choose_parity = func
        p.strategy = strategy
        assert asyncio.run(p.decide("choose_parity", situation, lambda: "none", lambda x: x)) == (expected, "strategy")


async def call_tool(p: Player, method: str, arguments: dict) -> tuple[dict, bool, CallContext]:
    """Call one of the player's tools as its MCP server would: (reply, is_error, the call's context)."""
    tool = p.toolset.find_tool(method)
    assert tool is not None, method
    ctx = CallContext(method=method, dialect="direct")
    reply, is_error = await p.toolset.call(tool, arguments, ctx)
    return reply, is_error, ctx


async def test_replies_are_the_messages_the_toolset_would_build():
    """The player builds its replies with make_message itself (cheaper than toolset.reply): they
    are the messages toolset.reply would build, the same envelope, fields and order."""
    from leagueproto.envelope import parse_timestamp
    from players import messages as m

    p = player("Replier")
    p.player_id, p.token = "P07", "tok-7"
    invitation = make_message(
        "GAME_INVITATION",
        "referee:REF01",
        conversation_id="conv-x",
        league_id="L",
        match_id="R1M1",
        round_id=1,
        player_id="P07",
        auth_token="m-1",
    )
    mine, is_error, _ = await call_tool(p, "handle_game_invitation", dict(invitation))
    assert not is_error, mine
    request = m.GameInvitation.model_validate(invitation)
    fields = {"league_id": "L", "round_id": 1, "match_id": "R1M1", "player_id": "P07"}
    fields.update(arrival_timestamp=mine["arrival_timestamp"], accept=True)
    theirs = p.toolset.reply(request, "GAME_JOIN_ACK", auth_token="m-1", **fields)
    assert list(mine) == list(theirs)  # the same fields in the same order
    # Each stamped with its own clock reading (whole seconds): the rest is the same.
    assert parse_timestamp(mine.pop("timestamp")) and parse_timestamp(theirs.pop("timestamp"))
    assert mine == theirs
    assert mine["sender"] == "player:P07" and mine["conversation_id"] == "conv-x" and mine["auth_token"] == "m-1"
    # A call without a token (an LM that gave us no league_manager_token sends none either): the
    # reply, an ACK, has no auth_token key at all, and never the player's own token.
    completed = make_message("ROUND_COMPLETED", "league_manager", conversation_id="conv-y", round_id=1)
    ack, is_error, _ = await call_tool(p, "notify_round_completed", completed)
    assert not is_error, ack
    assert ack["message_type"] == "ACK" and ack["conversation_id"] == "conv-y"
    assert "auth_token" not in ack


async def test_a_round_announcement_keeps_exactly_the_matches_a_player_is_in():
    """The matches of a ROUND_ANNOUNCEMENT a player keeps as its own (memory.league["my_matches"])
    are those the plain scan with ``in`` picks, whatever the rows hold."""
    import random

    p = player("Scanner")
    rng = random.Random(3)
    ids = ["P01", "P02", "P03", None, 1, "R1M1"]
    for _ in range(300):
        rows = []
        for n in range(rng.randrange(0, 8)):
            row = {"match_id": rng.choice(["R1M1", f"R1M{n}", "P01"]), "game_type": "even_odd"}
            for key in ("player_A_id", "player_B_id"):
                if rng.random() < 0.85:
                    row[key] = rng.choice(ids)
            rows.append(row)
        for me in ("P01", None):  # registered, or not (a practice run)
            p.player_id = me
            announcement = make_message("ROUND_ANNOUNCEMENT", "league_manager", round_id=1, matches=rows)
            reply, is_error, _ = await call_tool(p, "notify_round", announcement)
            assert not is_error, reply
            expected = [x for x in rows if me in (x.get("player_A_id"), x.get("player_B_id"))]
            assert p.memory.league["my_matches"] == expected


async def test_senders_are_parsed_once_and_bad_ones_always_refused():
    """The player remembers the senders it has parsed (a few referees and the LM call it over
    and over): a sender heard before is still the caller it names, each one its own, and a bad
    or wrong one is refused on every call, however often it comes."""
    from leagueproto.errors import ErrorCode

    p = player("Gatekeeper")
    p.player_id = "P01"

    def round_completed(sender: object) -> dict:
        message = make_message("ROUND_COMPLETED", "league_manager", round_id=1)
        message["sender"] = sender
        return message

    def parity_call(sender: object) -> dict:
        message = make_message("CHOOSE_PARITY_CALL", "referee:REF01", match_id="R1M1", player_id="P01")
        message.update(sender=sender, auth_token="m-1")
        return message

    for _ in range(2):
        for sender in ("referee:REF01", "referee:REF02"):
            reply, is_error, ctx = await call_tool(p, "choose_parity", parity_call(sender))
            assert not is_error, reply
            assert ctx.identity == sender  # the referee it names, not one heard before
        reply, is_error, ctx = await call_tool(p, "notify_round_completed", round_completed("league_manager"))
        assert not is_error, reply
        assert ctx.identity == "league_manager"
        for bad in ("referee:", "referee:REF 01", "judge:REF01", 7, None):
            for method, message in (
                ("choose_parity", parity_call(bad)),
                ("notify_round_completed", round_completed(bad)),
            ):
                reply, is_error, _ = await call_tool(p, method, message)
                assert is_error and reply["error_code"] in (
                    ErrorCode.INVALID_MESSAGE_FORMAT,
                    ErrorCode.MISSING_REQUIRED_FIELD,  # None: no sender at all
                ), (bad, reply)
        # A well-formed sender of the wrong kind: refused by each tool's caller check.
        for method, message in (
            ("choose_parity", parity_call("league_manager")),
            ("notify_round_completed", round_completed("referee:REF01")),
        ):
            reply, is_error, _ = await call_tool(p, method, message)
            assert is_error and reply["error_code"] == ErrorCode.AUTH_TOKEN_INVALID, reply


@pytest.mark.parametrize(
    ("reply", "player_id"),
    [
        ({"status": "ACCEPTED", "player_id": "P01"}, "P01"),
        ({"status": "registered", "id": "S-1"}, "S-1"),
        ({"status": "success", "assigned_player_id": 7}, "7"),
        ({"player": {"id": "alpha-1"}}, "alpha-1"),
        ({"data": {"player_id": "P03"}}, "P03"),
        ({"status": "ACCEPTED"}, None),
        ({"player_id": True}, None),
    ],
)
def test_it_reads_its_id_however_the_league_manager_writes_it(reply, player_id):
    assert registered_id(reply) == player_id
