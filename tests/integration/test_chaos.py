"""A short ``bench chaos`` run (league/bench/chaos.py): small leagues played while the LM, the
conductor, referees and player hosts are killed with SIGKILL and started again every few seconds
and the database is cut now and then. Every league must still complete with each result once,
standings equal to a recount, every outcome a player was told the one recorded, within the bound
of docs/operations.md, and no process may exit on its own."""

from __future__ import annotations

import json
import subprocess

import pytest

pytestmark = pytest.mark.processes


def test_leagues_complete_and_add_up_while_processes_die_and_the_database_goes_away(tmp_path, agent_env, manage_py):
    out = tmp_path / "chaos.json"
    args = [*manage_py, "bench", "chaos", "--minutes", "1", "--players", "6", "--game", "even_odd_bo5"]
    # Kills and database cuts more often than the bench's defaults, and best-of-five matches
    # (longer leagues), so that a short run meets every kind of fault.
    args += ["--kill-every", "1.5", "3", "--outage-every", "4", "8", "--outage-for", "1", "3"]
    # A short league's referees and hosts serve for a few seconds only: killable after 1 s of it.
    args += ["--settle", "1"]
    done = subprocess.run([*args, "--json", str(out)], env=agent_env, capture_output=True, text=True, timeout=600)
    report = json.loads(out.read_text()) if out.exists() else {}
    assert done.returncode == 0, (report.get("violations"), done.stderr[-3000:])
    assert report["valid"] and report["violations"] == []
    assert report["leagues"] == report["leagues_valid"] >= 1
    # 6 players: 15 matches a league, fewer when a player was withdrawn before the draw (its host
    # killed before it ever answered, and still down then).
    assert report["results"] == report["results_expected"] > 0
    assert report["told_checked"] > 0  # what the players were told was compared with the record
    # The chaos really happened: the run killed processes of every kind and cut the database.
    summary = {k: report[k] for k in ("leagues", "kills_by_role", "outages")}
    assert set(report["kills_by_role"]) == {"lm", "conductor", "referee", "players"}, summary
    assert report["outages"] >= 1, summary
