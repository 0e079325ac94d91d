"""JSON-RPC + MCP dispatch over real HTTP: both dialects, liberal input, every error class."""

from __future__ import annotations

import httpx
import pytest

from leagueproto.envelope import make_message


def call(url: str, payload, **kwargs) -> httpx.Response:
    return httpx.post(url, json=payload, **kwargs)


def message(**fields) -> dict:
    return make_message("CHOOSE_PARITY_CALL", "referee:REF01", match_id="R1M1", player_id="P01", **fields)


def test_it_answers_the_direct_dialect(agent_url):
    response = call(agent_url, {"jsonrpc": "2.0", "id": 7, "method": "choose_parity", "params": message()})
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == 7
    assert body["result"]["parity_choice"] == "even"
    assert body["result"]["message_type"] == "CHOOSE_PARITY_RESPONSE"


def test_it_echoes_the_conversation_id(agent_url):
    msg = message()
    body = call(agent_url, {"jsonrpc": "2.0", "id": "x", "method": "choose_parity", "params": msg}).json()
    assert body["result"]["conversation_id"] == msg["conversation_id"]
    assert body["id"] == "x"


@pytest.mark.parametrize(
    "method,params",
    [
        ("CHOOSE_PARITY_CALL", "flat"),  # method = message type
        ("pick", "flat"),  # alias
        ("choose_parity", "wrapped"),  # params.message wrapper
        ("mcp_message", "flat"),  # generic method routed by message_type
        ("handle_message", "wrapped"),
        ("protocol/message", "flat"),
    ],
)
def test_it_accepts_the_liberal_forms(agent_url, method, params):
    msg = message()
    body = {"message": msg} if params == "wrapped" else msg
    reply = call(agent_url, {"jsonrpc": "2.0", "id": 1, "method": method, "params": body}).json()
    assert reply["result"]["parity_choice"] == "even"


def test_it_answers_the_mcp_dialect(agent_url):
    payload = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "choose_parity", "arguments": message()},
    }
    result = call(agent_url, payload).json()["result"]
    assert result["isError"] is False
    assert result["structuredContent"]["parity_choice"] == "even"
    assert result["content"][0]["type"] == "text"
    assert '"parity_choice":"even"' in result["content"][0]["text"]


def test_league_errors_are_replies_not_jsonrpc_errors(agent_url):
    msg = message()
    del msg["match_id"]
    body = call(agent_url, {"jsonrpc": "2.0", "id": 1, "method": "choose_parity", "params": msg}).json()
    assert body["result"]["message_type"] == "GAME_ERROR"
    assert body["result"]["error_code"] == "E003"
    assert body["result"]["context"]["missing_fields"] == ["match_id"]
    mcp = call(
        agent_url,
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "choose_parity", "arguments": msg}},
    ).json()["result"]
    assert mcp["isError"] is True
    assert mcp["structuredContent"]["error_code"] == "E003"


@pytest.mark.parametrize(
    "change,code",
    [
        ({"timestamp": "2025-01-15T10:30:00+02:00"}, "E021"),
        ({"timestamp": "2025-01-15T10:30:00"}, "E021"),
        ({"timestamp": "yesterday"}, "E021"),
        ({"protocol": "league.v1"}, "E018"),
        ({"sender": "somebody"}, "E002"),
        ({"conversation_id": None}, "E003"),
        ({"match_id": 17}, "E002"),
    ],
)
def test_it_validates_the_envelope(agent_url, change, code):
    msg = {**message(), **change}
    body = call(agent_url, {"jsonrpc": "2.0", "id": 1, "method": "choose_parity", "params": msg}).json()
    assert body["result"]["error_code"] == code


def test_utc_offsets_written_as_plus_zero_are_accepted(agent_url):
    msg = {**message(), "timestamp": "2025-01-15T10:30:00+00:00"}
    body = call(agent_url, {"jsonrpc": "2.0", "id": 1, "method": "choose_parity", "params": msg}).json()
    assert body["result"]["parity_choice"] == "even"


def test_parse_error_is_400(agent_url):
    response = httpx.post(agent_url, content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32700
    assert response.json()["id"] is None


@pytest.mark.parametrize(
    "payload",
    [
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1, "method": 5},
        {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": "x"},
        {"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"},
        [],
        "hello",
    ],
)
def test_invalid_requests_are_400(agent_url, payload):
    response = call(agent_url, payload)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600


def test_unknown_method_is_32601(agent_url):
    body = call(agent_url, {"jsonrpc": "2.0", "id": 1, "method": "fly", "params": {}}).json()
    assert body["error"]["code"] == -32601


@pytest.mark.parametrize(
    "payload",
    [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "nope"}},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "choose_parity", "arguments": [1]}},
        {"jsonrpc": "2.0", "id": 1, "method": "choose_parity", "params": [1, 2]},
        {"jsonrpc": "2.0", "id": 1, "method": "mcp_message", "params": {"message_type": "NOPE"}},
        {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {}},
    ],
)
def test_unusable_params_are_32602(agent_url, payload):
    response = call(agent_url, payload)
    assert response.status_code == 200
    assert response.json()["error"]["code"] == -32602


def test_a_bug_is_32603_not_a_500(agent_url):
    response = call(agent_url, {"jsonrpc": "2.0", "id": 1, "method": "explode", "params": {}})
    assert response.status_code == 200
    assert response.json()["error"]["code"] == -32603


def test_notifications_get_202_and_no_body(agent_url):
    for payload in (
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "method": "choose_parity", "params": message()},
        {"jsonrpc": "2.0", "method": "fly"},
    ):
        response = call(agent_url, payload)
        assert response.status_code == 202
        assert response.content == b""


def test_a_batch_gets_one_reply_per_request(agent_url):
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "fly"},
    ]
    replies = call(agent_url, batch).json()
    assert [r["id"] for r in replies] == [1, 2]
    assert replies[0]["result"] == {}
    assert replies[1]["error"]["code"] == -32601


@pytest.mark.parametrize(
    "requested,answered",
    [
        ("2024-11-05", "2024-11-05"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("1999-01-01", "2025-11-25"),
    ],
)
def test_initialize_negotiates_the_version(agent_url, requested, answered):
    params = {"protocolVersion": requested, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    result = call(agent_url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}).json()["result"]
    assert result["protocolVersion"] == answered
    assert result["serverInfo"]["name"] == "test-player"
    assert "tools" in result["capabilities"]


def test_tools_list_has_an_input_and_an_output_schema_per_tool(agent_url):
    tools = call(agent_url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).json()["result"]["tools"]
    by_name = {t["name"]: t for t in tools}
    schema = by_name["choose_parity"]["inputSchema"]
    assert schema["type"] == "object"
    assert {"match_id", "player_id", "sender", "conversation_id"} <= set(schema["required"])
    assert "timestamp" not in schema["required"] and "protocol" not in schema["required"]
    assert by_name["choose_parity"]["description"] == "Choose even or odd."
    assert {"choose_parity", "explode", "ping"} == set(by_name)
    assert all(tool["outputSchema"]["type"] == "object" for tool in tools)


def test_resources_list_read_and_templates(agent_url):
    listed = call(agent_url, {"jsonrpc": "2.0", "id": 1, "method": "resources/list"}).json()["result"]
    assert [r["uri"] for r in listed["resources"]] == ["league://standings"]
    templates = call(agent_url, {"jsonrpc": "2.0", "id": 1, "method": "resources/templates/list"}).json()
    assert templates["result"]["resourceTemplates"][0]["uriTemplate"] == "game://state/{match_id}"
    read = call(
        agent_url, {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": "game://state/R1M1"}}
    ).json()["result"]
    assert read["contents"][0]["text"] == '{"match_id":"R1M1","state":"FINISHED"}'
    missing = call(
        agent_url, {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": "game://state/R9M9"}}
    ).json()
    assert missing["error"]["code"] == -32002


@pytest.mark.parametrize("verb", ["GET", "DELETE", "PUT"])
def test_other_http_methods_are_405(agent_url, verb):
    response = httpx.request(verb, agent_url)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


def test_an_oversized_body_is_413(agent_url):
    response = call(agent_url, {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * 5000}})
    assert response.status_code == 413


def test_deep_json_is_refused(agent_url):
    deep: dict = {}
    node = deep
    for _ in range(100):
        node["a"] = {}
        node = node["a"]
    response = call(agent_url, {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": deep})
    assert response.status_code == 400


@pytest.mark.parametrize("levels,status", [(31, 200), (32, 400)])
def test_nesting_is_limited_to_32_levels(agent_url, levels, status):
    # The request object is one level, params ``levels`` more; bracket-filled strings count for nothing.
    params: dict = {"note": "[[[[{{{{"}
    for _ in range(levels - 1):
        params = {"a": params, "s": "]]}}"}
    response = call(agent_url, {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": params})
    assert response.status_code == status
    if status == 400:
        assert response.json()["error"]["message"] == "JSON nests deeper than 32 levels"


def test_a_foreign_origin_is_403_and_a_local_one_is_fine(agent_url):
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert call(agent_url, ping, headers={"Origin": "http://evil.example"}).status_code == 403
    assert call(agent_url, ping, headers={"Origin": "http://localhost:3000"}).status_code == 200


def test_no_redirect_and_trailing_slash_works(agent_url):
    response = call(agent_url + "/", {"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code == 200
    assert call(agent_url.replace("/mcp", "/other"), {}).status_code == 404
