"""Property-based fuzzing of the LM's /mcp (hypothesis): random and mutated JSON-RPC and league messages.

For every case: never a 500; a 202 has no body; anything else is a well-formed JSON-RPC reply (or
batch of them) whose league errors are well-formed LEAGUE_ERRORs; and a call answered with an error
(JSON-RPC error, LEAGUE_ERROR, isError, REJECTED) leaves the league's state exactly as it was.

The bulk runs in-process against the same McpServer the view uses (thousands of cases in seconds);
a smaller sample goes over real HTTP to the ASGI site. ``--fuzz-long`` runs ten times as many.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import orjson
import pytest
from asgiref.sync import async_to_sync
from django.conf import settings as django_settings
from django.db import connection
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from league import actions
from league.mcp.endpoint import get_server
from league.models import Player, Referee
from leagueproto.envelope import utc_now
from leagueproto.server import GENERIC_METHODS
from tests.league.lm_support import log_for, site_referee_key

METHODS = [
    "register_player",
    "register_referee",
    "report_match_result",
    "league_query",
    "handle_league_query",
    "get_standings",
    "list_leagues",
    "LEAGUE_REGISTER_REQUEST",
    "REFEREE_REGISTER_REQUEST",
    "MATCH_RESULT_REPORT",
    "LEAGUE_QUERY",
    "initialize",
    "ping",
    "tools/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "notifications/initialized",
    "start_league",
    "",
]
ALLOWED_STATUS = {200, 202, 400, 403, 405, 413, 429}
ERROR_CODE = re.compile(r"^E\d{3}$")

json_leaf = st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=False) | st.text(max_size=20)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


@pytest.fixture
def fuzz_league(transactional_db) -> dict[str, Any]:
    """A league open for registration with two players, a referee and an assigned match; their tokens."""
    league = actions.create_league(name="Fuzz", league_id="fuzz", rate_limit_per_minute=1_000_000)
    actions.open_registration(league, 3600)
    tokens: dict[str, str] = {}
    for n, name in enumerate(("alpha", "beta")):
        meta = {
            "display_name": name,
            "protocol_version": "2.1.0",
            "game_types": ["even_odd"],
            "contact_endpoint": f"http://127.0.0.1:{9801 + n}/mcp",
        }
        reg = actions.register_player("fuzz", meta, None)
        tokens[reg.agent_id] = reg.auth_token
    ref_meta = {"display_name": "ref", "game_types": ["even_odd"], "contact_endpoint": "http://127.0.0.1:9809/mcp"}
    reg = actions.register_referee("fuzz", ref_meta, None, referee_key=site_referee_key())
    tokens[reg.agent_id] = reg.auth_token
    players = list(Player.objects.filter(league=league))
    actions.create_match(league, 1, players[0], players[1], match_id="R1M1", referee=Referee.objects.get())
    return tokens


def _envelope(message_type: str, sender: str, **fields: Any) -> dict[str, Any]:
    return {
        "protocol": "league.v2",
        "message_type": message_type,
        "sender": sender,
        "timestamp": utc_now(),
        "conversation_id": "conv-fuzz",
        **fields,
    }


def seeds(tokens: dict[str, str]) -> list[dict[str, Any]]:
    """Valid league messages of every kind the LM takes."""
    return [
        _envelope(
            "LEAGUE_REGISTER_REQUEST",
            "player:gamma",
            league_id="fuzz",
            player_meta={
                "display_name": "gamma",
                "version": "1.0.0",
                "protocol_version": "2.1.0",
                "game_types": ["even_odd"],
                "contact_endpoint": "http://127.0.0.1:9803/mcp",
            },
        ),
        _envelope(
            "REFEREE_REGISTER_REQUEST",
            "referee:two",
            referee_key=site_referee_key(),  # mutations then reach past the key check too
            referee_meta={
                "display_name": "two",
                "game_types": ["even_odd"],
                "contact_endpoint": "http://127.0.0.1:9810/mcp",
                "max_concurrent_matches": 2,
            },
        ),
        _envelope(
            "LEAGUE_QUERY",
            "player:P01",
            auth_token=tokens["P01"],
            league_id="fuzz",
            query_type="GET_PLAYER_STATS",
            query_params={"player_id": "P01"},
        ),
        _envelope("LEAGUE_QUERY", "referee:REF01", auth_token=tokens["REF01"], query_type="GET_SCHEDULE"),
        _envelope(
            "MATCH_RESULT_REPORT",
            "referee:REF01",
            auth_token=tokens["REF01"],
            league_id="fuzz",
            round_id=1,
            match_id="R1M1",
            game_type="even_odd",
            result={
                "status": "DRAW",
                "winner": None,
                "score": {"P01": 1, "P02": 1},
                "technical_loss": [],
                "details": {"drawn_number": 3},
            },
            match_log=log_for("P01", "P02", {"status": "DRAW"}),
        ),
        {"league_id": "fuzz"},
    ]


@st.composite
def mutated(draw: st.DrawFn, seed: dict[str, Any], tokens: dict[str, str]) -> dict[str, Any]:
    """A seed with zero to three mutations: drop, retype or add a field (top level or one level down)."""
    message = orjson.loads(orjson.dumps(seed))
    for _ in range(draw(st.integers(0, 3))):
        target = message
        nested = [k for k, v in message.items() if isinstance(v, dict)]
        if nested and draw(st.booleans()):
            target = message[draw(st.sampled_from(nested))]
        keys = list(target)
        action = draw(st.sampled_from(["drop", "retype", "add", "token", "timestamp"]))
        if action == "drop" and keys:
            target.pop(draw(st.sampled_from(keys)))
        elif action == "retype" and keys:
            target[draw(st.sampled_from(keys))] = draw(json_value)
        elif action == "add":
            target[draw(st.text(max_size=12))] = draw(json_value)
        elif action == "token":
            message["auth_token"] = draw(st.sampled_from([*tokens.values(), "forged", ""]))
        elif action == "timestamp":
            message["timestamp"] = draw(st.sampled_from(["2025-01-15T10:15:00+02:00", "yesterday", 5, None]))
    return message


@st.composite
def requests(draw: st.DrawFn, tokens: dict[str, str]) -> bytes:
    """One HTTP body: random bytes, random JSON, or a JSON-RPC call in any dialect, maybe mutated."""
    kind = draw(st.sampled_from(["bytes", "json", "call", "call", "call", "call", "batch"]))
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "json":
        return orjson.dumps(draw(json_value))

    def one_call() -> dict[str, Any]:
        message = draw(mutated(draw(st.sampled_from(seeds(tokens))), tokens))
        dialect = draw(st.sampled_from(["direct", "by_type", "generic", "mcp", "random_method"]))
        if dialect == "direct":
            method, params = draw(st.sampled_from(METHODS)), message
        elif dialect == "by_type":
            method, params = str(message.get("message_type")), message
        elif dialect == "generic":
            method, params = draw(st.sampled_from(sorted(GENERIC_METHODS))), {"message": message}
        elif dialect == "mcp":
            name = draw(st.sampled_from(METHODS[:6]) | st.text(max_size=10))
            method, params = "tools/call", {"name": name, "arguments": message}
        else:
            method, params = draw(st.text(max_size=20)), draw(json_value)
        envelope: dict[str, Any] = {
            "jsonrpc": "2.0",
            "id": draw(st.integers(0, 10**6) | st.text(max_size=8)),
            "method": method,
            "params": params,
        }
        for _ in range(draw(st.integers(0, 1))):
            key = draw(st.sampled_from(["jsonrpc", "id", "method", "params"]))
            if draw(st.booleans()):
                envelope.pop(key)
            else:
                envelope[key] = draw(json_value)
        return envelope

    if kind == "batch":
        return orjson.dumps([one_call() for _ in range(draw(st.integers(1, 3)))])
    return orjson.dumps(one_call())


def state() -> tuple:
    """What an invalid message must not change (the Event log records every call, by design).

    Two queries: row counts, then every agent's status, endpoint and token hash. The last two
    entries are about agents (registrations and rotations)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT COUNT(*) FROM league_league), (SELECT COUNT(*) FROM league_round),"
            " (SELECT COUNT(*) FROM league_match WHERE status IN ('FINISHED', 'CANCELLED')),"
            " (SELECT COUNT(*) FROM league_matchresult)"
        )
        counts = cursor.fetchone()
        cursor.execute(
            "SELECT player_id, status, endpoint, token_hash FROM league_player"
            " UNION ALL SELECT referee_id, status, endpoint, token_hash FROM league_referee"
        )
        agents = sorted(cursor.fetchall())
    return (*counts, len(agents), tuple(agents))


def has_notification(body: bytes) -> bool:
    """A batch item without an id is a notification: it may act (a report) and answers nothing."""
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        return False
    return isinstance(payload, list) and any(isinstance(item, dict) and "id" not in item for item in payload)


def is_error(response: dict[str, Any]) -> bool:
    if "error" in response:
        return True
    result = response.get("result")
    if not isinstance(result, dict):
        return False
    reply = result.get("structuredContent", result)
    return (
        bool(result.get("isError")) or reply.get("message_type") == "LEAGUE_ERROR" or reply.get("status") == "REJECTED"
    )


def check_response(status: int, body: bytes) -> list[dict[str, Any]]:
    """Assert the transport rules; returns the JSON-RPC responses."""
    assert status in ALLOWED_STATUS, (status, body[:300])
    if status == 202:
        assert body == b""
        return []
    payload = orjson.loads(body)
    responses = payload if isinstance(payload, list) else [payload]
    assert responses
    for response in responses:
        assert isinstance(response, dict) and response.get("jsonrpc") == "2.0" and "id" in response
        assert ("result" in response) != ("error" in response), response
        if "error" in response:
            assert isinstance(response["error"]["code"], int) and isinstance(response["error"]["message"], str)
            continue
        result = response["result"]
        reply = result.get("structuredContent", result) if isinstance(result, dict) else result
        if isinstance(reply, dict) and reply.get("message_type") == "LEAGUE_ERROR":
            assert ERROR_CODE.match(reply["error_code"]) and reply["error_name"]
            assert isinstance(reply["retryable"], bool) and isinstance(reply["error_description"], str)
            assert reply["sender"] == "league_manager" and reply["protocol"] == "league.v2"
    return responses


def _refresh_tokens(tokens: dict[str, str], responses: list[dict[str, Any]]) -> None:
    """A valid re-registration rotates a token: keep using the current one."""
    for response in responses:
        result = response.get("result")
        reply = result.get("structuredContent", result) if isinstance(result, dict) else None
        if isinstance(reply, dict) and reply.get("status") == "ACCEPTED" and isinstance(reply.get("auth_token"), str):
            agent_id = reply.get("player_id") or reply.get("referee_id")
            if agent_id in tokens:
                tokens[agent_id] = reply["auth_token"]


@override_settings(REDIS_URL=None)
def test_mcp_survives_random_and_mutated_messages_in_process(fuzz_league, fuzz_examples):
    # Each call below runs on an event loop of its own (async_to_sync), and with Redis the rate
    # limiter keeps a client per loop it has seen: 1,500 held connections. Its buckets stay in this
    # process here; the test over HTTP below goes through Redis when there is one.
    server = get_server()
    tokens = fuzz_league
    handle = async_to_sync(server.handle_http)
    headers = {"content-type": "application/json", "host": "testserver"}

    @settings(
        max_examples=1500 * fuzz_examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        body = data.draw(requests(tokens))
        before = state()
        response = handle("POST", body, headers, client_host="10.9.8.7")
        responses = check_response(response.status, response.body)
        if has_notification(body) or response.status == 202:
            # No reply to a notification, so nothing may be registered unseen; a valid registration
            # answered in the same batch may rotate its own token, though.
            if all(is_error(r) for r in responses):
                assert state()[4:] == before[4:], body[:500]
        elif response.status != 200 or all(is_error(r) for r in responses):
            assert state() == before, body[:500]
        _refresh_tokens(tokens, responses)

    run()


def test_mcp_survives_random_and_mutated_messages_over_http(lm_server, fuzz_league, fuzz_examples):
    tokens = fuzz_league
    with httpx.Client(timeout=10) as client:

        @settings(
            max_examples=50 * fuzz_examples, deadline=None, database=None, suppress_health_check=list(HealthCheck)
        )
        @given(data=st.data())
        def run(data: st.DataObject) -> None:
            body = data.draw(requests(tokens))
            before = state()
            response = client.post(lm_server, content=body, headers={"content-type": "application/json"})
            responses = check_response(response.status_code, response.content)
            if has_notification(body) or response.status_code == 202:
                if all(is_error(r) for r in responses):
                    assert state()[4:] == before[4:], body[:500]
            elif response.status_code != 200 or all(is_error(r) for r in responses):
                assert state() == before, body[:500]
            _refresh_tokens(tokens, responses)

        run()
        # Oversized and foreign-origin requests get their transport answers, never a 500.
        big = client.post(lm_server, content=b"[" + b"1," * (django_settings.MCP_MAX_BODY_BYTES // 2) + b"1]")
        assert big.status_code == 413 and big.json()["error"]["code"] == -32600
        deep = client.post(lm_server, content=b"[" * 100 + b"]" * 100)
        assert deep.status_code == 400
        foreign = client.post(lm_server, content=b"{}", headers={"origin": "http://evil.example"})
        assert foreign.status_code == 403
