"""Helpers for the League Manager's tests: messages, JSON-RPC calls, leagues and agents."""

from __future__ import annotations

import itertools
import os
from typing import Any

import httpx

from league import actions
from league.models import League, Match, Player, Referee
from leagueproto.envelope import new_conversation_id, utc_now
from referee.games.even_odd import EvenOdd
from referee.runner import COLLECTING_CHOICES, DRAWING_NUMBER, FINISHED, WAITING_FOR_PLAYERS, MatchLog

_ids = itertools.count(1)
_ports = itertools.count(9101)


def message(message_type: str, sender: str, **fields: Any) -> dict[str, Any]:
    return {
        "protocol": "league.v2",
        "message_type": message_type,
        "sender": sender,
        "timestamp": utc_now(),
        "conversation_id": new_conversation_id("test"),
        **fields,
    }


def post(url: str, payload: Any, **kwargs: Any) -> httpx.Response:
    return httpx.post(url, json=payload, timeout=10, **kwargs)


def rpc(url: str, method: str, params: Any, **kwargs: Any) -> dict[str, Any]:
    """A dialect-A call; returns the whole JSON-RPC response (asserting HTTP 200)."""
    response = post(url, {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}, **kwargs)
    assert response.status_code == 200, response.text
    return response.json()


def call(url: str, method: str, params: Any, **kwargs: Any) -> dict[str, Any]:
    """A dialect-A call; returns the reply message."""
    body = rpc(url, method, params, **kwargs)
    assert "result" in body, body
    return body["result"]


def player_meta(endpoint: str | None = None, **overrides: Any) -> dict[str, Any]:
    return {
        "display_name": "Agent Alpha",
        "version": "1.0.0",
        "protocol_version": "2.1.0",
        "game_types": ["even_odd"],
        "contact_endpoint": endpoint or f"http://127.0.0.1:{next(_ports)}/mcp",
        **overrides,
    }


def referee_meta(endpoint: str | None = None, **overrides: Any) -> dict[str, Any]:
    return {
        "display_name": "Referee",
        "version": "1.0.0",
        "game_types": ["even_odd"],
        "contact_endpoint": endpoint or f"http://127.0.0.1:{next(_ports)}/mcp",
        "max_concurrent_matches": 2,
        **overrides,
    }


def register_player(url: str, name: str = "alpha", **fields: Any) -> dict[str, Any]:
    meta = fields.pop("player_meta", None) or player_meta(display_name=name)
    return call(
        url, "register_player", message("LEAGUE_REGISTER_REQUEST", f"player:{name}", player_meta=meta, **fields)
    )


def site_referee_key() -> str:
    """The run's site-wide referee key (tests/conftest.py ``referee_key``)."""
    return os.environ["REFEREE_KEY"]


def register_referee(url: str, name: str = "ref", **fields: Any) -> dict[str, Any]:
    """A REFEREE_REGISTER_REQUEST with the run's referee key (unless ``referee_key`` is given)."""
    meta = fields.pop("referee_meta", None) or referee_meta(display_name=name)
    fields.setdefault("referee_key", site_referee_key())
    return call(
        url, "register_referee", message("REFEREE_REGISTER_REQUEST", f"referee:{name}", referee_meta=meta, **fields)
    )


def make_league(league_id: str = "test_league", *, open_seconds: float | None = 600, **settings: Any) -> League:
    league = actions.create_league(name=league_id.replace("_", " ").title(), league_id=league_id, **settings)
    if open_seconds is not None:
        league = actions.open_registration(league, open_seconds)
    return league


def assigned_match(
    league: League, referee_id: str = "REF01", a: str = "P01", b: str = "P02", match_id: str = "R1M1"
) -> Match:
    """A match of round 1 assigned to ``referee_id`` (what the conductor will do)."""
    referee = Referee.objects.get(league=league, referee_id=referee_id)
    pa = Player.objects.get(league=league, player_id=a)
    pb = Player.objects.get(league=league, player_id=b)
    return actions.create_match(league, 1, pa, pb, match_id=match_id, referee=referee)


def played_log(choices: dict[str, str], drawn_number: int, failed: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The log our referee (referee/runner.py) keeps of an even_odd match whose players (A
    first) chose ``choices`` before ``drawn_number`` was drawn: what a report must carry. With
    ``failed``, those players never answered the invitation and nothing was played. The
    invitation keeps the match token, as a careless referee would leave it, for the LM to strip."""
    a, b = choices
    rules = EvenOdd()
    state = rules.new_state(a, b)
    log = MatchLog()
    log.event(WAITING_FOR_PLAYERS)
    for pid in (a, b):
        out = log.add("OUT", pid, method="handle_game_invitation", message_type="GAME_INVITATION", message={})
        out["message"] = {"message_type": "GAME_INVITATION", "auth_token": "match-secret"}
        if pid in failed:
            out.update(outcome="timeout", error="E001: no reply within 5.0 s")
            continue
        ack = {"message_type": "GAME_JOIN_ACK", "accept": True}
        log.add("IN", pid, method="handle_game_invitation", message_type="GAME_JOIN_ACK", message=ack)
    if not failed:
        log.event(COLLECTING_CHOICES)
        for pid in (a, b):
            log.add("OUT", pid, method="choose_parity", message_type="CHOOSE_PARITY_CALL", message={})
            answer = {"message_type": "CHOOSE_PARITY_RESPONSE", "parity_choice": choices[pid]}
            log.add("IN", pid, method="choose_parity", message_type="CHOOSE_PARITY_RESPONSE", message=answer)
        log.event(DRAWING_NUMBER)
        rules.replay(state, choices, {"drawn_number": drawn_number})
        log.event("RESOLVED", **rules.details(state))
    log.event(FINISHED)
    return log.entries


def log_for(a: str, b: str, result: dict[str, Any]) -> list[dict[str, Any]]:
    """A log that bears out an even_odd ``result`` of A against B: a winner chose even, the
    loser odd, 8 was drawn; a draw is both on even; a technical loss is no answer to the invitation."""
    if result["status"] == "WIN":
        loser = b if result["winner"] == a else a
        return played_log({a: "even" if a == result["winner"] else "odd", b: "odd" if loser == b else "even"}, 8)
    if result["status"] == "DRAW":
        return played_log({a: "even", b: "even"}, 3)
    return played_log({a: "even", b: "odd"}, 8, failed=tuple(result.get("technical_loss") or ()))


def win_report(referee: dict[str, Any], match_id: str = "R1M1", winner: str = "P01", loser: str = "P02", **extra: Any):
    """A MATCH_RESULT_REPORT message from a registered referee (``referee`` = its registration
    reply): ``winner`` chose even, ``loser`` odd, and 8 was drawn, as its log shows."""
    return message(
        "MATCH_RESULT_REPORT",
        f"referee:{referee['referee_id']}",
        auth_token=referee["auth_token"],
        league_id=referee["league_id"],
        round_id=1,
        match_id=match_id,
        game_type="even_odd",
        result={
            "status": "WIN",
            "winner": winner,
            "score": {winner: 3, loser: 0},
            "technical_loss": [],
            "details": {"drawn_number": 8, "number_parity": "even", "choices": {winner: "even", loser: "odd"}},
        },
        match_log=played_log({winner: "even", loser: "odd"}, 8),
        **extra,
    )
