"""``bench pages``: a played league's first page served by the LM alone, and what it costs."""

from __future__ import annotations

import json
import subprocess

import pytest

from league.models import League, MatchResult

pytestmark = pytest.mark.processes


def test_bench_pages_quick_serves_a_played_leagues_page_and_reports_its_cost(agent_env, manage_py, tmp_path):
    out = tmp_path / "pages.json"
    args = [*manage_py, "bench", "pages", "--quick", "--json", str(out)]
    done = subprocess.run(args, env=agent_env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert (report["players"], report["matches"], report["pages"], report["valid"]) == (6, 15, 20, True)
    league = League.objects.get(league_id=report["league_id"])
    assert league.status == League.Status.COMPLETED and MatchResult.objects.filter(league=league).count() == 15
    assert report["pages_per_second"] > 0 and set(report["latency_ms"]) == {"p50", "p95", "p99"}
    assert report["latency_ms"]["p50"] > 0 and report["page_kib"] > 1  # the whole page, every time
    assert report["lm_cpu_ms_per_page"] > 0 and report["lm_peak_rss_mib"] > 0
