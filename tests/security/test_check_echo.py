"""The check (league/checkagent.py, ``/check/``) calls any address inside the leagues' networks:
it must never be a way to read what another service there answers. It shows a reply only when
it is a league agent's message; anything else is judged "not a league agent's message", with
nothing of it echoed. Real HTTP against services that answer JSON-RPC but are no agents."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.test import Client

from league.checkagent import FAIL, WARN, run_check
from leagueproto.serve import ThreadedServer
from leagueproto.timeouts import Timeouts

SECRET = "s3cr3t-internal-value-7f1d"
ONE_SECOND = Timeouts.every(1.0)


def _result(value: Any) -> Callable[[dict], tuple[str, bytes]]:
    def answer(request: dict) -> tuple[str, bytes]:
        body = {"jsonrpc": "2.0", "id": request.get("id"), "result": value}
        return "application/json", json.dumps(body).encode()

    return answer


def _error(request: dict) -> tuple[str, bytes]:
    body = {"jsonrpc": "2.0", "id": request.get("id"), "error": {"code": -32000, "message": f"denied: {SECRET}"}}
    return "application/json", json.dumps(body).encode()


def _text(request: dict) -> tuple[str, bytes]:
    return "text/plain", f"key={SECRET}".encode()


# What services that are not agents answer, each with something that must not leave the LM.
SERVICES = {
    "a JSON-RPC result": _result({"config": {"password": SECRET}, "status": "ok"}),
    "an MCP tool result": _result({"content": [{"type": "text", "text": json.dumps({"token": SECRET})}]}),
    "a league-looking object of another type": _result({"message_type": "KV_VALUE", "value": SECRET}),
    "another protocol": _result({"protocol": "kv.v1", "message_type": "ACK", "value": SECRET}),
    "an empty result": _result({}),
    "a JSON-RPC error": _error,
    "a text page": _text,
}


def _service(answer: Callable[[dict], tuple[str, bytes]]) -> Callable:
    async def app(scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return
        body, more = b"", True
        while more:
            event = await receive()
            body += event.get("body", b"")
            more = event.get("more_body", False)
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            request = {}
        content_type, payload = answer(request if isinstance(request, dict) else {})
        headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(payload)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": payload})

    return app


@contextmanager
def serving(answer: Callable[[dict], tuple[str, bytes]]) -> Iterator[str]:
    server = ThreadedServer(_service(answer), ports=(0,)).start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_a_service_that_is_no_agent_gets_a_verdict_and_no_echo(service):
    with serving(SERVICES[service]) as url:
        report = asyncio.run(run_check(url, timeouts=ONE_SECOND))
    shown = json.dumps(report.to_dict())
    assert SECRET not in shown, service
    assert report.verdict == FAIL
    first = report.steps[0]
    # The first message is a notice: refused or unusable, it is a warning (a league carries on past
    # a notice); a reply that is no agent's message fails it and ends the check.
    assert first.reply is None and first.verdict in (WARN, FAIL)
    # A service that answered something is judged, not shown, and sent nothing more (an error or a
    # page is an unusable reply, told in the check's own words).
    if service not in ("a JSON-RPC error", "a text page"):
        assert first.verdict == FAIL and first.note == "the reply is not a league agent's message (it is not shown)"
        assert "league.v2 message" in first.fix and first.anchor == "tools-a-player-serves"
        assert report.stopped and "did not answer as a league agent" in report.stopped
        assert len(report.steps) == 1 and report.match_result is None


@pytest.mark.django_db  # the page looks the endpoint up among registered players
def test_the_page_shows_nothing_of_a_service_that_is_no_agent():
    client = Client()
    for service in ("a JSON-RPC result", "a JSON-RPC error"):
        with serving(SERVICES[service]) as url:
            response = client.post("/check/", {"endpoint": url, "game": "even_odd"})
        assert response.status_code == 200 and b"check-report" in response.content
        assert SECRET.encode() not in response.content, service
        if service == "a JSON-RPC result":
            assert b"not a league message" in response.content
            assert b"did not answer as a league agent" in response.content


def _agent_like(request: dict) -> tuple[str, bytes]:
    """Joins, then answers every call with an ACK in league.v2 (a lazy agent): league messages."""
    params = request.get("params") or {}
    joins = params.get("message_type") == "GAME_INVITATION"
    ack = {
        "protocol": "league.v2",
        "message_type": "GAME_JOIN_ACK" if joins else "ACK",
        "sender": "player:P01",
        "timestamp": "2025-01-15T10:15:00Z",
        "conversation_id": params.get("conversation_id"),
        "status": "received",
        **({"accept": True} if joins else {}),
    }
    return "application/json", json.dumps({"jsonrpc": "2.0", "id": request.get("id"), "result": ack}).encode()


def test_an_agents_league_message_is_still_shown_and_judged():
    with serving(_agent_like) as url:
        report = asyncio.run(run_check(url, timeouts=ONE_SECOND))
    by_type = {s.message_type: s for s in report.steps}
    announcement = by_type["ROUND_ANNOUNCEMENT"]
    assert announcement.verdict != FAIL and announcement.reply["message_type"] == "ACK"
    # An ACK where a choice is owed is a league message too: shown, and the referee's reason given.
    choice = by_type["CHOOSE_PARITY_CALL"]
    assert choice.reply is not None and not choice.not_agent and choice.verdict == FAIL
    assert "no parity_choice in its HTTP reply" in choice.note
    assert by_type["GAME_OVER"].verdict in (WARN, "ok") and by_type["GAME_OVER"].reply is not None
