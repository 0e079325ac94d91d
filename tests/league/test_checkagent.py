"""Check my agent (league/checkagent.py): ``manage.py checkagent`` and ``/check/`` against the
course's minimal player (a real process) and a broken player, over real HTTP."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from collections.abc import Iterator

import pytest
from django.apps import apps
from django.core.management import CommandError, call_command
from django.test import Client

from league.checkagent import FAIL, NOTICES, OK, PASS, WARN, find_registration, run_check
from league.models import League, Player
from league.pages.check import protocol_html
from league.ratelimit import limiter
from leagueproto.timeouts import Timeouts
from players.agent import Player as PlayerAgent
from players.agent import PlayerConfig, PlayerHost
from tests.compat.test_outgoing_fields import REQUIRED, missing_fields
from tests.league.checkagent_support import (
    CoursePlayer,
    minimal_player,
    non_utc,
    serving_broken_player,
    serving_course_player,
)
from tests.league.lm_support import make_league
from tests.referee.scripted import ScriptedPlayer, serving
from tests.support.servers import free_port

EVEN_ODD_STEPS = [
    "ROUND_ANNOUNCEMENT",
    "GAME_INVITATION",
    "CHOOSE_PARITY_CALL",
    "GAME_OVER",
    "LEAGUE_STANDINGS_UPDATE",
    "ROUND_COMPLETED",
    "LEAGUE_COMPLETED",
]
# The broken player's ROUND_COMPLETED must time out quickly; every other check here expects each
# reply in time and not "slow" (over half the limit), which a loaded machine can make of 1 s.
ONE_SECOND = Timeouts.every(1.0)
ROOMY = Timeouts.every(10.0)
DOC_IDS = frozenset(re.findall(r'<h\d id="([^"]+)"', protocol_html()))


@pytest.fixture(autouse=True)
def fresh_limits() -> Iterator[None]:
    limiter.local.clear()
    yield
    limiter.local.clear()


def rows_of_every_league_table() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in apps.get_app_config("league").get_models()}


@pytest.mark.processes
def test_the_minimal_player_passes_every_step(lm_server, agent_env, manage_py, tmp_path):
    league = make_league("check_minimal")
    with minimal_player(lm_server, league.league_id, agent_env, tmp_path / "mini.log") as url:
        done = subprocess.run(
            [*manage_py, "checkagent", url, "--json"], env=agent_env, capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    # Registered in a league not finished: called by its registered id, and sent no practice
    # LEAGUE_COMPLETED (which must not be able to end its seat there).
    assert [s["message_type"] for s in report["steps"]] == EVEN_ODD_STEPS[:-1]
    assert report["skipped"] == [
        "LEAGUE_COMPLETED skipped: your agent is registered in league check_minimal, which is not finished "
        "(a practice LEAGUE_COMPLETED must not end your seat there)"
    ]
    assert (report["player_id"], report["id_source"]) == ("P01", "registered in check_minimal")
    # Registered, it takes league notices only with its own league's league_manager_token, which
    # the check cannot show: those steps are advice, the match itself passes.
    verdicts = [(s["message_type"], s["verdict"]) for s in report["steps"]]
    assert verdicts == [(t, WARN if t in NOTICES else OK) for t in EVEN_ODD_STEPS[:-1]]
    assert (report["plays_match"], report["takes_notices"]) == (PASS, WARN)
    assert report["verdict"] == WARN and report["match_result"]["technical_loss"] == []
    assert all(s["reply"] and s["latency_ms"] is not None for s in report["steps"])
    # What the check sends is what a league sends (tests/compat/test_outgoing_fields.py's lists).
    for step in report["steps"]:
        assert missing_fields(step["sent"], REQUIRED.get(step["message_type"], ())) == [], step["message_type"]
    assert "league completed" not in (tmp_path / "mini.log").read_text()  # its league goes on


def test_a_broken_player_gets_each_failure_and_its_fix():
    with serving_broken_player() as url:
        report = asyncio.run(run_check(url, timeouts=ONE_SECOND))
    by_type: dict[str, list] = {}
    for step in report.steps:
        by_type.setdefault(step.message_type, []).append(step)
    assert report.verdict == FAIL and not report.passed
    assert (report.plays_match, report.takes_notices) == (FAIL, WARN)
    assert report.match_result["status"] == "TECHNICAL_LOSS" and report.match_result["technical_loss"] == ["P01"]

    [announcement] = by_type["ROUND_ANNOUNCEMENT"]
    assert announcement.verdict == WARN and "E003" in announcement.note
    assert "season_id" in announcement.fix and announcement.anchor == "messages-the-league-manager-sends"
    [invitation] = by_type["GAME_INVITATION"]
    assert (invitation.verdict, invitation.anchor) == (WARN, "the-envelope") and "not UTC" in invitation.note
    # An invalid choice is forgiven once (GAME_ERROR, asked again), then it is a technical loss.
    choices = by_type["CHOOSE_PARITY_CALL"]
    assert [c.verdict for c in choices] == [FAIL, FAIL]
    assert all('"even" or "odd"' in c.fix and c.anchor == "even_odd-default" for c in choices)
    errors = by_type["GAME_ERROR"]
    assert [e.verdict for e in errors] == [FAIL, FAIL]
    assert all("notify_game_error" in e.fix and e.anchor == "tools-a-player-serves" for e in errors)
    [game_over] = by_type["GAME_OVER"]
    assert game_over.verdict == WARN and "conversation_id" in game_over.fix
    [standings] = by_type["LEAGUE_STANDINGS_UPDATE"]
    assert standings.verdict == WARN and "HTTP 5xx" in standings.fix
    [completed] = by_type["ROUND_COMPLETED"]
    assert completed.verdict == WARN and completed.note.startswith("no reply in time")
    [league_completed] = by_type["LEAGUE_COMPLETED"]
    assert league_completed.verdict == WARN and "protocol, sender, timestamp, conversation_id" in league_completed.note
    # Every fix is one sentence and points into a section the protocol page has.
    for step in report.steps:
        assert step.fix and step.fix.count(". ") == 0 and step.fix.endswith("."), step.fix
        assert step.see == f"docs/protocol.md#{step.anchor}" and step.anchor in DOC_IDS


def test_the_command_prints_the_fixes_and_exits_1_on_failures(manage_py):
    with serving_broken_player() as url:
        done = subprocess.run(
            [*manage_py, "checkagent", url, "--timeout", "1"], capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    for message_type in ("ROUND_ANNOUNCEMENT", "CHOOSE_PARITY_CALL", "GAME_ERROR", "LEAGUE_COMPLETED"):
        assert message_type in out
    assert 'fix: Answer with parity_choice exactly "even" or "odd" (lower case).' in out
    assert "(see docs/protocol.md#even_odd-default)" in out
    assert "Verdict: fail" in out and "the agent failed the check" in done.stderr
    assert "Plays a match: fail" in out and "Takes league notices: warn" in out


def test_the_command_will_not_call_an_endpoint_the_league_would_refuse():
    with pytest.raises(CommandError, match="link-local or a metadata service"):
        call_command("checkagent", "http://169.254.169.254/mcp")


@pytest.mark.processes
def test_a_check_from_the_page_leaves_every_league_table_as_it_was(lm_server, agent_env, tmp_path):
    league = make_league("check_no_rows")
    with minimal_player(lm_server, league.league_id, agent_env, tmp_path / "mini.log") as url:
        before = rows_of_every_league_table()
        response = Client().post("/check/", {"endpoint": url, "game": "even_odd"})
        after = rows_of_every_league_table()
    assert response.status_code == 200
    assert b'data-verdict="ok"' in response.content
    assert before["Player"] == 1 and after == before


@pytest.mark.django_db  # the page looks the endpoint up among registered players
def test_checks_are_limited_per_client_address(settings):
    settings.CHECKAGENT_PER_MINUTE = 2
    nobody = f"http://127.0.0.1:{free_port()}/mcp"  # refused at once: each check is short
    client = Client()
    statuses = [
        client.post("/check/", {"endpoint": nobody, "game": "even_odd"}, REMOTE_ADDR="10.1.1.1").status_code
        for _ in range(3)
    ]
    assert statuses == [200, 200, 429]
    refused = client.post("/check/", {"endpoint": nobody, "game": "even_odd"}, REMOTE_ADDR="10.1.1.1")
    assert b"Too many checks from your address (at most 2 a minute)" in refused.content
    assert b"check-report" not in refused.content
    other = client.post("/check/", {"endpoint": nobody, "game": "even_odd"}, REMOTE_ADDR="10.1.1.2")
    assert other.status_code == 200 and b"Could not connect" in other.content and b"Stopped:" in other.content


def test_the_page_applies_the_endpoint_policy(settings):
    client = Client()
    metadata = client.post("/check/", {"endpoint": "http://169.254.169.254/mcp", "game": "even_odd"})
    assert metadata.status_code == 400 and b"link-local or a metadata service" in metadata.content
    settings.CHECKAGENT_ALLOWED_NETWORKS = "10.0.0.0/8"
    loopback = client.post("/check/", {"endpoint": f"http://127.0.0.1:{free_port()}/mcp", "game": "even_odd"})
    assert loopback.status_code == 400 and b"outside the league&#x27;s allowed networks" in loopback.content
    assert b"check-report" not in loopback.content


def test_the_checks_client_applies_the_policy_again_to_the_address_it_connects_to(settings):
    """What the page's policy passed (a name that resolved inside the networks) is checked again
    on each address connected to: an agent now outside them gets no call at all."""
    player = ScriptedPlayer("P01", choices=["even"])
    settings.CHECKAGENT_ALLOWED_NETWORKS = "10.0.0.0/8"
    with serving(player.app()) as server:
        report = asyncio.run(run_check(server.url, timeouts=ROOMY))
    assert report.verdict == FAIL
    assert "outside the league's allowed networks" in report.steps[0].note
    assert player.received.items == []


def test_a_best_of_five_check_plays_every_game_round_with_our_player():
    """Our runplayer agent, not registered (so it takes the check's notices): the bo5 messages too."""
    player = PlayerAgent(PlayerConfig(name="Alpha", strategy="random"))
    server = PlayerHost([player], register=False, stay=True).start_in_thread()
    try:
        report = asyncio.run(run_check(player.endpoint, game_type="even_odd_bo5"))
    finally:
        server.stop()
    types = [s.message_type for s in report.steps]
    assert report.verdict == OK, [(s.message_type, s.note) for s in report.steps if s.verdict != OK]
    assert types[:3] == ["ROUND_ANNOUNCEMENT", "GAME_INVITATION", "GAME_START"]
    assert types[-4:] == ["GAME_OVER", "LEAGUE_STANDINGS_UPDATE", "ROUND_COMPLETED", "LEAGUE_COMPLETED"]
    rounds = len(report.match_result["details"]["rounds"])
    assert 3 <= rounds <= 5 and types.count("MOVE_REQUEST") == types.count("ROUND_RESULT") == rounds


def test_an_answer_left_for_later_and_an_answer_under_another_id_are_explained():
    """A player that acknowledges the parity call (meaning to answer by a call of its own), then
    answers as P07, and serves none of the League Manager's notices."""
    player = ScriptedPlayer(
        "P01",
        choices=[ScriptedPlayer.MISSING, "even"],
        edits={"choose_parity": [{"message_type": "ACK"}, {"player_id": "P07"}]},
    )
    with serving(player.app()) as server:
        report = asyncio.run(run_check(server.url, timeouts=ROOMY))
    steps = {s.message_type: s for s in report.steps if s.message_type != "CHOOSE_PARITY_CALL"}
    later, impostor = [s for s in report.steps if s.message_type == "CHOOSE_PARITY_CALL"]
    assert later.verdict == FAIL and "in the HTTP reply itself" in later.fix and later.anchor == "how-a-match-runs"
    # Another id in the reply: the league takes it (the endpoint says who the agent is), with advice.
    assert impostor.verdict == WARN and "player_id 'P01'" in impostor.fix and "give that id" in impostor.fix
    assert steps["ROUND_ANNOUNCEMENT"].fix.startswith("Serve the tool notify_round")
    assert steps["ROUND_ANNOUNCEMENT"].verdict == WARN  # a notice: advice
    assert steps["GAME_OVER"].verdict == OK  # the match itself ends normally for the check
    assert report.match_result["technical_loss"] == []


def test_an_agent_called_p02_plays_the_house_bot_as_p01():
    player = ScriptedPlayer("P02", choices=["odd"])
    with serving(player.app()) as server:
        report = asyncio.run(run_check(server.url, player_id="P02", timeouts=ROOMY))
    game = [s for s in report.steps if s.message_type in ("GAME_INVITATION", "CHOOSE_PARITY_CALL", "GAME_OVER")]
    assert [(s.message_type, s.verdict) for s in game] == [
        ("GAME_INVITATION", OK), ("CHOOSE_PARITY_CALL", OK), ("GAME_OVER", OK)
    ]  # fmt: skip
    assert game[0].sent["player_id"] == "P02" and game[0].sent["opponent_id"] == "P01"
    assert report.match_result["technical_loss"] == [] and set(report.match_result["score"]) == {"P01", "P02"}


# -- agents as students write them ------------------------------------------------------------
def check_course_player(player: CoursePlayer, **options) -> tuple[object, dict[str, list]]:
    with serving_course_player(player) as url:
        report = asyncio.run(run_check(url, timeouts=ROOMY, **options))
    by_type: dict[str, list] = {}
    for step in report.steps:
        by_type.setdefault(step.message_type, []).append(step)
    return report, by_type


def test_an_agent_without_notice_tools_plays_a_match_and_is_only_warned_about_notices():
    report, by_type = check_course_player(CoursePlayer(notices=False))
    assert (report.plays_match, report.takes_notices, report.verdict) == (PASS, WARN, WARN)
    assert report.passed and report.match_result["technical_loss"] == []
    for notice in NOTICES:
        [step] = by_type[notice]
        assert step.verdict == WARN and step.fix.startswith(f"Serve the tool {step.method}")
    assert all(s.verdict == OK for s in report.steps if s.message_type not in NOTICES)


def test_the_command_gives_both_verdicts_and_exits_0_for_an_agent_without_notice_tools(manage_py):
    with serving_course_player(CoursePlayer(notices=False)) as url:
        done = subprocess.run(
            [*manage_py, "checkagent", url, "--timeout", "1"], capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Plays a match: pass" in done.stdout and "Takes league notices: warn" in done.stdout
    assert "Verdict: warn" in done.stdout


def test_invalid_params_name_the_field_of_ours_the_agent_asked_for():
    text = "1 validation error for ChooseParityArgs: parity_choice Field required [secret-words-4711]"
    report, by_type = check_course_player(CoursePlayer(rpc_errors={"choose_parity": (-32602, text)}))
    [choice] = by_type["CHOOSE_PARITY_CALL"]
    assert choice.rpc_code == -32602 and choice.verdict == FAIL and choice.reply is None
    assert choice.note == "your agent rejected our params (JSON-RPC -32602 invalid params, naming parity_choice)"
    assert "wants parity_choice among its arguments" in choice.fix and "put parity_choice in the reply" in choice.fix
    assert "secret-words-4711" not in json.dumps(report.to_dict())  # its words are never shown
    assert report.plays_match == FAIL and report.match_result["technical_loss"] == ["P01"]


def test_invalid_params_on_a_notice_name_our_fields_it_refused():
    text = "invalid params: matches.0.referee_endpoint: expected string, league_id too long"
    report, by_type = check_course_player(CoursePlayer(rpc_errors={"notify_round": (-32602, text)}))
    [announcement] = by_type["ROUND_ANNOUNCEMENT"]
    assert announcement.verdict == WARN and announcement.rpc_code == -32602
    assert announcement.note.endswith("naming league_id, matches, referee_endpoint)")
    assert "accept ROUND_ANNOUNCEMENT as the league sends it: its league_id, matches, referee_endpoint" in (
        announcement.fix
    )
    assert report.plays_match == PASS


def test_an_internal_error_says_in_which_handler_the_agent_crashed():
    report, by_type = check_course_player(
        CoursePlayer(rpc_errors={"handle_game_invitation": (-32603, "Internal error: KeyError")})
    )
    [invitation] = by_type["GAME_INVITATION"]
    assert (
        invitation.note
        == "your agent crashed: internal error in its handler for handle_game_invitation (JSON-RPC -32603)"
    )
    assert invitation.fix.startswith("Read your agent's log for the exception its handle_game_invitation handler")
    assert "JSON-RPC 2.0 response" not in invitation.fix
    assert report.plays_match == FAIL


def test_an_agent_with_a_fixed_id_is_called_by_it_and_its_real_defect_shows():
    """P07 from its own configuration, and "choice" instead of parity_choice: the check adopts P07
    (one warning), and the choice is what fails."""
    report, by_type = check_course_player(CoursePlayer("P07", choice_field="choice"))
    assert report.player_id == "P07" and report.id_source == "announced"
    assert report.id_warning.startswith("Your agent answered as P07, not P01")
    [announcement] = by_type["ROUND_ANNOUNCEMENT"]  # announced again, as P07
    assert announcement.sent["matches"][0]["player_A_id"] == "P07"
    choices = by_type["CHOOSE_PARITY_CALL"]
    assert all(c.verdict == FAIL and c.sent["player_id"] == "P07" for c in choices)
    assert "parity_choice (your reply has choice)" in choices[0].fix
    assert not any("player_id" in (s.fix or "") for s in report.steps)  # no id mismatch anywhere


def test_an_agent_with_a_fixed_id_and_no_notice_tools_is_called_by_the_id_of_its_join():
    report, by_type = check_course_player(CoursePlayer("P07", notices=False))
    assert report.player_id == "P07" and report.id_warning
    assert [s.sent["match_id"] for s in by_type["GAME_INVITATION"]] == ["R1M2"]  # the match replayed as P07
    assert report.plays_match == PASS and report.match_result["technical_loss"] == []


def test_an_id_given_to_the_check_is_kept():
    report, by_type = check_course_player(CoursePlayer("P07"), player_id="P03")
    assert report.player_id == "P03" and report.id_warning is None
    assert "player_id 'P03'" in by_type["GAME_INVITATION"][0].fix


def test_a_strict_agent_takes_the_announcements_referee_endpoint():
    report, by_type = check_course_player(
        CoursePlayer(strict_referee=True), referee_endpoint="http://lm.example:8000/mcp"
    )
    [announcement] = by_type["ROUND_ANNOUNCEMENT"]
    assert (
        announcement.verdict == OK
        and announcement.sent["matches"][0]["referee_endpoint"] == "http://lm.example:8000/mcp"
    )
    default, _ = check_course_player(CoursePlayer(strict_referee=True))
    assert default.steps[0].verdict == OK and default.steps[0].sent["matches"][0]["referee_endpoint"].startswith(
        "http://"
    )


@pytest.mark.parametrize("ack_type", [None, "GAME_OVER_ACK", "GAME_JOIN_ACK"])
def test_any_reply_will_do_for_game_over_and_the_notices(ack_type):
    report, _ = check_course_player(CoursePlayer(ack_type=ack_type))
    assert report.verdict == OK, [(s.message_type, s.note) for s in report.steps if s.verdict != OK]


def test_a_warning_on_many_replies_is_said_once():
    report, _ = check_course_player(CoursePlayer(timestamp=non_utc))
    warned = [s for s in report.steps if s.verdict == WARN]
    assert len(warned) == len(report.steps) == 7
    first, *rest = warned
    assert first.shown_note == f"timestamp '2025-01-15T12:30:00+02:00' is not UTC (also on {len(rest)} other replies)"
    assert all(s.same_as == 1 and s.also == 0 for s in rest)


@pytest.mark.django_db
def test_a_registered_agent_is_called_by_its_id_and_its_league_is_not_ended(settings):
    league = make_league("check_seat")
    player = CoursePlayer("P05")
    with serving_course_player(player) as url:
        port = url.split(":")[2].split("/")[0]
        Player.objects.create(
            league=league,
            player_id="P05",
            display_name="Five",
            endpoint=f"http://localhost:{port}/mcp/",
            token_hash="x",
        )
        registration = find_registration(url)
        report = asyncio.run(run_check(url, timeouts=ROOMY, registration=registration))
    assert (report.player_id, report.id_source, report.id_warning) == ("P05", "registered in check_seat", None)
    assert "notify_league_completed" not in player.received and "LEAGUE_COMPLETED" not in {
        s.message_type for s in report.steps
    }
    assert report.skipped[0].startswith("LEAGUE_COMPLETED skipped: your agent is registered in league check_seat")
    assert report.verdict == OK
    # Once that league is finished, the practice league is played to its end.
    League.objects.filter(pk=league.pk).update(status=League.Status.COMPLETED)
    assert find_registration(url).finished
    assert find_registration("http://127.0.0.1:1/mcp") is None
