"""The bench commands run and validate their own reports (figures are never asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


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
