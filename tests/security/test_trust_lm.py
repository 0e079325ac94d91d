"""Trust at the League Manager: only keyed referees register, a result needs a match log that
produces it, a registration proves who sends it, and a finished league takes no more results.
Each test goes through the LM's real /mcp over HTTP (a real ``runreferee`` process where the
referee itself is the point)."""

from __future__ import annotations

import json
import logging

import httpx
import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from league import actions
from league.models import Event, League, Match, MatchResult, Player, Referee
from tests.league.lm_support import (
    assigned_match,
    call,
    make_league,
    message,
    played_log,
    player_meta,
    referee_meta,
    register_player,
    register_referee,
    win_report,
)
from tests.support.servers import Process, free_port, wait_for_port
from tests.support.waiting import wait_until


def _logged(text: str) -> bool:
    """Whether ``text`` appears anywhere in the event log."""
    return any(text in json.dumps(payload) for payload in Event.objects.values_list("payload", flat=True))


def _refused_for(reply: dict, field: str) -> bool:
    return reply.get("error_code") == "E012" and reply["context"]["field"] == field


# -- the referee key ------------------------------------------------------------------------------
def test_a_referee_without_the_key_or_with_a_wrong_one_is_refused_and_nothing_is_stored(lm_server, caplog):
    make_league()
    actions.registration.log_key_advice.cache_clear()  # as in a process that refused no referee yet
    with caplog.at_level(logging.WARNING, logger="league.actions"):
        # The rogue referee of the finding: no key at all, and a large capacity to be picked first.
        rogue = referee_meta(display_name="rogue", max_concurrent_matches=50)
        missing = register_referee(lm_server, "rogue", referee_meta=rogue, referee_key=None)
        wrong = register_referee(lm_server, "rogue", referee_meta=rogue, referee_key="guessed-key-é")
    assert _refused_for(missing, "referee_key") and _refused_for(wrong, "referee_key")
    assert "guessed" not in str(wrong)  # a near miss is not echoed back
    assert not Referee.objects.exists()
    # The operator is told once how to let referees in, not once per attempt.
    advice = [r.getMessage() for r in caplog.records if "REFEREE_KEY" in r.getMessage()]
    assert len(advice) == 1 and "docs/operations.md" in advice[0]
    # The key is a secret like a token: never in the event log.
    assert not _logged("guessed")
    assert register_referee(lm_server, "honest")["status"] == "ACCEPTED"


def test_with_no_key_configured_every_referee_is_refused(lm_server, settings):
    make_league()
    settings.REFEREE_KEY = ""
    for key in (None, "", "anything"):
        reply = register_referee(lm_server, "ref", referee_key=key)
        assert _refused_for(reply, "referee_key") and "has set no referee key" in reply["error_description"]
    assert not Referee.objects.exists()


def test_a_league_key_from_the_admin_is_shown_once_rotates_and_revokes(lm_server, client, settings):
    settings.REFEREE_KEY = ""  # no site key: the league's own key is the only way in
    league = make_league()
    client.force_login(User.objects.create_superuser("admin", "admin@example.com", "pw"))
    changelist = reverse("admin:league_league_changelist")

    def generate() -> str:
        page = client.post(changelist, {"action": "generate_referee_key", "_selected_action": [league.pk]})
        assert page.status_code == 200 and "no-store" in page["Cache-Control"]
        text = page.content.decode()
        return text.split('<code class="referee-key">', 1)[1].split("</code>", 1)[0]

    first = generate()
    league.refresh_from_db()
    assert first not in league.referee_key_hash and len(league.referee_key_hash) == 64  # stored hashed
    assert register_referee(lm_server, "r1", referee_key=first)["status"] == "ACCEPTED"
    second = generate()  # rotation: the first key stops working
    assert _refused_for(register_referee(lm_server, "r2", referee_key=first), "referee_key")
    assert register_referee(lm_server, "r2", referee_key=second)["status"] == "ACCEPTED"
    client.post(changelist, {"action": "revoke_referee_key", "_selected_action": [league.pk]})
    assert _refused_for(register_referee(lm_server, "r3", referee_key=second), "referee_key")
    assert Referee.objects.count() == 2
    assert not _logged(first) and not _logged(second)
    kinds = list(Event.objects.filter(kind__startswith="referee_key").values_list("kind", flat=True))
    assert kinds == ["referee_key_generated", "referee_key_generated", "referee_key_revoked"]


def test_a_referee_key_of_one_league_opens_no_other(lm_server, settings):
    settings.REFEREE_KEY = ""
    cup = make_league("cup")
    make_league("other")
    key = actions.generate_referee_key(cup)
    assert _refused_for(register_referee(lm_server, "ref", league_id="other", referee_key=key), "referee_key")
    assert register_referee(lm_server, "ref", league_id="cup", referee_key=key)["status"] == "ACCEPTED"


def _wait_for(query, timeout: float = 30.0):
    return wait_until(query, timeout)


@pytest.mark.processes
def test_runreferee_registers_only_with_the_key_in_its_environment(lm_server, agent_env, manage_py, tmp_path):
    make_league()
    port = free_port()
    args = [*manage_py, "runreferee", "--port", str(port), "--league-url", lm_server, "--grace", "1"]
    keyless = {k: v for k, v in agent_env.items() if k != "REFEREE_KEY"}
    log = tmp_path / "keyless.log"
    proc = Process([*args, "--name", "Keyless"], keyless, str(log))
    try:
        wait_for_port(port)
        # It tries, is refused with the reason, and stays out.
        _wait_for(lambda: "E012" in log.read_text() and "referee_key" in log.read_text())
        assert not Referee.objects.exists()
    finally:
        proc.terminate()
    port = free_port()
    args = [*manage_py, "runreferee", "--port", str(port), "--league-url", lm_server, "--grace", "1"]
    proc = Process([*args, "--name", "Keyed"], agent_env, str(tmp_path / "keyed.log"))
    try:
        referee = _wait_for(lambda: Referee.objects.first())
        assert referee.display_name == "Keyed"
    finally:
        proc.terminate()


# -- who registers ---------------------------------------------------------------------------------
@pytest.mark.parametrize("sender", ["league_manager", "referee:x", "league_manager:LM01"])
def test_only_a_player_registers_as_a_player(lm_server, sender):
    make_league()
    request = message("LEAGUE_REGISTER_REQUEST", sender, player_meta=player_meta(display_name="x"))
    reply = call(lm_server, "register_player", request)
    assert _refused_for(reply, "sender")
    assert not Player.objects.exists()


def test_a_token_sent_under_another_agents_id_updates_no_one(lm_server):
    make_league()
    alpha = register_player(lm_server, "alpha", player_meta=player_meta("http://127.0.0.1:9701/mcp"))
    register_player(lm_server, "beta", player_meta=player_meta("http://127.0.0.1:9702/mcp"))
    reply = register_player(
        lm_server, "P02", player_meta=player_meta("http://127.0.0.1:9703/mcp"), auth_token=alpha["auth_token"]
    )
    assert _refused_for(reply, "sender")
    endpoints = dict(Player.objects.values_list("player_id", "endpoint"))
    assert endpoints == {"P01": "http://127.0.0.1:9701/mcp", "P02": "http://127.0.0.1:9702/mcp"}
    # Its own id, or a name of its own, is fine (the course's agents send their name).
    again = register_player(
        lm_server, "alpha", player_meta=player_meta("http://127.0.0.1:9704/mcp"), auth_token=alpha["auth_token"]
    )
    assert again["status"] == "ACCEPTED" and again["player_id"] == "P01"


def test_an_unknown_token_is_refused_not_taken_for_a_new_player(lm_server):
    make_league()
    register_player(lm_server, "alpha")
    reply = register_player(lm_server, "beta", auth_token="made-up-token")
    assert _refused_for(reply, "auth_token")
    assert Player.objects.count() == 1
    # Without a token, the same registration is a new player, as the course's registration is.
    assert register_player(lm_server, "beta")["player_id"] == "P02"


def test_a_referee_re_registering_is_held_to_the_leagues_game(lm_server):
    make_league()
    ref = register_referee(lm_server, "ref", referee_meta=referee_meta("http://127.0.0.1:9711/mcp"))
    chess = referee_meta("http://127.0.0.1:9712/mcp", game_types=["chess"])
    reply = register_referee(lm_server, "REF01", referee_meta=chess, auth_token=ref["auth_token"])
    assert reply["status"] == "REJECTED" and reply["reason"] == "Game type not supported"
    referee = Referee.objects.get()
    assert (referee.game_types, referee.endpoint) == (["even_odd"], "http://127.0.0.1:9711/mcp")


def test_players_and_referees_never_share_an_endpoint(lm_server):
    make_league()
    referee_at, player_at = "http://127.0.0.1:9721/mcp", "http://127.0.0.1:9722/mcp"
    ref = register_referee(lm_server, "ref", referee_meta=referee_meta(referee_at))
    alpha = register_player(lm_server, "alpha", player_meta=player_meta(player_at))
    as_player = register_player(lm_server, "beta", player_meta=player_meta(referee_at))
    assert as_player["status"] == "REJECTED" and as_player["reason"] == "Endpoint is used by a referee of this league"
    as_referee = register_referee(lm_server, "ref2", referee_meta=referee_meta(player_at))
    assert as_referee["status"] == "REJECTED" and as_referee["reason"] == "Endpoint is used by a player of this league"
    # Nor by moving there on re-registration.
    moved = register_player(lm_server, "P01", player_meta=player_meta(referee_at), auth_token=alpha["auth_token"])
    assert moved["status"] == "REJECTED"
    moved = register_referee(lm_server, "REF01", referee_meta=referee_meta(player_at), auth_token=ref["auth_token"])
    assert moved["status"] == "REJECTED"
    assert (Player.objects.count(), Referee.objects.count()) == (1, 1)
    assert Player.objects.get().endpoint == player_at and Referee.objects.get().endpoint == referee_at


# -- results ----------------------------------------------------------------------------------------
def _match_with_a_referee(lm_server) -> dict:
    league = make_league()
    ref = register_referee(lm_server, "ref")
    register_player(lm_server, "a")
    register_player(lm_server, "b")
    assigned_match(league)
    return ref


def _refused_by_the_log(reply: dict, why: str) -> bool:
    return (
        reply.get("error_code") == "E015"
        and reply["context"]["field"] == "match_log"
        and why in reply["error_description"]
    )


def test_a_result_with_an_empty_log_is_refused(lm_server):
    report = win_report(_match_with_a_referee(lm_server))
    report["match_log"] = []  # what the rogue referee of the finding sent
    assert _refused_by_the_log(call(lm_server, "report_match_result", report), "the match log is empty")
    assert not MatchResult.objects.exists() and Match.objects.get().status == Match.Status.ASSIGNED


def test_a_result_its_log_contradicts_is_refused(lm_server):
    ref = _match_with_a_referee(lm_server)
    # P01 chose even, P02 odd, and 3 was drawn: P02 won, whatever the report says.
    report = win_report(ref)
    report["match_log"] = played_log({"P01": "even", "P02": "odd"}, 3)
    reply = call(lm_server, "report_match_result", report)
    assert _refused_by_the_log(reply, "P02 chose odd, number was 3 (odd), not a WIN of P01")
    # A technical loss that the log shows no failure for.
    report = win_report(ref)
    report["result"] = {"status": "TECHNICAL_LOSS", "winner": "P01", "score": {"P01": 3, "P02": 0}}
    report["result"] |= {"technical_loss": ["P02"], "details": {}}
    report["match_log"] = played_log({"P01": "even", "P02": "odd"}, 8, failed=("P01",))
    assert _refused_by_the_log(call(lm_server, "report_match_result", report), "no failure of P02")
    assert not MatchResult.objects.exists()
    # The log of the match as it went is taken.
    assert call(lm_server, "report_match_result", win_report(ref))["status"] == "RECORDED"


def test_a_completed_league_takes_no_more_results(lm_server):
    league = make_league()
    ref = register_referee(lm_server, "ref")
    register_player(lm_server, "a")
    register_player(lm_server, "b")
    assigned_match(league)
    League.objects.filter(pk=league.pk).update(status=League.Status.COMPLETED)
    reply = call(lm_server, "report_match_result", win_report(ref))
    assert reply["error_code"] == "E015" and reply["context"]["league_status"] == "COMPLETED"
    assert not MatchResult.objects.exists()
    assert Match.objects.get().status == Match.Status.ASSIGNED


# -- odd input ----------------------------------------------------------------------------------------
def _odd_logs(log: list[dict]) -> list[list]:
    """The log of a real match, bent in ways a careless or hostile referee might."""
    bent = []
    for key, value in [
        ("outcome", ["ok"]),
        ("outcome", {"x": 1}),
        ("message", ["not", "an", "object"]),
        ("message", "text"),
        ("method", {"choose": "parity"}),
        ("peer", ["P01"]),
        ("direction", None),
        ("message_type", ["RESOLVED"]),
    ]:
        for n in range(len(log)):
            entry = json.loads(json.dumps(log))
            entry[n][key] = value
            bent.append(entry)
    resolved = next(n for n, e in enumerate(log) if e["message_type"] == "RESOLVED")
    for drawn in ("8", 8.0, True, None, [8], {"n": 8}, -1, 10**30):
        entry = json.loads(json.dumps(log))
        entry[resolved]["message"]["drawn_number"] = drawn
        bent.append(entry)
    for choice in (None, 1, ["even"], "EVEN"):
        entry = json.loads(json.dumps(log))
        for e in entry:
            if e["direction"] == "IN" and e["method"] == "choose_parity":
                e["message"]["parity_choice"] = choice
        bent.append(entry)
    return bent


def _sent(url: str, method: str, params: dict) -> dict:
    """A JSON-RPC call written by ``json.dumps`` (ASCII escapes: a lone surrogate goes as \\ud800)."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    response = httpx.post(url, content=body, headers={"Content-Type": "application/json"}, timeout=10)
    assert response.status_code < 500, response.text
    return response.json()


def test_odd_values_get_a_league_error_never_an_exception(lm_server):
    ref = _match_with_a_referee(lm_server)
    report = win_report(ref)
    answers = [
        _sent(lm_server, "report_match_result", {**report, "match_log": log}) for log in _odd_logs(report["match_log"])
    ]
    for odd in ("é", "\ud800", "x" * 10_000, " ", 5, ["k"], {"k": 1}, True):
        player = message("LEAGUE_REGISTER_REQUEST", "player:z", auth_token=odd, player_meta=player_meta())
        referee = message("REFEREE_REGISTER_REQUEST", "referee:z", referee_key=odd, referee_meta=referee_meta())
        answers += [_sent(lm_server, "register_player", player), _sent(lm_server, "register_referee", referee)]
    for body in answers:
        assert "result" in body or body["error"]["code"] != -32603, body
        assert body.get("result", {}).get("error_code") != "E010", body
    # A bend that changes nothing the rules read may be recorded; then the match has its result.
    assert MatchResult.objects.count() <= 1 and not Referee.objects.exclude(referee_id="REF01").exists()
