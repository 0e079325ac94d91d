"""``bench league --connect``: the same league direct, then with every player on the relay, both
checked, and the overhead computed from the two reports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from league.bench.relay import overhead
from league.models import League, MatchResult
from league.models import Player as PlayerRow

ROOT = Path(__file__).resolve().parents[2]


def test_the_overhead_compares_totals_and_each_referee_calls_latency():
    direct = {"wall_seconds": 10.0, "matches_per_second": 5.0, "calls_per_second": 100.0, "cpu_seconds_league": 4.0}
    relay = {"wall_seconds": 15.0, "matches_per_second": 4.0, "calls_per_second": 80.0, "cpu_seconds_league": 6.0}
    direct["latency_ms"] = {"referee->choose_parity": {"p50": 2.0, "p95": 5.0}, "lm->notify_round": {"p50": 1.0}}
    relay["latency_ms"] = {"referee->choose_parity": {"p50": 3.5, "p95": 9.0}, "lm->notify_round": {"p50": 3.0}}
    found = overhead(direct, relay)
    assert found["totals"]["wall_seconds"] == {"direct": 10.0, "relay": 15.0, "ratio": 1.5}
    assert found["totals"]["cpu_seconds_league"]["ratio"] == 1.5
    assert found["added_latency"] == {"referee->choose_parity": {"added_p50_ms": 1.5, "added_p95_ms": 4.0}}


@pytest.mark.processes
def test_bench_league_connect_plays_the_league_direct_then_relayed(agent_env, tmp_path):
    out = tmp_path / "relay.json"
    command = [sys.executable, str(ROOT / "manage.py"), "bench", "league", "--quick", "--connect", "--json", str(out)]
    done = subprocess.run(command, env=agent_env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    report = json.loads(out.read_text())
    assert report["direct"]["connection"] == "direct" and report["relay"]["connection"] == "relay"
    for side in ("direct", "relay"):
        assert (report[side]["players"], report[side]["matches"], report[side]["valid"]) == (6, 15, True)
    relayed = League.objects.get(league_id=report["relay"]["league_id"])
    assert MatchResult.objects.filter(league=relayed).count() == 15
    assert set(PlayerRow.objects.filter(league=relayed).values_list("connection", flat=True)) == {"relay"}
    assert set(report["relay_overhead"]["added_latency"]) >= {"referee->choose_parity"}
