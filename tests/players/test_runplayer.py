"""``manage.py runplayer`` as a real process against the live LM."""

from __future__ import annotations

import argparse
import json

import httpx
import pytest
from django.core.management import CommandError, call_command

from league.models import Player as PlayerRow
from players.management.commands.runplayer import EXIT_REFUSED, strategy_mix
from tests.league.lm_support import make_league
from tests.support.servers import Process, free_port, free_ports
from tests.support.waiting import wait_until


@pytest.mark.processes
def test_runplayer_count_50_starts_50_players_that_register_and_answer(lm_server, agent_env, manage_py, tmp_path):
    league = make_league("players_load", max_players=60)
    base = free_ports(50)
    process = Process(
        manage_py
        + ["runplayer", "--count", "50", "--port", str(base), "--name", "Load", "--strategy", "adaptive,always_odd"]
        + ["--league-url", lm_server, "--league-id", league.league_id, "--log-level", "WARNING"],
        agent_env,
        log_path=str(tmp_path / "runplayer.log"),
    )
    try:
        wait_until(lambda: PlayerRow.objects.filter(league=league).count() == 50, timeout=60)
        rows = PlayerRow.objects.filter(league=league)
        assert {r.endpoint for r in rows} == {f"http://127.0.0.1:{base + i}/mcp" for i in range(50)}
        assert {r.display_name for r in rows} == {f"Load-{i}" for i in range(1, 51)}
        assert len({r.token_hash for r in rows}) == 50
        with httpx.Client() as http:
            for row in rows:
                ping = http.post(row.endpoint, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=5)
                assert ping.json()["result"] == {}
                state = http.post(row.endpoint, json={"jsonrpc": "2.0", "id": 2, "method": "get_player_state"})
                assert state.json()["result"]["player_id"] == row.player_id  # each port is its own player
                number = int(row.display_name.split("-")[1])  # the mix is dealt out in turn
                assert state.json()["result"]["strategy"] == ("adaptive" if number % 2 else "always_odd")
    finally:
        process.terminate()


@pytest.mark.processes
def test_runplayer_query_prints_the_lm_answer(lm_server, agent_env, manage_py, tmp_path):
    league = make_league("players_query")
    state_dir = tmp_path / "state"
    args = manage_py + ["runplayer", "--name", "Quinn", "--league-url", lm_server, "--league-id", league.league_id]
    args += ["--state-dir", str(state_dir), "--query", "GET_STANDINGS", "--port", str(free_port())]
    first_log = tmp_path / "first.log"
    # No saved identity yet: it registers (and keeps playing), printing the answer on the way.
    first = Process(args, agent_env, log_path=str(first_log))
    try:
        wait_until(lambda: '"LEAGUE_QUERY_RESPONSE"' in first_log.read_text(), timeout=20)
    finally:
        first.terminate()
    assert (state_dir / "Quinn.json").exists()
    # With the identity saved, --query just asks and exits.
    second_log = tmp_path / "second.log"
    second = Process(args, agent_env, log_path=str(second_log))
    assert second.proc.wait(20) == 0
    reply = json.loads(second_log.read_text())
    assert reply["message_type"] == "LEAGUE_QUERY_RESPONSE" and reply["success"] is True
    assert reply["query_type"] == "GET_STANDINGS"
    assert [row["player_id"] for row in reply["data"]["standings"]] == ["P01"]


@pytest.mark.parametrize(
    ("value", "mix"),
    [
        ("random", ["random"]),
        ("random,always_even", ["random", "always_even"]),
        (" alternate , llm ", ["alternate", "llm"]),
    ],
)
def test_strategy_takes_one_name_or_a_comma_separated_mix(value, mix):
    assert strategy_mix(value) == mix


@pytest.mark.parametrize("value", ["", ",", "random,nosuch", "cheat"])
def test_an_unknown_or_empty_strategy_is_refused_with_the_choices(value):
    with pytest.raises(argparse.ArgumentTypeError, match="choose from .*always_even"):
        strategy_mix(value)


def test_a_mix_needs_more_than_one_player():
    with pytest.raises(CommandError, match="needs --count 2"):
        call_command("runplayer", "--strategy", "random,always_even", "--no-register")


def _run(manage_py, agent_env, tmp_path, *args: str, timeout: float = 30) -> tuple[int, str]:
    """``runplayer`` as a process to its end: (exit status, everything it printed)."""
    log = tmp_path / f"runplayer-{len(list(tmp_path.iterdir()))}.log"
    process = Process([*manage_py, "runplayer", "--port", str(free_port()), *args], agent_env, str(log))
    try:
        status = process.proc.wait(timeout)
    finally:
        process.kill()
    return status, log.read_text()


@pytest.mark.processes
def test_runplayer_says_why_each_attempt_failed_and_exits_1_when_it_gives_up(lm_server, agent_env, manage_py, tmp_path):
    port = free_port()
    nobody = f"http://127.0.0.1:{port}/mcp"
    status, output = _run(manage_py, agent_env, tmp_path, "--league-url", nobody, "--register-attempts", "2")
    assert status == 1
    assert f"registration attempt 1/2 failed: connection refused by 127.0.0.1:{port}" in output
    assert "attempt 2/2 failed: connection refused" in output
    assert f"giving up registration with {nobody} after 2 attempts" in output

    # The LM is up but no league is open: its LEAGUE_ERROR, code and text.
    status, output = _run(manage_py, agent_env, tmp_path, "--league-url", lm_server, "--register-attempts", "1")
    assert status == 1 and "attempt 1/1 failed: LEAGUE_ERROR E008: no league is open for registration" in output

    status, output = _run(
        manage_py, agent_env, tmp_path, "--league-url", "http://no-such-host.invalid/mcp", "--register-attempts", "1"
    )
    assert status == 1 and "attempt 1/1 failed: DNS: host 'no-such-host.invalid' does not resolve" in output


@pytest.mark.processes
def test_runplayer_exits_with_its_own_status_when_the_league_refuses_its_players(
    lm_server, agent_env, manage_py, tmp_path
):
    closed = make_league("closed_cup", open_seconds=None)  # created, registration never opened
    args = ["--league-url", lm_server, "--league-id", closed.league_id, "--count", "2", "--register-attempts", "1"]
    status, output = _run(manage_py, agent_env, tmp_path, *args)
    assert status == EXIT_REFUSED == 3, output
    assert f"registration refused by {lm_server}: Registration closed" in output
    assert "2 of 2 player(s) could not join the league: the league refused them" in output
    assert not PlayerRow.objects.filter(league=closed).exists()


@pytest.mark.processes
def test_runplayer_refuses_a_league_url_without_http_at_once(agent_env, manage_py, tmp_path):
    status, output = _run(manage_py, agent_env, tmp_path, "--league-url", "127.0.0.1:8000/mcp", timeout=15)
    assert status == 2
    assert "'127.0.0.1:8000/mcp' is not an http:// or https:// URL with a host" in output
    assert "did you mean http://127.0.0.1:8000/mcp?" in output
    assert "registration attempt" not in output


@pytest.mark.processes
def test_runplayer_says_at_once_what_to_do_when_asking_again_cannot_succeed(lm_server, agent_env, manage_py, tmp_path):
    base = lm_server.removesuffix("/mcp")
    # The site's address without /mcp: its pages answer 403 (CSRF) or 404, never a registration.
    for url, status in ((base + "/", 403), (base + "/nope", 404)):
        code, output = _run(manage_py, agent_env, tmp_path, "--league-url", url)
        assert code == 1, output
        assert f"cannot register with {url}: HTTP {status}: this URL is not a League Manager's /mcp endpoint" in output
        assert f"did you mean {base}/mcp?" in output and "attempt" not in output

    make_league("open_one")
    make_league("open_two")
    code, output = _run(manage_py, agent_env, tmp_path, "--league-url", lm_server, "--league-id", "nosuch")
    assert code == 1 and "attempt" not in output, output
    assert "there is no league 'nosuch' there; open for registration: open_one, open_two" in output
    assert "(run again with --league-id <one of them>)" in output

    code, output = _run(manage_py, agent_env, tmp_path, "--league-url", lm_server)
    assert code == 1 and "attempt" not in output, output
    assert "2 leagues are open for registration (open_one, open_two)" in output
    assert "run again with --league-id <one of them>" in output
