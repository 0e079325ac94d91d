"""Nothing lost: results committed before they are acknowledged, an append-only event log, and a
league that can be exported and its standings recomputed from the results alone."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, connections

from league import actions
from league.mcp.database import database_job
from league.models import Event, League, Match, MatchResult, Player, Referee
from tests.league.lm_support import (
    assigned_match,
    call,
    log_for,
    make_league,
    register_player,
    register_referee,
    rpc,
    site_referee_key,
    win_report,
)


def _committed_results(match_id: str) -> int:
    """Count the match's results from another connection: it sees committed rows only."""
    seen: list[int] = []

    def look() -> None:
        try:
            seen.append(MatchResult.objects.filter(match__match_id=match_id).count())
        finally:
            connections.close_all()

    thread = threading.Thread(target=look)
    thread.start()
    thread.join()
    return seen[0]


def _league_with_assigned_match(lm_server: str) -> dict:
    make_league()
    ref = register_referee(lm_server, "ref")
    register_player(lm_server, "a")
    register_player(lm_server, "b")
    assigned_match(League.objects.get(league_id="test_league"))
    return ref


def test_an_acknowledged_result_is_already_committed(lm_server):
    ref = _league_with_assigned_match(lm_server)
    ack = call(lm_server, "report_match_result", win_report(ref))
    assert ack["message_type"] == "MATCH_RESULT_ACK" and ack["status"] == "RECORDED"
    assert _committed_results("R1M1") == 1


@contextmanager
def _on_the_lms_database_thread(wrapper: Callable[..., Any]) -> Iterator[None]:
    """``wrapper`` (``connection.execute_wrapper``'s) around every query of /mcp's work: the LM runs
    it on its database thread (league/mcp/database.py), on that thread's connection."""
    wrapped = ExitStack()
    asyncio.run(database_job(lambda: wrapped.enter_context(connection.execute_wrapper(wrapper))))
    try:
        yield
    finally:
        asyncio.run(database_job(wrapped.close))


def _disk_full(execute: Callable, sql: str, params: Any, many: bool, context: dict) -> Any:
    """The database refuses to store a result, however it is written (one row or many)."""
    if sql.lstrip().upper().startswith("INSERT") and MatchResult._meta.db_table in sql:
        raise DatabaseError("disk full")
    return execute(sql, params, many, context)


def test_a_result_that_cannot_be_committed_is_not_acknowledged(lm_server):
    ref = _league_with_assigned_match(lm_server)
    with _on_the_lms_database_thread(_disk_full):
        body = rpc(lm_server, "report_match_result", win_report(ref))
    assert "result" not in body and body["error"]["code"] == -32603  # no ack of any kind
    assert _committed_results("R1M1") == 0
    assert Match.objects.get(match_id="R1M1").status == "ASSIGNED"
    # The referee retries (as it does on any failure) and the result is recorded once.
    assert call(lm_server, "report_match_result", win_report(ref))["status"] == "RECORDED"
    assert _committed_results("R1M1") == 1


def test_the_event_log_is_append_only(db):
    event = Event.objects.create(direction="STATE", kind="x")
    with pytest.raises(TypeError):
        Event.objects.filter(pk=event.pk).update(kind="y")
    with pytest.raises(TypeError):
        Event.objects.filter(pk=event.pk).delete()
    event.kind = "y"
    with pytest.raises(TypeError):
        event.save()
    with pytest.raises(TypeError):
        event.delete()
    assert Event.objects.get(pk=event.pk).kind == "x"


# -- export and recompute ----------------------------------------------------------------------------
@pytest.fixture
def played_league(db) -> League:
    """Four players, one referee, four results: a win, a draw, a technical loss, both failing."""
    league = make_league("cup")
    for n in range(4):
        actions.register_player("cup", _meta(f"p{n}", 9700 + n), None)
    actions.register_referee("cup", _meta("ref", 9710), None, referee_key=site_referee_key())
    referee = Referee.objects.get(league=league)
    p = {x.player_id: x for x in Player.objects.filter(league=league)}
    results = [
        ("P01", "P02", {"status": "WIN", "winner": "P01", "score": {"P01": 3, "P02": 0}}),
        ("P03", "P04", {"status": "DRAW", "winner": None, "score": {"P03": 1, "P04": 1}}),
        (
            "P01",
            "P03",
            {"status": "TECHNICAL_LOSS", "winner": "P01", "score": {"P01": 3, "P03": 0}, "technical_loss": ["P03"]},
        ),
        (
            "P02",
            "P04",
            {
                "status": "TECHNICAL_LOSS",
                "winner": None,
                "score": {"P02": 0, "P04": 0},
                "technical_loss": ["P02", "P04"],
            },
        ),
    ]
    for n, (a, b, result) in enumerate(results, start=1):
        actions.create_match(league, (n + 1) // 2, p[a], p[b], match_id=f"R{(n + 1) // 2}M{n}", referee=referee)
        result = {"technical_loss": [], "details": {}, **result}
        actions.record_result(referee, f"R{(n + 1) // 2}M{n}", result, log_for(a, b, result))
    return league


def _meta(name: str, port: int) -> dict:
    return {
        "display_name": name,
        "protocol_version": "2.1.0",
        "game_types": ["even_odd"],
        "contact_endpoint": f"http://127.0.0.1:{port}/mcp",
    }


def test_export_writes_the_whole_league_without_secrets(played_league, tmp_path):
    out = tmp_path / "cup.json"
    call_command("league", "export", "cup", "--out", str(out))
    text = out.read_text()
    data = json.loads(text)
    assert data["format"] == "league-export/1" and data["league"]["league_id"] == "cup"
    assert [p["player_id"] for p in data["players"]] == ["P01", "P02", "P03", "P04"]
    assert [r["referee_id"] for r in data["referees"]] == ["REF01"]
    assert [m["match_id"] for rnd in data["schedule"] for m in rnd["matches"]] == ["R1M1", "R1M2", "R2M3", "R2M4"]
    assert len(data["results"]) == 4 and data["results"][0]["log"][0]["seq"] == 1
    assert [s["player_id"] for s in data["standings"]][0] == "P01"
    assert any(e["kind"] == "match_finished" for e in data["events"])
    hashes = [x.token_hash for x in Player.objects.all()] + [x.token_hash for x in Referee.objects.all()]
    assert "token_hash" not in text and not any(h in text for h in hashes) and "match-secret" not in text


def test_recompute_finds_no_difference_in_a_sound_league(played_league, tmp_path, capsys):
    call_command("league", "recompute", "cup")
    out = capsys.readouterr().out
    assert "no difference" in out and "from 4 result(s)" in out
    export = tmp_path / "cup.json"
    call_command("league", "export", "cup", "--out", str(export))
    call_command("league", "recompute", "cup", "--from", str(export))
    assert "the export's standings and the served standings" in capsys.readouterr().out


def test_recompute_reports_tampered_points_in_the_database(played_league, capsys):
    # A stored result whose points no longer follow its outcome (e.g. a hand edit in the database).
    MatchResult.objects.filter(match__match_id="R1M2").update(points_a=3)
    with pytest.raises(CommandError, match="difference"):
        call_command("league", "recompute", "cup")
    out = capsys.readouterr().out
    assert "DIFFERENCE R1M2: stored points 3/1 but DRAW scores 1/1" in out
    assert "DIFFERENCE P03: points 3 in the served standings, 1 recomputed" in out


def test_recompute_reports_standings_an_export_got_wrong(played_league, tmp_path, capsys):
    export = tmp_path / "cup.json"
    call_command("league", "export", "cup", "--out", str(export))
    data = json.loads(export.read_text())
    data["standings"][0]["points"] += 1
    export.write_text(json.dumps(data))
    with pytest.raises(CommandError):
        call_command("league", "recompute", "cup", "--from", str(export))
    assert "in the export's standings" in capsys.readouterr().out
