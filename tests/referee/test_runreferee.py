"""The referee against the real League Manager: ``runreferee`` as a process registers (and says
so), runs an assigned match and the LM stores the result; a best-of-5 match end to end; a clean
SIGTERM whose last line says it stopped."""

from __future__ import annotations

import json
import os

import httpx
import pytest

from league import actions
from league.conductor.dispatch import MatchToStart, start_match_message
from league.models import League, MatchResult, Player, Referee, hash_token
from tests.referee.conftest import run_referee
from tests.referee.scripted import ScriptedLM, ScriptedPlayer, serving
from tests.support.servers import Process, default_database_in, free_port, wait_for_port
from tests.support.waiting import wait_until

FAST = {
    "join_timeout": 0.5,
    "move_timeout": 0.5,
    "game_over_timeout": 0.5,
    "report_timeout": 2.0,
    "default_timeout": 0.5,
    "retries": 1,
    "retry_delay": 0.05,
}


def wait_for(query, timeout: float = 20.0):
    return wait_until(query, timeout)


def league_with_players(league_id: str, game_type: str, players) -> tuple[League, list[Player]]:
    league = League.objects.create(
        league_id=league_id, name=league_id, game_type=game_type, status=League.Status.REGISTERING, **FAST
    )
    rows = [
        Player.objects.create(
            league=league,
            player_id=player.player_id,
            display_name=player.player_id,
            endpoint=url,
            game_types=[game_type],
            token_hash=hash_token(f"token-{player.player_id}"),
        )
        for player, url in players
    ]
    return league, rows


def assign_and_start(league: League, players: list[Player], referee: Referee) -> MatchResult:
    match = actions.create_match(league, 1, players[0], players[1], referee=referee)
    message = start_match_message(league, MatchToStart.of(match), referee)
    body = {"jsonrpc": "2.0", "id": 1, "method": "start_match", "params": message}
    reply = httpx.post(referee.endpoint, json=body, timeout=5).json()["result"]
    assert reply["status"] == "ACCEPTED", reply
    return wait_for(lambda: MatchResult.objects.filter(match=match).first())


@pytest.mark.processes
def test_it_registers_and_runs_an_assigned_match_as_a_process(lm_server, agent_env, manage_py, players, tmp_path):
    a, url_a = players(ScriptedPlayer("P01", choices=["even"]))
    b, url_b = players(ScriptedPlayer("P02", choices=["odd"]))
    league, rows = league_with_players("league_ref_proc", "even_odd", [(a, url_a), (b, url_b)])
    port = free_port()
    state_dir = tmp_path / "state"
    args = [*manage_py, "runreferee", "--port", str(port), "--league-url", lm_server, "--name", "RefProc"]
    proc = Process([*args, "--state-dir", str(state_dir), "--grace", "2"], agent_env, str(tmp_path / "ref.log"))
    try:
        wait_for_port(port)
        referee = wait_for(lambda: Referee.objects.filter(league=league).first())
        assert (referee.referee_id, referee.display_name) == ("REF01", "RefProc")
        assert referee.endpoint == f"http://127.0.0.1:{port}/mcp"
        identity = wait_for(lambda: (state_dir / "identity.json").exists() and (state_dir / "identity.json"))
        assert json.loads(identity.read_text())["referee_id"] == "REF01"

        result = assign_and_start(league, rows, referee)
        assert result.referee == referee
        number = result.details["drawn_number"]
        assert result.outcome == (MatchResult.Outcome.WIN_A if number % 2 == 0 else MatchResult.Outcome.WIN_B)
        assert result.details["choices"] == {"P01": "even", "P02": "odd"}
        assert [e["message_type"] for e in result.log][:2] == ["WAITING_FOR_PLAYERS", "GAME_INVITATION"]
        # Players got the per-match token, never the referee's own.
        assert a.received.of("handle_game_invitation")[0]["auth_token"] not in (None, "")

        assert proc.terminate() == 0  # SIGTERM: a clean stop
    finally:
        proc.kill()
    output = (tmp_path / "ref.log").read_text()
    assert "Traceback" not in output
    # It says when it registered, with its id and league, and its last line is a clean stop.
    assert f"referee RefProc registered as REF01 in league league_ref_proc ({lm_server}); waiting for matches" in output
    assert output.strip().splitlines()[-1] == "referee REF01 stopped after 1 match(es)"


def test_it_runs_a_best_of_five_match_for_the_real_lm(lm_server, players, tmp_path):
    odd, url_a = players(ScriptedPlayer("P01", moves=[2]))
    even, url_b = players(ScriptedPlayer("P02", moves=[1]))  # every sum is 3: ODD wins 3-0
    league, rows = league_with_players("league_ref_bo5", "even_odd_bo5", [(odd, url_a), (even, url_b)])
    with run_referee(league_url=lm_server, league_id="league_ref_bo5", state_dir=tmp_path) as running:
        running.wait_registered()
        referee = Referee.objects.get(league=league)
        result = assign_and_start(league, rows, referee)
    assert result.outcome == MatchResult.Outcome.WIN_A
    assert (result.points_a, result.points_b) == (3, 0)
    assert result.details["scores"] == {"P01": 3, "P02": 0}
    assert len(result.details["rounds"]) == 3
    assert [r["game_round"] for r in even.received.of("make_move")] == [1, 2, 3]


@pytest.mark.processes
def test_runreferee_sends_its_key_and_exits_1_when_the_key_is_refused(agent_env, manage_py, tmp_path):
    lm = ScriptedLM()
    lm.key = "the-operators-key"
    with serving(lm.app()) as lm_server:
        base = [*manage_py, "runreferee", "--league-url", lm_server.url, "--name", "Keyed", "--grace", "1"]
        # The key from the environment: accepted.
        port = free_port()
        env = {**agent_env, "REFEREE_KEY": "the-operators-key"}
        proc = Process([*base, "--port", str(port)], env, str(tmp_path / "good.log"))
        try:
            (request,) = lm.received.wait_for("register_referee")
            assert request["referee_key"] == "the-operators-key"
            wait_for(lambda: "registered as REF01" in (tmp_path / "good.log").read_text())
            assert proc.terminate() == 0
        finally:
            proc.kill()
        # A wrong key on the command line: it says why and exits 1, without retrying for ever.
        bad = Process([*base, "--port", str(free_port()), "--key", "a-guess"], agent_env, str(tmp_path / "bad.log"))
        try:
            assert bad.proc.wait(30) == 1
        finally:
            bad.kill()
    output = (tmp_path / "bad.log").read_text()
    assert "registration refused: the League Manager refused the key given (--key / REFEREE_KEY): E012" in output
    assert "REFEREE_KEY" in output.strip().splitlines()[-1]
    assert len(lm.received.of("register_referee")) == 2  # one attempt each


@pytest.mark.processes
def test_runreferee_never_opens_the_sites_database(manage_py, tmp_path):
    # A referee on a machine of its own has no database; one opened would be created empty.
    env, default = default_database_in(tmp_path / "site", os.environ)
    lm = ScriptedLM()
    with serving(lm.app()) as lm_server:
        args = [*manage_py, "runreferee", "--league-url", lm_server.url, "--port", str(free_port()), "--grace", "1"]
        proc = Process(args, env, str(tmp_path / "ref.log"))
        try:
            wait_for(lambda: "registered as REF01" in (tmp_path / "ref.log").read_text())
            assert proc.terminate() == 0
        finally:
            proc.kill()
    assert not default.exists()
