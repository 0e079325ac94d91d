"""``bench spectators``: a league unwatched, then watched by pages that apply the pushes."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from league.bench.league_run import BenchFailed
from league.bench.spectators import SpectatorsBench, longest_wait
from league.models import League, format_problem


def test_a_pages_longest_wait_runs_to_the_leagues_end():
    assert longest_wait([10.0, 10.2, 11.0, 11.1], until=11.6) == 0.8
    assert longest_wait([10.0], until=10.3) == 0.3
    assert longest_wait([12.0], until=11.0) == 0.0  # the page came after the end


def test_a_pages_longest_wait_while_results_come_in_counts_from_its_first_result():
    # Live at 10.0, the league's first result shown at 12.0: the two seconds before it had nothing
    # to refresh.
    refreshes = [10.0, 12.0, 12.5, 13.3]
    assert longest_wait(refreshes, until=13.5) == 2.0
    assert longest_wait(refreshes, until=13.5, since=12.0) == 0.8


def test_a_swiss_league_bench_league_would_refuse_is_refused_before_anything_starts():
    with pytest.raises(BenchFailed, match=re.escape(format_problem("swiss", 6, 6))):
        SpectatorsBench(players=6, schedule_format="swiss", rounds=6, spectators=1).run()


@pytest.mark.processes
def test_bench_spectators_quick_watches_a_swiss_league_to_its_end(agent_env, manage_py, tmp_path):
    # One run, of bench league's Swiss league with two player hosts: the round-robin it plays by
    # default is the same LeagueBench with other arguments, and each run here costs ~a minute.
    out = tmp_path / "spectators.json"
    league = ["--format", "swiss", "--rounds", "3", "--player-hosts", "2"]
    args = [*manage_py, "bench", "spectators", "--quick", *league, "--ramp", "0.2", "--spectator-nice", "1"]
    args += ["--json", str(out)]
    done = subprocess.run(args, env=agent_env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert (report["players"], report["spectators"], report["matches"], report["valid"]) == (6, 5, 9, True)
    assert (report["format"], report["rounds"], report["spectator_nice"]) == ("swiss", 3, 1)
    assert report["errors"] == []
    assert report["unwatched_seconds"] > 0 and report["watched_seconds"] > 0
    for key in ("first_page_ms", "snapshot_ms", "longest_wait_s", "longest_wait_from_live_s", "refreshes_per_page"):
        assert set(report[key]) == {"p50", "p95", "p99"}
    assert report["longest_wait_from_live_max_s"] >= report["longest_wait_max_s"] >= 0
    assert report["refreshes_per_page"]["p50"] >= 1
    # What the pages decoded and applied once between them (tests/league/test_bench_spectator_frames.py).
    assert report["frames_decoded"] >= 1 and report["patches_applied"] >= 0
    assert report["spectators_loop_lag_max_s"] >= report["spectators_loop_lag_s"]["p99"] >= 0
    assert report["lm_watched"]["cpu_seconds"] > 0 and report["lm_watched"]["peak_rss_mib"] > 0
    roles = [p["role"] for p in report["processes_watched"].values()]
    assert (roles.count("spectators"), roles.count("players")) == (1, 2)
    assert League.objects.filter(status=League.Status.COMPLETED, schedule_format="swiss").count() == 2
