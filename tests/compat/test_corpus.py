"""The compatibility corpus: what real agents send, and the reply each is owed.

Every case in tests/compat/cases/ (lm.json, referee.json, player.json) is one variant a real
agent produces: a JSON-RPC request and what we must answer, over real HTTP to a live League
Manager, referee or player. A case is accepted (a normal reply, of which the case lists the
fields that matter), or refused with a LEAGUE_ERROR / GAME_ERROR that names the field, what we
expected, what we got and the section of docs/protocol.md to read, in ``context`` and in
``error_description`` alike. Every reply must also match the tool's outputSchema.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from tests.compat.conftest import LiveAgent, league_manager, load_cases

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
ERROR_TYPES = ("LEAGUE_ERROR", "GAME_ERROR")


def _anchor(heading: str) -> str:
    """A heading's anchor as GitHub writes it: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


ANCHORS = frozenset(_anchor(line.lstrip("#")) for line in DOC.read_text().splitlines() if line.startswith("#"))


def output_schemas(url: str) -> dict[str, dict[str, Any]]:
    # Asked each time, not cached by URL: a later agent of the run may get the same port.
    tools = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).json()["result"]["tools"]
    return {tool["name"]: tool["outputSchema"] for tool in tools}


def tool_of(case: dict[str, Any]) -> str:
    request = case["request"]
    if request["method"] == "tools/call":
        return case.get("tool", request["params"]["name"])
    return case.get("tool", request["method"])


def send(agent: LiveAgent, case: dict[str, Any]) -> dict[str, Any]:
    headers = agent.fill(case.get("headers", {}))
    response = httpx.post(agent.url, json=agent.fill(case["request"]), headers=headers, timeout=10)
    assert response.status_code == case.get("http_status", 200), response.text
    return response.json()


def league_message(body: dict[str, Any], case: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The reply message in either dialect, and whether MCP flagged it as an error."""
    assert "result" in body, body
    result = body["result"]
    if case["request"]["method"] != "tools/call":
        return result, False
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    return result["structuredContent"], result["isError"]


def assert_owed(agent: LiveAgent, case: dict[str, Any]) -> None:
    body = send(agent, case)
    expect = case["expect"]
    if "rpc_error" in expect:
        error = body["error"]
        assert error["code"] == expect["rpc_error"]["code"]
        data = error["data"]
        assert data["field"] == expect["rpc_error"]["field"] and data["got"] is not None
        assert data["see"].partition("#")[2] in ANCHORS
        return
    if "empty_result" in expect:  # MCP's own ping: its result is an empty object, whatever the params
        assert body["result"] == {}, body
        return
    reply, flagged = league_message(body, case)
    if "reply" in expect:
        assert reply.get("message_type") not in ERROR_TYPES, reply
        assert not flagged
        assert {k: reply.get(k) for k in expect["reply"]} == expect["reply"], reply
    else:
        assert_refusal(reply, expect["refused"])
        assert flagged is (case["request"]["method"] == "tools/call")
    Draft202012Validator(output_schemas(agent.url)[tool_of(case)]).validate(reply)


def assert_refusal(reply: dict[str, Any], owed: dict[str, Any]) -> None:
    """A refusal that says what to fix: the field, what we expected, what came, where to read."""
    assert reply["message_type"] in ERROR_TYPES, reply
    assert reply["error_code"] == owed["error_code"], reply
    context = reply["context"]
    assert context["field"] == owed["field"], context
    assert isinstance(context["expected"], str) and context["expected"], context
    assert "got" in context
    see = context["see"]
    assert see.startswith("docs/protocol.md#") and see.partition("#")[2] in ANCHORS, see
    assert see == owed.get("see", see)
    description = reply["error_description"]
    assert context["field"] in description and "expected" in description and see in description, description


@pytest.mark.parametrize("case", load_cases("lm"), ids=lambda case: case["name"])
def test_the_league_manager_owes_this_reply(case, lm_server):
    assert_owed(league_manager(lm_server, case.get("setup", {})), case)


@pytest.mark.parametrize("case", load_cases("referee"), ids=lambda case: case["name"])
def test_the_referee_owes_this_reply(case, live_referee):
    agent, _ = live_referee
    assert_owed(agent, case)


@pytest.mark.parametrize("case", load_cases("player"), ids=lambda case: case["name"])
def test_the_player_owes_this_reply(case, live_player):
    agent, player = live_player
    player.announced.clear()  # each case stands alone: no round announced by an earlier case
    assert_owed(agent, case)
