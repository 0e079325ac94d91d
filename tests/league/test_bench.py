"""The bench commands run and validate their own reports (figures are never asserted), and the
query counts of the LM's hot paths are pinned so that an N+1 cannot creep in unnoticed."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from league import actions
from league.bench.ceiling import median_ceiling
from league.bench.league_run import round_phases
from league.mcp import toolset
from league.mcp.registrations import register_logged
from league.mcp.reports import PendingReport, record_reports
from league.mcp.tools import read
from league.models import Event, League, MatchResult, Player, Referee
from tests.league.lm_support import (
    assigned_match,
    log_for,
    make_league,
    message,
    played_log,
    player_meta,
    referee_meta,
    site_referee_key,
)
from tests.support.servers import default_database_in

ROOT = Path(__file__).resolve().parents[2]


def test_the_ceiling_reference_is_the_median_run():
    runs = [{"calls_per_second": v, "wall_seconds": w} for v, w in ((4000.0, 1), (3600.0, 2), (4600.0, 3))]
    assert median_ceiling(runs) == {
        "calls_per_second": 4000.0,
        "wall_seconds": 1,
        "runs_calls_per_second": [4000.0, 3600.0, 4600.0],
    }
    assert median_ceiling(runs[:2])["calls_per_second"] == 3600.0  # of two, the lower
    with pytest.raises(ValueError):
        median_ceiling([])


def test_a_rounds_time_is_split_into_its_play_and_the_boundary_after_it():
    # (first start_match, last result) of three rounds, in seconds.
    times = [(10.0, 10.2), (10.5, 10.6), (11.0, 11.4)]
    phases = round_phases(times, wall=2.0)
    assert phases["rounds"] == 3
    assert phases["play"] == {"p50_ms": 200.0, "p95_ms": 400.0, "seconds": 0.7, "share": 0.35}
    # From each round's last result to the next round's first start: 300 and 400 ms (the
    # nearest-rank median of two is the higher).
    assert phases["boundary"] == {"p50_ms": 400.0, "p95_ms": 400.0, "seconds": 0.7, "share": 0.35}
    assert round_phases([], wall=0.0)["boundary"] == {"p50_ms": 0.0, "p95_ms": 0.0, "seconds": 0.0, "share": 0.0}


def test_bench_ceiling_quick_reports_calls_latency_and_machine(tmp_path):
    out = tmp_path / "ceiling.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "bench", "ceiling", "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert report["calls"] == 2000
    assert report["errors"] == 0
    assert report["calls_per_second"] > 0
    assert set(report["latency_ms"]) == {"p50", "p95", "p99"}
    assert report["machine"]["cores"] >= 1
    # The echo server's own CPU (from /proc), not every child this process has waited for.
    assert report["server_cpu_seconds"] > 0


@pytest.mark.processes
def test_bench_league_quick_plays_a_checked_league_and_reports_it(agent_env, tmp_path):
    out = tmp_path / "league.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "manage.py"),
            "bench",
            "league",
            "--quick",
            "--with-ceiling",
            "--ceiling-runs",
            "3",
            "--json",
            str(out),
        ],  # fmt: skip
        env=agent_env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    report = json.loads(out.read_text())
    for key in ("players", "referees", "matches", "wall_seconds", "matches_per_second", "calls", "calls_per_second"):
        assert key in report
    assert (report["players"], report["matches"], report["valid"]) == (6, 15, True)
    # With DATABASE_URL set the bench plays in that database (here the test database) ...
    assert report["database"] == {"engine": connection.vendor, "scratch": False, "path": None}
    # ... and what the report says agrees with the database the processes shared.
    league = League.objects.get(league_id=report["league_id"])
    assert league.status == League.Status.COMPLETED
    assert MatchResult.objects.filter(league=league).count() == 15
    kinds = report["calls_by_kind"]
    assert kinds["->lm MATCH_RESULT_REPORT"] == 15 and kinds["lm->start_match"] == 15
    assert kinds["referee->choose_parity"] == 30 and kinds["lm->notify_round"] == 6 * league.rounds.count()
    assert report["calls"] == sum(kinds.values())
    assert set(report["latency_ms"]["referee->choose_parity"]) == {"p50", "p95", "p99", "n"}
    roles = {p["role"] for p in report["processes"].values()}
    assert roles == {"lm", "conductor", "referee", "players"}
    # The players are hosted by one runplayer process (the default) dealing out the whole mix.
    assert [p["role"] for p in report["processes"].values()].count("players") == 1
    names = set(league.players.values_list("display_name", flat=True))
    assert names == {f"Bench-{n}" for n in range(1, 7)}
    assert all(p["cpu_seconds"] > 0 and p["peak_rss_mib"] > 0 for p in report["processes"].values())
    # The ceiling ran three times with the league's calls; the ratio is taken against the median run.
    ceiling = report["ceiling"]
    assert ceiling["calls"] == report["calls"] and len(ceiling["runs_calls_per_second"]) == 3
    assert ceiling["calls_per_second"] == sorted(ceiling["runs_calls_per_second"])[1]
    assert report["ratio_to_ceiling"] == round(report["calls_per_second"] / ceiling["calls_per_second"], 3)
    # The league's own CPU leaves out start-up: at most each process's whole (a process may spend
    # less than a clock tick, 10 ms, in a 15-match league), and not nothing in all.
    assert all(0 <= p["cpu_seconds_since_mark"] <= p["cpu_seconds"] for p in report["processes"].values())
    assert 0 < report["cpu_seconds_league"] < report["cpu_seconds_total"]
    assert 0 < report["machine_busy_share"] <= 1
    # Every round was played and followed by a boundary but the last; the phases fit in the league.
    phases = report["round_phases"]
    assert phases["rounds"] == league.rounds.count()
    assert phases["play"]["p50_ms"] > 0 and phases["boundary"]["p50_ms"] > 0
    assert phases["play"]["share"] + phases["boundary"]["share"] <= 1


def _two_players_and_a_referee() -> tuple[League, Referee]:
    league = make_league("bench_queries")
    for name in ("p1", "p2"):
        actions.register_player(league.league_id, player_meta(display_name=name), None)
    actions.register_referee(league.league_id, referee_meta(display_name="ref"), None, referee_key=site_referee_key())
    return league, Referee.objects.get(league=league)


def _win(log_entries: int) -> tuple[dict, list[dict]]:
    result = {
        "status": "WIN",
        "winner": "P01",
        "score": {"P01": 3, "P02": 0},
        "technical_loss": [],
        "details": {"drawn_number": 4, "number_parity": "even", "choices": {"P01": "even", "P02": "odd"}},
    }
    # The match as played, then ``log_entries`` more entries (notices after the game).
    log = played_log({"P01": "even", "P02": "odd"}, 4)
    log += [{"seq": len(log) + n, "direction": "OUT", "method": "notify", "message": {}} for n in range(log_entries)]
    return result, log


@pytest.mark.django_db
@pytest.mark.parametrize("log_entries", [1, 50])
def test_recording_a_result_takes_a_fixed_number_of_queries(django_assert_num_queries, log_entries):
    league, referee = _two_players_and_a_referee()
    assigned_match(league)
    referee = Referee.objects.select_related("league").get(pk=referee.pk)
    result, log = _win(log_entries)
    # Lock and read the match with any result already there, insert the result, finish the match,
    # mark the round played if it was the last (one conditional update), the league's version, the
    # events (one insert), and the transaction itself: never per log entry.
    with django_assert_num_queries(REPORT_QUERIES):
        recorded = actions.record_result(referee, "R1M1", result, log)
    assert recorded.status == "RECORDED"


@pytest.mark.django_db
def test_a_duplicate_report_is_answered_with_few_queries(django_assert_num_queries):
    league, referee = _two_players_and_a_referee()
    assigned_match(league)
    referee = Referee.objects.select_related("league").get(pk=referee.pk)
    result, log = _win(3)
    actions.record_result(referee, "R1M1", result, log)
    with django_assert_num_queries(DUPLICATE_QUERIES):
        assert actions.record_result(referee, "R1M1", result, log).status == "DUPLICATE"


def _pending_report(league: League, referee: actions.Registration, match_id: str, log_entries: int) -> PendingReport:
    """A report of ``match_id`` (assigned to ``referee`` here) as the LM queues it for its DB thread."""
    assigned_match(league, referee_id=referee.agent_id, match_id=match_id)
    result, log = _win(log_entries)
    arguments = message(
        "MATCH_RESULT_REPORT",
        f"referee:{referee.agent_id}",
        auth_token=referee.auth_token,
        league_id=league.league_id,
        match_id=match_id,
        result=result,
        match_log=log,
    )
    tool = toolset.find_tool("report_match_result")
    return PendingReport(tool, arguments, tool.model.model_validate(arguments), None)


@pytest.mark.django_db
@pytest.mark.parametrize("reports", [1, 20])
def test_a_batch_of_reports_takes_a_fixed_number_of_queries(django_assert_num_queries, reports):
    league = make_league("bench_batch")
    for name in ("p1", "p2"):
        actions.register_player(league.league_id, player_meta(display_name=name), None)
    referee = actions.register_referee(
        league.league_id, referee_meta(display_name="ref"), None, referee_key=site_referee_key()
    )
    batch = [_pending_report(league, referee, f"R1M{n}", 17) for n in range(1, reports + 1)]
    # The transaction, the referees' tokens, the matches, the results (one insert), the matches
    # finished, the round played (one conditional update per round), the leagues' version, the
    # events (one insert):
    # the same for one report as for twenty, about one query per report fewer than one at a time.
    with django_assert_num_queries(BATCH_QUERIES):
        answers = record_reports(batch)
    assert [reply["status"] for reply, _ in answers] == ["RECORDED"] * reports


@pytest.mark.django_db
def test_a_batch_from_two_referees_finds_each_by_its_token_and_the_matches_by_their_ids(
    django_assert_num_queries,
):
    league = make_league("bench_two_referees")
    for name in ("p1", "p2"):
        actions.register_player(league.league_id, player_meta(display_name=name), None)
    referees = [
        actions.register_referee(league.league_id, referee_meta(display_name=n), None, referee_key=site_referee_key())
        for n in ("r1", "r2")
    ]
    batch = [_pending_report(league, referee, f"R1M{n}", 5) for n, referee in enumerate(referees * 3, start=1)]
    # As one referee's batch: both referees' tokens in one lookup, the matches in one read.
    with django_assert_num_queries(BATCH_QUERIES):
        answers = record_reports(batch)
    assert [reply["status"] for reply, _ in answers] == ["RECORDED"] * 6


@pytest.mark.django_db
@pytest.mark.parametrize("already", [1, 30])
def test_registering_a_player_takes_a_fixed_number_of_queries(django_assert_num_queries, already):
    league = make_league("bench_registration")
    for n in range(already):
        actions.register_player(league.league_id, player_meta(display_name=f"p{n}"), None)
    with django_assert_num_queries(REGISTRATION_QUERIES):
        registration = actions.register_player(league.league_id, player_meta(display_name="late"), None)
    assert registration.status == "ACCEPTED"
    assert Player.objects.filter(league=league).count() == already + 1


@pytest.mark.django_db
@pytest.mark.parametrize("already", [1, 30])
def test_a_registration_through_mcp_takes_a_fixed_number_of_queries_with_its_event_rows(
    django_assert_num_queries, already
):
    league = make_league("bench_registration_mcp")
    for n in range(already):
        actions.register_player(league.league_id, player_meta(display_name=f"p{n}"), None)
    tool = toolset.find_tool("register_player")
    arguments = message("LEAGUE_REGISTER_REQUEST", "player:late", league_id=league.league_id, player_meta=player_meta())
    msg = tool.model.model_validate(arguments)
    before = Event.objects.filter(league=league).count()
    with django_assert_num_queries(MCP_REGISTRATION_QUERIES):
        reply = register_logged(tool, arguments, msg, None)
    assert reply["status"] == "ACCEPTED", reply
    # The registration's own row, then the call's request and reply, all in the one insert.
    added = Event.objects.filter(league=league).order_by("pk")[before:]
    assert [(e.direction, e.kind, e.agent) for e in added] == [
        ("STATE", "player_registered", reply["player_id"]),
        ("IN", "LEAGUE_REGISTER_REQUEST", "player:late"),
        ("OUT", "LEAGUE_REGISTER_RESPONSE", f"player:{reply['player_id']}"),
    ]
    assert len({e.at for e in added}) == 1


# Where the database has row locks (PostgreSQL), the round's row is locked before the
# round-played check (actions.mark_round_played): one query more, once per round touched.
ROUND_LOCK = 1 if connection.features.has_select_for_update else 0
REPORT_QUERIES = 8 + ROUND_LOCK
DUPLICATE_QUERIES = 3
BATCH_QUERIES = 9 + ROUND_LOCK  # a whole batch of reports through /mcp: authentication and Event log included
# The league locked, the agents at its seat (players, referees: any spelling of a URL is one
# endpoint), the league's agents (counted, then the highest id), the insert, the league's version
# moved on, its event (actions.register_all, a batch of one, in the caller's transaction).
REGISTRATION_QUERIES = 8
# The same through /mcp's job (league.mcp.registrations.register_logged): its own transaction's
# savepoint and release around them, and the registration's Event row goes into the call's one
# insert of its request and reply (8 + 2).
MCP_REGISTRATION_QUERIES = 10
# A read through /mcp (league.mcp.tools.read): the caller's token, the answer, the Event log's
# insert in its transaction (an agent's query; an anonymous get_standings writes nothing). The
# standings are cached while the league's version (one query by key) stays the same.
READ_QUERIES = {"GET_STANDINGS": 4, "GET_NEXT_MATCH": 5, "GET_PLAYER_STATS": 5, "get_standings": 1}


def test_bench_soak_keeps_the_lm_and_conductor_up_across_leagues_and_checks_each(tmp_path, agent_env, manage_py):
    out = tmp_path / "soak.json"
    args = [*manage_py, "bench", "soak", "--minutes", "1", "--max-leagues", "2", "--players", "2"]
    done = subprocess.run([*args, "--json", str(out)], env=agent_env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert report["leagues"] == 2 and report["lost_or_bad_leagues"] == 0
    assert len({league["league_id"] for league in report["per_league"]}) == 2
    assert set(report["growth_first_to_last_league"]) == {"lm", "conductor"}
    assert all(league["long_lived"]["lm"]["fds"] > 0 for league in report["per_league"])


@pytest.mark.processes
def test_bench_scale_with_no_sizes_runs_the_registration_burst_alone_with_the_lms_cpu(tmp_path, agent_env, manage_py):
    out = tmp_path / "scale.json"
    args = [*manage_py, "bench", "scale", "--sizes", "", "--registrations", "30", "--json", str(out)]
    done = subprocess.run(args, env=agent_env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert report["leagues"] == [] and "chart" not in report
    burst = report["registration_burst"]
    assert burst["registrations"] == burst["accepted"] == 30 and burst["errors"] == 0, burst["first_errors"]
    assert burst["first_errors"] == []
    assert burst["lm_cpu_seconds"] > 0


def _league_ids(path: Path) -> set[str]:
    """The leagues in a SQLite file."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return {row[0] for row in db.execute("SELECT league_id FROM league_league")}


def test_on_the_embedded_default_a_bench_plays_in_a_database_of_its_own(tmp_path, manage_py):
    # The site's default database, moved out of the checkout so that the test sees it is never
    # opened (Django's model checks would open it before the bench chose its own).
    env, default = default_database_in(tmp_path / "site", os.environ)
    env.update(TMPDIR=str(tmp_path))
    out = tmp_path / "scale.json"
    # The registration burst: the bench with the fewest processes that writes a league.
    args = [*manage_py, "bench", "scale", "--sizes", "", "--registrations", "5", "--keep-db", "--json", str(out)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    report = json.loads(out.read_text())
    league_id = report["registration_burst"]["league_id"]
    assert report["registration_burst"]["accepted"] == 5
    kept = Path(report["database"]["path"])
    assert report["database"]["scratch"] and kept.parent.parent == tmp_path
    assert _league_ids(kept) == {league_id}  # all it played, in a file of its own
    assert not default.exists()  # the site's own database, never opened

    # Without --keep-db the file goes once the bench is done.
    # A gentle rate: this checks where the bench's database lives, not how fast the LM answers
    # (the suite shares the machine with other tests).
    args = [*manage_py, "bench", "api", "--quick", "--rate", "40", "--json", str(out)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert json.loads(out.read_text())["database"] == {"engine": "sqlite", "scratch": True, "path": None}
    assert list(tmp_path.glob("league-bench-db-*")) == [kept.parent]


def _league_with_results(results: int) -> tuple[League, dict, dict]:
    """A league of ``results`` + 1 players where P01 beat each of the others: P01's registration."""
    league = make_league("bench_reads", max_players=100)
    first = actions.register_player(league.league_id, player_meta(display_name="p0"), None)
    for n in range(results):
        actions.register_player(league.league_id, player_meta(display_name=f"p{n + 1}"), None)
    actions.register_referee(league.league_id, referee_meta(display_name="ref"), None, referee_key=site_referee_key())
    referee = Referee.objects.select_related("league").get(league=league)
    result, _ = _win(3)
    for n in range(results):
        other = f"P{n + 2:02d}"
        assigned_match(league, b=other, match_id=f"R1M{n + 1}")
        won = {**result, "score": {"P01": 3, other: 0}, "details": {"choices": {"P01": "even", other: "odd"}}}
        actions.record_result(referee, f"R1M{n + 1}", won, log_for("P01", other, won))
    assigned_match(league, b="P02", match_id="R2M1")  # P01's next match
    return league, first


@pytest.mark.django_db
@pytest.mark.parametrize("results", [1, 12])
@pytest.mark.parametrize("query", sorted(READ_QUERIES))
def test_a_read_takes_a_fixed_number_of_queries(django_assert_num_queries, results, query):
    league, first = _league_with_results(results)
    if query == "get_standings":
        tool, arguments = toolset.find_tool("get_standings"), {"league_id": league.league_id}
    else:
        tool = toolset.find_tool("league_query")
        arguments = message(
            "LEAGUE_QUERY",
            f"player:{first.agent_id}",
            auth_token=first.auth_token,
            league_id=league.league_id,
            query_type=query,
        )
    msg = tool.model.model_validate(arguments)
    read(tool, arguments, msg, None)  # the standings are now cached
    with django_assert_num_queries(READ_QUERIES[query]):
        reply, is_error = read(tool, arguments, msg, None)
    assert not is_error, reply
    if query == "GET_PLAYER_STATS":
        assert len(reply["data"]["history"]) == results and reply["data"]["wins"] == results
    if query == "GET_NEXT_MATCH":
        assert reply["data"]["next_match"]["match_id"] == "R2M1"
    if query in ("GET_STANDINGS", "get_standings"):
        rows = reply["data"]["standings"] if query == "GET_STANDINGS" else reply["standings"]
        assert rows[0]["player_id"] == "P01" and len(rows) == results + 1


@pytest.mark.processes
@pytest.mark.parametrize("fmt, matches", [(["--format", "swiss", "--rounds", "3"], 9), (["--format", "knockout"], 5)])
def test_bench_league_quick_plays_a_checked_swiss_or_knockout_league(agent_env, tmp_path, fmt, matches):
    out = tmp_path / "league.json"
    args = [sys.executable, str(ROOT / "manage.py"), "bench", "league", "--quick", *fmt, "--json", str(out)]
    done = subprocess.run(args, env=agent_env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    report = json.loads(out.read_text())
    assert (report["format"], report["players"], report["matches"], report["valid"]) == (fmt[1], 6, matches, True)
    league = League.objects.get(league_id=report["league_id"])
    assert report["rounds"] == league.rounds.count() == 3


def test_bench_league_refuses_a_swiss_league_of_as_many_rounds_as_players(manage_py):
    args = [*manage_py, "bench", "league", "--players", "4", "--format", "swiss", "--rounds", "4"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "at most 3 rounds" in done.stderr


def test_bench_refuses_several_lm_processes_without_a_shared_channel_layer(settings):
    settings.REDIS_URL = ""
    for what in ("league", "spectators"):
        with pytest.raises(CommandError, match="--lm-workers above 1 needs REDIS_URL"):
            call_command("bench", what, "--lm-workers", "2")
