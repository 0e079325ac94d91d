"""Strict input on the LM's tools: no silent coercion, extra fields tolerated but never stored unbounded."""

from __future__ import annotations

import httpx
import pytest

from league.mcp.exchange import has_nul
from league.models import Event, League, MatchResult, Player
from leagueproto.jsonutil import dumps
from leagueproto.tools import CallContext
from tests.league.lm_support import (
    assigned_match,
    call,
    make_league,
    message,
    player_meta,
    referee_meta,
    register_player,
    register_referee,
    win_report,
)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"round_id": "one"}, "round_id"),
        ({"round_id": True}, "round_id"),
        ({"match_id": 11}, "match_id"),
        ({"league_id": 7}, "league_id"),
        ({"score": {"P01": "3", "P02": 0}}, "result.score.P01"),
        ({"score": {"P01": 3.0, "P02": 0}}, "result.score.P01"),
        ({"winner": 1}, "result.winner"),
    ],
)
def test_a_report_with_a_mistyped_field_is_e002_and_records_nothing(lm_server, change, field):
    make_league()
    ref = register_referee(lm_server, "ref")
    register_player(lm_server, "a")
    register_player(lm_server, "b")
    assigned_match(League.objects.get())
    report = win_report(ref)
    result_fields = {k: v for k, v in change.items() if k in ("score", "winner")}
    report.update({k: v for k, v in change.items() if k not in result_fields})
    report["result"].update(result_fields)
    reply = call(lm_server, "report_match_result", report)
    assert reply["error_code"] == "E002", reply
    assert field in [e["field"] for e in reply["context"]["errors"]]
    assert not MatchResult.objects.exists()


@pytest.mark.parametrize(
    ("kind", "meta"),
    [
        ("player", {"game_types": ["even_odd", 1]}),
        ("player", {"game_types": "even_odd"}),
        ("player", {"display_name": 42}),
        ("player", {"game_types": ["even_odd"] * 17}),
        ("referee", {"max_concurrent_matches": "2"}),
        ("referee", {"max_concurrent_matches": 2.5}),
    ],
)
def test_a_registration_with_a_mistyped_field_is_e002_and_registers_no_one(lm_server, kind, meta):
    make_league()
    if kind == "player":
        reply = register_player(lm_server, "x", player_meta=player_meta(**meta))
    else:
        reply = register_referee(lm_server, "x", referee_meta=referee_meta(**meta))
    assert reply["error_code"] == "E002", reply
    assert not Player.objects.exists() and not League.objects.get().referees.exists()


def test_extra_fields_are_tolerated_but_not_stored_and_big_payloads_are_summarised(lm_server, settings):
    settings.EVENT_PAYLOAD_MAX_BYTES = 2048
    make_league()
    meta = player_meta(favourite_colour="green", plugin={"x": "y" * 4000})
    reply = call(
        lm_server,
        "register_player",
        message("LEAGUE_REGISTER_REQUEST", "player:x", player_meta=meta, notes="z" * 20_000),
    )
    assert reply["status"] == "ACCEPTED"
    player = Player.objects.get()
    assert "favourite_colour" not in str(player.game_types) and player.display_name == "Agent Alpha"
    logged = Event.objects.get(direction="IN", kind="LEAGUE_REGISTER_REQUEST").payload
    assert logged["truncated"] is True and logged["size_bytes"] > 20_000
    assert logged["message_type"] == "LEAGUE_REGISTER_REQUEST" and "notes" in logged["fields"]
    assert len(str(logged)) < 2048
    # A small message is logged whole.
    out = Event.objects.get(direction="OUT", kind="LEAGUE_REGISTER_RESPONSE").payload
    assert out["player_id"] == "P01" and "truncated" not in out and "auth_token" not in out


def test_nul_characters_are_refused_on_every_database(lm_server):
    make_league()
    reply = register_player(lm_server, "x", player_meta=player_meta(display_name="nul\x00name"))
    assert reply["error_code"] == "E002" and "NUL" in reply["error_description"]
    assert not Player.objects.exists()


def test_a_nul_in_a_report_s_match_log_is_refused_and_nothing_is_recorded(lm_server):
    league = make_league()
    ref = register_referee(lm_server, "ref1")
    for name in ("p1", "p2"):
        register_player(lm_server, name)
    assigned_match(league)
    report = win_report(ref)
    report["match_log"][0]["message"]["note"] = "a\x00b"
    reply = call(lm_server, "report_match_result", report)
    assert reply["error_code"] == "E002" and "NUL" in reply["error_description"]
    assert not MatchResult.objects.exists()


def over_http(body: bytes) -> CallContext:
    return CallContext(method="register_player", dialect="direct", body=body, body_has_nul=b"\\u0000" in body)


def test_the_nul_check_trusts_a_request_body_without_the_escape():
    args = {"display_name": "nul\x00name"}
    assert has_nul(args) and has_nul(args, over_http(dumps(args)))
    assert not has_nul({"display_name": "plain"}, over_http(b'{"display_name":"plain"}'))
    # JSON writes a NUL only as the escape: a body without one is not encoded again to look.
    assert not has_nul(args, over_http(b'{"display_name":"plain"}'))


def test_a_batch_item_with_a_nul_is_refused_and_the_others_are_not(lm_server):
    """The body is read for the escape once per request: in a batch, the item holding a NUL is
    refused (E002) and a plain item of the same POST is answered as usual."""
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "list_leagues", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "register_player", "params": {"display_name": "a\x00b"}},
    ]
    replies = {r["id"]: r for r in httpx.post(lm_server, json=batch, timeout=10).json()}
    assert "NUL" in str(replies[2]) and "E002" in str(replies[2])
    assert replies[1]["result"].get("message_type") == "LEAGUE_LIST"
