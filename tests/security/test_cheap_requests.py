"""Every anonymous request to the LM's /mcp is cheap: a batch has a maximum number of items, the
rate limits count items, an anonymous read writes nothing to the Event log, a reply has a size
bound, and a body that is not JSON gets a JSON-RPC parse error. Real HTTP against a running LM
(in this process, and the production command's process for its memory)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from league import actions
from league.bench.server import production_script
from league.models import Event, Player
from leagueproto.jsonutil import dumps
from leagueproto.server import DEFAULT_MAX_BATCH_ITEMS
from referee.agent import REPORT_BATCH
from tests.league.lm_support import make_league as _make_league
from tests.league.lm_support import message, player_meta, post, register_player
from tests.support.servers import Process, free_port, wait_for_port

MB = 1024 * 1024


def make_league(league_id: str = "test_league", players: int = 0, **settings) -> str:
    league = _make_league(league_id, rate_limit_per_minute=100_000, **settings)
    for n in range(players):
        actions.register_player(league.league_id, player_meta(display_name=f"Player number {n}"), None)
    return league.league_id


def standings_batch(items: int, league_id: str | None = "test_league") -> list[dict]:
    params = {"league_id": league_id} if league_id else {}
    return [{"jsonrpc": "2.0", "id": n, "method": "get_standings", "params": params} for n in range(items)]


def _register_item(rid: int, name: str) -> dict:
    meta = player_meta(display_name=name)
    params = message("LEAGUE_REGISTER_REQUEST", f"player:{name}", league_id="test_league", player_meta=meta)
    return {"jsonrpc": "2.0", "id": rid, "method": "register_player", "params": params}


# -- the batch's maximum number of items ----------------------------------------------------------
def test_a_batch_over_the_maximum_is_refused_whole_before_any_item_runs(lm_server, settings):
    make_league()
    events = Event.objects.count()
    batch = [_register_item(0, "early"), *standings_batch(settings.MCP_MAX_BATCH_ITEMS)]
    refused = post(lm_server, batch)
    assert refused.status_code == 400 and refused.headers["content-type"] == "application/json"
    error = refused.json()["error"]
    assert error["code"] == -32600 and f"at most {settings.MCP_MAX_BATCH_ITEMS}" in error["message"]
    assert error["data"]["max_batch_items"] == settings.MCP_MAX_BATCH_ITEMS
    assert error["data"]["got"] == settings.MCP_MAX_BATCH_ITEMS + 1
    # Not even the registration at its head ran.
    assert Player.objects.count() == 0 and Event.objects.count() == events
    # At the maximum, every item is answered.
    answered = post(lm_server, [_register_item(0, "early"), *standings_batch(settings.MCP_MAX_BATCH_ITEMS - 1)])
    assert answered.status_code == 200 and len(answered.json()) == settings.MCP_MAX_BATCH_ITEMS
    assert Player.objects.count() == 1


def test_a_referees_batch_of_reports_fits_in_a_batch(settings):
    assert REPORT_BATCH <= settings.MCP_MAX_BATCH_ITEMS and REPORT_BATCH <= DEFAULT_MAX_BATCH_ITEMS


def _rss_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field}")


NOT_JSON = [
    ("multipart/form-data; boundary=x", b'--x\r\nContent-Disposition: form-data; name="a"\r\n\r\nb\r\n--x--\r\n'),
    ("multipart/form-data", b"--x\r\nno boundary was declared"),
    ("application/x-www-form-urlencoded", b"jsonrpc=2.0&method=ping"),
    ("application/octet-stream", bytes(range(256))),
    ("application/json", b"\xff\xfe{not json"),
]


def assert_parse_error(response: httpx.Response, sent_as: str) -> None:
    assert response.status_code == 400, (sent_as, response.status_code, response.text)
    assert response.headers["content-type"] == "application/json", sent_as
    error = response.json()["error"]
    assert error["code"] == -32700 and "not JSON" in error["message"], sent_as


def test_a_body_that_is_not_json_gets_a_json_rpc_parse_error(lm_server):
    for content_type, body in NOT_JSON:
        response = httpx.post(lm_server, content=body, headers={"Content-Type": content_type}, timeout=10)
        assert_parse_error(response, content_type)
    # A form as httpx builds it (files, fields), as a fuzzer would send it.
    assert_parse_error(httpx.post(lm_server, files={"f": ("a.json", b"{}")}, timeout=10), "files")
    assert_parse_error(httpx.post(lm_server, data={"jsonrpc": "2.0"}, timeout=10), "form")


@pytest.mark.processes
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the LM's memory from /proc")
def test_the_12000_item_batch_is_refused_at_once_and_the_lms_memory_stays_flat(agent_env, manage_py, tmp_path):
    """The attack of issue 31: one ~1 MB POST of 12,000 get_standings items against a 200-player
    league took the LM from 271 MB to 1,273 MB and wrote 20,002 Event rows. Now it is one -32600.
    The same LM, run by the production command of docs/operations.md, answers a body that is not
    JSON with -32700, whatever its type."""
    league_id = make_league("L200", players=200, max_players=200)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    command = ["bash", "-c", production_script("127.0.0.1", port)]
    server = Process(command, agent_env, str(tmp_path / "lm.log"))
    try:
        wait_for_port(port)
        # Warm up: the standings of the league are read once (and cached), as any page would.
        warm = httpx.post(url, json=standings_batch(1, league_id)[0], timeout=30)
        assert len(warm.json()["result"]["standings"]) == 200
        events = Event.objects.count()
        body = dumps(standings_batch(12_000, league_id))
        assert 900_000 < len(body) < MB  # under the body limit: only the item count refuses it
        before = _rss_kb(server.proc.pid, "VmHWM")
        for _ in range(5):
            refused = httpx.post(url, content=body, headers={"Content-Type": "application/json"}, timeout=30)
            assert refused.status_code == 400 and len(refused.content) < 1000
            error = refused.json()["error"]
            assert error["code"] == -32600 and "12000 items, at most 100" in error["message"]
        grown_mb = (_rss_kb(server.proc.pid, "VmHWM") - before) / 1024
        # The reply alone was 305 MB; parsing a 1 MB body and refusing it costs a few MB at most.
        assert grown_mb < 40, f"the LM grew by {grown_mb:.0f} MB"
        assert Event.objects.count() == events
        for content_type, not_json in NOT_JSON:
            response = httpx.post(url, content=not_json, headers={"Content-Type": content_type}, timeout=10)
            assert_parse_error(response, content_type)
        assert_parse_error(httpx.post(url, files={"f": ("a.json", b"{}")}, timeout=10), "files")
        # And it still serves.
        assert httpx.post(url, json=standings_batch(1, league_id)[0], timeout=10).json()["result"]["standings"]
    finally:
        server.terminate()


# -- rate limits count items ----------------------------------------------------------------------
def _e017(item: dict) -> bool:
    if "error" in item:  # MCP's own methods and resources: a JSON-RPC error carrying E017
        return item["error"]["code"] == -32000 and item["error"]["data"]["error_code"] == "E017"
    result = item["result"]
    return result.get("message_type") == "LEAGUE_ERROR" and result["error_code"] == "E017"


def test_rate_limits_count_the_items_of_a_batch_of_any_method(lm_server, settings):
    settings.MCP_RATE_LIMIT_PER_ADDRESS = 6
    make_league()
    rpc = [
        *standings_batch(2, None),
        {"jsonrpc": "2.0", "id": "r1", "method": "resources/read", "params": {"uri": "league://standings"}},
        {"jsonrpc": "2.0", "id": "r2", "method": "resources/read", "params": {"uri": "league://schedule"}},
        {"jsonrpc": "2.0", "id": "t1", "method": "tools/list"},
        {"jsonrpc": "2.0", "id": "i1", "method": "initialize", "params": {"protocolVersion": "2025-06-18"}},
        {"jsonrpc": "2.0", "id": "p1", "method": "ping"},
        {"jsonrpc": "2.0", "id": "x1", "method": "no_such_method"},
        *standings_batch(2, None),
    ]
    replies = post(lm_server, rpc).json()
    assert len(replies) == len(rpc)
    refused = [item["id"] for item in replies if _e017(item)]
    assert len(refused) == len(rpc) - 6, replies  # six items were allowed, not one request
    # The bucket is empty: the next request, of one item, is refused with HTTP 429 whatever it is.
    for item in (standings_batch(1, None)[0], {"jsonrpc": "2.0", "id": 9, "method": "tools/list"}):
        response = post(lm_server, item)
        assert response.status_code == 429 and _e017(response.json()), response.text


def test_a_refused_mcp_method_says_when_to_retry(lm_server, settings):
    settings.MCP_RATE_LIMIT_PER_ADDRESS = 1
    assert post(lm_server, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).status_code == 200
    refused = post(lm_server, {"jsonrpc": "2.0", "id": 2, "method": "resources/list"})
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["data"]["retryable"] is True and error["data"]["retry_after_seconds"] == 60
    assert error["data"]["per"] == "address" and "rate limit exceeded" in error["message"]


# -- anonymous reads write nothing ------------------------------------------------------------------
def test_anonymous_reads_write_no_event_rows_and_an_agents_query_is_kept(lm_server):
    make_league(players=3)
    alpha = register_player(lm_server, "alpha", league_id="test_league")
    token, me = alpha["auth_token"], f"player:{alpha['player_id']}"
    events = Event.objects.count()
    reads = [
        *standings_batch(40),
        *standings_batch(10, None),
        {"jsonrpc": "2.0", "id": "bad", "method": "get_standings", "params": {"league_id": "no_such_league"}},
        {"jsonrpc": "2.0", "id": "typed", "method": "get_standings", "params": {"league_id": 7}},
        {"jsonrpc": "2.0", "id": "list", "method": "list_leagues", "params": {}},
        {"jsonrpc": "2.0", "id": "ping", "method": "tools/call", "params": {"name": "ping", "arguments": {}}},
        {"jsonrpc": "2.0", "id": "res", "method": "resources/read", "params": {"uri": "league://standings"}},
        {
            "jsonrpc": "2.0",
            "id": "forged",
            "method": "league_query",
            "params": message("LEAGUE_QUERY", "player:P01", auth_token="not-a-token", query_type="GET_STANDINGS"),
        },
        {
            "jsonrpc": "2.0",
            "id": "tokenless",
            "method": "league_query",
            "params": message("LEAGUE_QUERY", "player:P01", query_type="GET_STANDINGS"),
        },
    ]
    replies = {item["id"]: item for item in post(lm_server, reads).json()}
    assert len(replies[0]["result"]["standings"]) == 4
    assert replies["bad"]["result"]["message_type"] == "LEAGUE_ERROR"
    assert replies["forged"]["result"]["error_code"] == "E012"
    assert replies["tokenless"]["result"]["error_code"] == "E011"
    assert Event.objects.count() == events
    # An agent's own query is an exchange its token proves: the audit keeps it.
    query = message("LEAGUE_QUERY", me, auth_token=token, query_type="GET_STANDINGS")
    assert post(lm_server, {"jsonrpc": "2.0", "id": 1, "method": "league_query", "params": query}).status_code == 200
    kept = Event.objects.filter(pk__gt=0).order_by("-id")[:2]
    assert {(e.direction, e.kind, e.agent) for e in kept} == {
        ("IN", "LEAGUE_QUERY", me),
        ("OUT", "LEAGUE_QUERY_RESPONSE", me),
    }
    assert Event.objects.count() == events + 2


# -- the reply's size bound -------------------------------------------------------------------------
def test_a_batchs_replies_stop_at_the_reply_bound_with_a_clear_error(lm_server, settings):
    make_league(players=20)
    one = post(lm_server, standings_batch(1)).content
    settings.MCP_MAX_REPLY_BYTES = 5 * len(one) + 100  # five answers fit, not six
    response = post(lm_server, standings_batch(30))
    assert response.status_code == 200
    assert len(response.content) <= settings.MCP_MAX_REPLY_BYTES + 30 * 400  # the answers, then short errors
    replies = response.json()
    assert [r["id"] for r in replies] == list(range(30))  # every item answered, in order
    answered = [r for r in replies if "result" in r]
    refused = [r["error"] for r in replies if "error" in r]
    assert len(answered) == 5 and len(refused) == 25
    assert all(len(r["result"]["standings"]) == 20 for r in answered)
    for error in refused:
        assert error["code"] == -32003 and f"limit of {settings.MCP_MAX_REPLY_BYTES} bytes" in error["message"]
        assert "in a request of its own" in error["message"] and error["data"]["retryable"] is True
    # A single answer larger than the bound is refused alone, saying so.
    settings.MCP_MAX_REPLY_BYTES = len(one) // 2
    alone = post(lm_server, standings_batch(1)[0])
    assert alone.status_code == 200
    error = alone.json()["error"]
    assert error["code"] == -32003 and error["data"]["reply_bytes"] > settings.MCP_MAX_REPLY_BYTES
    assert "ask for less" in error["message"] and error["data"]["retryable"] is False
