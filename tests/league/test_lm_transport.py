"""The LM's /mcp transport: JSON-RPC error classes, HTTP hygiene, both dialects, liberal input."""

from __future__ import annotations

import httpx
import pytest
from django.conf import settings
from django.test import override_settings

from leagueproto.jsonutil import loads
from tests.league.lm_support import make_league, message, player_meta, post, rpc


def _register_request(name: str = "alpha") -> dict:
    return message("LEAGUE_REGISTER_REQUEST", f"player:{name}", player_meta=player_meta(display_name=name))


def test_it_answers_parse_errors_with_400(lm_server):
    response = httpx.post(
        lm_server, content=b'{"jsonrpc": "2.0", "id": 1,', headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32700 and response.json()["id"] is None


@pytest.mark.parametrize(
    "payload",
    [
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": "x"},
        [],
        "just a string",
    ],
)
def test_it_answers_invalid_requests_with_400(lm_server, payload):
    response = post(lm_server, payload)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600


def test_it_answers_unknown_methods_with_32601_and_echoes_the_id(lm_server):
    body = rpc(lm_server, "no_such_tool", {})
    assert body["error"]["code"] == -32601 and body["id"] is not None
    response = post(lm_server, {"jsonrpc": "2.0", "id": "abc-7", "method": "nope", "params": {}})
    assert response.json()["id"] == "abc-7"


def test_it_answers_unusable_params_with_32602(lm_server):
    assert rpc(lm_server, "register_player", [1, 2])["error"]["code"] == -32602
    assert rpc(lm_server, "tools/call", {"name": "no_such_tool", "arguments": {}})["error"]["code"] == -32602
    assert rpc(lm_server, "mcp_message", {"message_type": "UNKNOWN_TYPE"})["error"]["code"] == -32602


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_it_answers_405_to_get_and_delete(lm_server, method):
    response = httpx.request(method, lm_server)
    assert response.status_code == 405 and response.headers["allow"] == "POST"


def test_it_does_not_redirect_mcp(lm_server):
    response = post(lm_server + "/", {"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code == 200 and response.json()["result"] == {}


def test_it_refuses_bodies_over_the_limit_with_413(lm_server):
    big = _register_request()
    big["padding"] = "x" * settings.MCP_MAX_BODY_BYTES
    response = post(lm_server, {"jsonrpc": "2.0", "id": 1, "method": "register_player", "params": big})
    assert response.status_code == 413 and response.json()["error"]["code"] == -32600
    with override_settings(MCP_MAX_BODY_BYTES=100):
        assert (
            post(lm_server, {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"p": "y" * 100}}).status_code
            == 413
        )


def test_it_refuses_a_foreign_origin_with_403(lm_server):
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert post(lm_server, ping, headers={"Origin": "http://evil.example"}).status_code == 403
    assert post(lm_server, ping, headers={"Origin": "http://localhost:3000"}).status_code == 200
    with override_settings(MCP_ALLOWED_ORIGINS=["http://evil.example"]):
        assert post(lm_server, ping, headers={"Origin": "http://evil.example"}).status_code == 200


def test_it_answers_notifications_with_202_and_no_body(lm_server):
    response = post(lm_server, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert response.status_code == 202 and response.content == b""
    response = post(lm_server, {"jsonrpc": "2.0", "method": "ping"})
    assert response.status_code == 202 and response.content == b""


def test_it_answers_a_batch_in_order_skipping_notifications(lm_server):
    response = post(
        lm_server,
        [
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "nope"},
        ],
    )
    assert response.status_code == 200
    assert [(r["id"], "error" in r) for r in response.json()] == [(1, False), (2, True)]


def test_it_negotiates_the_mcp_version_and_lists_tools_with_schemas(lm_server):
    init = rpc(lm_server, "initialize", {"protocolVersion": "2025-03-26", "capabilities": {}})["result"]
    assert init["protocolVersion"] == "2025-03-26" and init["serverInfo"]["name"] == "league-manager"
    assert rpc(lm_server, "initialize", {"protocolVersion": "1999-01-01"})["result"]["protocolVersion"] == "2025-11-25"
    tools = {t["name"]: t for t in rpc(lm_server, "tools/list", {})["result"]["tools"]}
    assert set(tools) == {
        "register_player",
        "register_referee",
        "report_match_result",
        "league_query",
        "get_standings",
        "list_leagues",
        "ping",
    }
    schema = tools["register_player"]["inputSchema"]
    assert "player_meta" in schema["required"]
    meta = schema["$defs"]["PlayerMeta"]
    assert set(meta["required"]) == {"display_name", "contact_endpoint"}
    assert tools["league_query"]["inputSchema"]["properties"]["query_type"]["enum"] == [
        "GET_STANDINGS",
        "GET_SCHEDULE",
        "GET_NEXT_MATCH",
        "GET_PLAYER_STATS",
        "GET_MATCH_ASSIGNMENT",
    ]


def _same_reply_shape(reply: dict, player_id: str) -> None:
    assert reply["message_type"] == "LEAGUE_REGISTER_RESPONSE" and reply["status"] == "ACCEPTED"
    assert reply["player_id"] == player_id
    assert set(reply) == {
        "protocol",
        "message_type",
        "sender",
        "timestamp",
        "conversation_id",
        "league_id",
        "player_id",
        "status",
        "reason",
        "auth_token",
        "league_manager_token",
    }


def test_both_dialects_and_the_liberal_forms_register_a_player_alike(lm_server):
    make_league()
    forms = [
        ("register_player", lambda m: m),  # dialect A
        ("LEAGUE_REGISTER_REQUEST", lambda m: m),  # method = message type
        ("register_player", lambda m: {"message": m}),  # params.message wrapper
        ("mcp_message", lambda m: m),  # generic method routed by message_type
        ("handle_message", lambda m: {"message": m}),
    ]
    for n, (method, wrap) in enumerate(forms, start=1):
        request = _register_request(f"p{n}")
        reply = rpc(lm_server, method, wrap(request))["result"]
        _same_reply_shape(reply, f"P{n:02d}")
        assert reply["conversation_id"] == request["conversation_id"]
    # Dialect B: MCP tools/call, reply in structuredContent and as JSON text.
    request = _register_request("mcp")
    result = rpc(lm_server, "tools/call", {"name": "register_player", "arguments": request})["result"]
    assert result["isError"] is False
    _same_reply_shape(result["structuredContent"], f"P{len(forms) + 1:02d}")
    assert loads(result["content"][0]["text"]) == result["structuredContent"]


def test_league_errors_are_replies_and_set_is_error_in_mcp_form(lm_server):
    request = message("LEAGUE_QUERY", "player:P01", query_type="GET_STANDINGS")
    direct = rpc(lm_server, "league_query", request)
    assert direct["result"]["message_type"] == "LEAGUE_ERROR" and direct["result"]["error_code"] == "E011"
    assert direct["result"]["conversation_id"] == request["conversation_id"]
    result = rpc(lm_server, "tools/call", {"name": "handle_league_query", "arguments": request})["result"]
    assert result["isError"] is True and result["structuredContent"]["error_code"] == "E011"
    assert result["structuredContent"]["retryable"] is False


def test_the_host_check_and_security_headers_follow_the_settings(lm_server):
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}
    host = {"Host": "league.example.org"}
    with override_settings(ALLOWED_HOSTS=["127.0.0.1"]):
        assert post(lm_server, ping, headers=host).status_code == 400  # Django's DisallowedHost answer
        answered = post(lm_server, ping)
        assert answered.status_code == 200 and answered.headers["x-frame-options"] == "DENY"
    # The same Host, asked again under other settings: Django reads them on each request.
    with override_settings(ALLOWED_HOSTS=["league.example.org"], X_FRAME_OPTIONS="SAMEORIGIN"):
        answered = post(lm_server, ping, headers=host)
        assert answered.status_code == 200 and answered.headers["x-frame-options"] == "SAMEORIGIN"
        assert post(lm_server, ping).status_code == 400
