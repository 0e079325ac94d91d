"""``bench spectators``: a league unwatched, then watched by pages that apply the pushes."""

from __future__ import annotations

import json
import subprocess

import pytest

from league.bench.spectators import longest_wait
from league.models import League


def test_a_pages_longest_wait_runs_to_the_leagues_end():
    assert longest_wait([10.0, 10.2, 11.0, 11.1], until=11.6) == 0.8
    assert longest_wait([10.0], until=10.3) == 0.3
    assert longest_wait([12.0], until=11.0) == 0.0  # the page came after the end


@pytest.mark.processes
def test_bench_spectators_quick_watches_a_league_to_its_end(agent_env, manage_py, tmp_path):
    out = tmp_path / "spectators.json"
    args = [*manage_py, "bench", "spectators", "--quick", "--ramp", "0.2", "--json", str(out)]
    done = subprocess.run(args, env=agent_env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert (report["players"], report["spectators"], report["matches"], report["valid"]) == (6, 5, 15, True)
    assert report["errors"] == []
    assert report["unwatched_seconds"] > 0 and report["watched_seconds"] > 0
    for key in ("first_page_ms", "snapshot_ms", "longest_wait_s", "refreshes_per_page"):
        assert set(report[key]) == {"p50", "p95", "p99"}
    assert report["refreshes_per_page"]["p50"] >= 1
    assert report["lm_watched"]["cpu_seconds"] > 0 and report["lm_watched"]["peak_rss_mib"] > 0
    assert [p["role"] for p in report["processes_watched"].values()].count("spectators") == 1
    assert League.objects.filter(status=League.Status.COMPLETED).count() == 2
