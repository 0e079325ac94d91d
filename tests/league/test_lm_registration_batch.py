"""Registrations that arrive together run as one batch (``actions.register_all``, and over
``/mcp`` league/mcp/registrations.py): each gets the answer it would get on its own."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from league import actions
from league.actions import RegistrationRequest
from league.mcp import toolset
from league.mcp.registrations import PendingRegistration, RegistrationQueue
from league.models import Event, Player, hash_token
from leagueproto.errors import LeagueError
from tests.league.lm_support import make_league, message, player_meta, referee_meta


def _requests(league_id: str) -> list[RegistrationRequest]:
    """A burst for a league of three seats with one taken: a newcomer, its endpoint again from
    elsewhere and then from its own machine, a second newcomer (the league is full now), a third,
    a referee without a key, an old protocol, an unknown league, an asked-for id twice."""
    taken = "http://127.0.0.1:30001/mcp"

    def player(endpoint: str, name: str, **fields: Any) -> RegistrationRequest:
        meta = player_meta(endpoint, display_name=name, **fields.pop("meta", {}))
        return RegistrationRequest("player", fields.pop("league_id", league_id), meta, None, **fields)

    return [
        player(taken, "newcomer", sender_id="P07"),
        player(taken, "thief", client_host="10.1.2.3"),
        player(taken, "newcomer again", client_host="127.0.0.1"),
        player("http://127.0.0.1:30002/mcp", "second", sender_id="P07"),
        player("http://127.0.0.1:30003/mcp", "one too many"),
        RegistrationRequest("referee", league_id, referee_meta("http://127.0.0.1:30004/mcp"), None, referee_key="no"),
        player("http://127.0.0.1:30005/mcp", "old", meta={"protocol_version": "1.0.0"}),
        player("http://127.0.0.1:30006/mcp", "lost", league_id="no_such_league"),
    ]


def _answer(outcome: actions.Registration | LeagueError) -> tuple:
    if isinstance(outcome, LeagueError):
        return ("error", outcome.code)
    return (outcome.status, outcome.reason, outcome.agent_id, outcome.auth_token is not None)


@pytest.mark.django_db
def test_a_batch_answers_each_registration_as_one_by_one_would():
    answers = {}
    for league_id, batched in (("one_by_one", False), ("batched", True)):
        make_league(league_id, max_players=3)
        actions.register_player(league_id, player_meta("http://127.0.0.1:30000/mcp"), None)
        requests = _requests(league_id)
        # One by one: each a batch of its own, as register_player runs it.
        outcomes = actions.register_all(requests) if batched else [actions.register_all([r])[0] for r in requests]
        answers[league_id] = [_answer(outcome) for outcome in outcomes]
        tokens = [o.auth_token for o in outcomes if isinstance(o, actions.Registration)]
        again = Player.objects.get(league__league_id=league_id, player_id="P07")
        # The newcomer registered again from its machine: the newer token is its own, the
        # first one still good for registering again (its reply may be lost).
        assert again.check_token(tokens[2]) and again.display_name == "newcomer again"
        assert Player.objects.filter(league__league_id=league_id).count() == 3
    assert answers["batched"] == answers["one_by_one"]
    assert [a[:3] for a in answers["batched"]] == [
        ("ACCEPTED", None, "P07"),
        ("REJECTED", actions.registration.ENDPOINT_TAKEN_ADVICE.format(kind="player", agent_id="P07"), "P07"),
        ("ACCEPTED", None, "P07"),
        ("ACCEPTED", None, "P08"),  # P07 asked for again: taken by the newcomer of the same batch
        ("REJECTED", actions.LEAGUE_FULL, None),
        ("error", "E012"),
        ("error", "E018"),
        ("error", "E008"),
    ]


@pytest.mark.django_db
def test_a_batch_writes_its_new_players_and_events_in_one_insert_each(django_assert_num_queries):
    league = make_league("batch_queries", max_players=100)
    actions.register_player(league.league_id, player_meta(), None)
    burst = [
        RegistrationRequest("player", league.league_id, player_meta(display_name=f"p{n}"), None) for n in range(40)
    ]
    # The league locked, the agents at the batch's seats (players, referees), the players' count
    # and highest id, the insert of the players, the league's version, the insert of their events.
    with django_assert_num_queries(8):
        outcomes = actions.register_all(burst)
    assert [o.agent_id for o in outcomes] == [f"P{n:02d}" for n in range(2, 42)]
    assert Event.objects.filter(league=league, kind="player_registered").count() == 41


def test_registrations_sent_together_over_mcp_get_each_its_own_answer(lm_server):
    league = make_league("mcp_batch", max_players=4)
    same = "http://127.0.0.1:30101/mcp"
    metas = [player_meta(same, display_name="twin")] * 2 + [player_meta(display_name=f"p{n}") for n in range(4)]
    items = [
        {
            "jsonrpc": "2.0",
            "id": n,
            "method": "register_player",
            "params": message("LEAGUE_REGISTER_REQUEST", f"player:p{n}", league_id=league.league_id, player_meta=meta),
        }
        for n, meta in enumerate(metas)
    ]
    body = httpx.post(lm_server, json=items, timeout=30).json()
    replies = {item["id"]: item["result"] for item in body}
    # A batch's items may be judged in any order (JSON-RPC 2.0, "Batch"; here the rate limiter's
    # Redis calls come back in any order): five endpoints for four seats, so whichever came last
    # is told the league is full, and every other answer is its own.
    full = [n for n, reply in replies.items() if reply["status"] != "ACCEPTED"]
    assert all((replies[n]["status"], replies[n]["reason"]) == ("REJECTED", actions.LEAGUE_FULL) for n in full)
    assert full in ([0, 1], [2], [3], [4], [5])  # one endpoint (the twin's two calls alike)
    players = {p.player_id: p for p in Player.objects.filter(league=league)}
    assert sorted(players) == ["P01", "P02", "P03", "P04"]
    for n, reply in replies.items():
        if n not in full:
            assert players[reply["player_id"]].endpoint == metas[n]["contact_endpoint"]
            assert players[reply["player_id"]].display_name == metas[n]["display_name"]
    twin_registered = full != [0, 1]
    if twin_registered:
        # The same endpoint twice from its own machine: one player, registered and then registered
        # again (in whichever order the two arrived): the later token is its own, the earlier one
        # still good for registering again.
        assert replies[0]["player_id"] == replies[1]["player_id"]
        twin = players[replies[0]["player_id"]]
        tokens = {hash_token(replies[n]["auth_token"]) for n in (0, 1)}
        assert tokens == {twin.token_hash, twin.previous_token_hash}
    kinds = ("player_registered", "player_registered_again", "LEAGUE_REGISTER_REQUEST", "LEAGUE_REGISTER_RESPONSE")
    assert Event.objects.filter(league=league, kind__in=kinds).count() == 2 * len(items) + 4 + twin_registered


@pytest.mark.django_db(transaction=True)
def test_registrations_queued_together_are_judged_in_order_in_one_transaction():
    league = make_league("queued", max_players=2)
    tool = toolset.find_tool("register_player")
    same = "http://127.0.0.1:30301/mcp"
    metas = [player_meta(same), player_meta(same), player_meta(), player_meta()]
    calls = []
    for n, meta in enumerate(metas):
        arguments = message("LEAGUE_REGISTER_REQUEST", f"player:q{n}", league_id=league.league_id, player_meta=meta)
        msg = tool.model.model_validate(arguments)
        calls.append(PendingRegistration(tool, arguments, msg, None, client_host="127.0.0.1"))

    async def together() -> list[dict[str, Any]]:
        queue = RegistrationQueue()
        return await asyncio.gather(*(queue.submit(call) for call in calls))

    replies = asyncio.run(together())
    assert [(r["status"], r["player_id"], r["reason"]) for r in replies] == [
        ("ACCEPTED", "P01", None),
        ("ACCEPTED", "P01", None),  # the same seat from its machine: registered again
        ("ACCEPTED", "P02", None),
        ("REJECTED", None, actions.LEAGUE_FULL),
    ]
    twin = Player.objects.get(league=league, player_id="P01")
    assert twin.check_token(replies[1]["auth_token"]) and twin.previous_token_hash == hash_token(
        replies[0]["auth_token"]
    )
    logged = Event.objects.filter(league=league).exclude(kind__in=("league_created", "registration_opened"))
    assert logged.count() == 3 + 2 * len(calls) and len(set(logged.values_list("at", flat=True))) == 1
