"""``bench arena --quick`` plays an arena with real processes and checks its ratings itself
(figures are reported, never asserted); ``check_ratings`` finds a match rated twice."""

from __future__ import annotations

import json
import subprocess

import pytest

from league.bench.arena import check_ratings
from league.models import RatingChange
from tests.league.lm_support import register_player, register_referee
from tests.league.test_arena import arena, play_one


@pytest.mark.processes
def test_bench_arena_quick_plays_rates_and_checks_an_arena(tmp_path, agent_env, manage_py):
    out = tmp_path / "arena.json"
    args = [*manage_py, "bench", "arena", "--quick", "--json", str(out)]
    done = subprocess.run(args, env=agent_env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    report = json.loads(out.read_text())
    assert report["valid"] is True and report["errors"] == []
    assert report["results"] > 0 and report["rated_matches_total"] >= report["results"]
    assert report["late_agent_first_rated_match_seconds"] is not None


def test_check_ratings_finds_a_rating_that_is_not_its_latest_change(lm_server):
    league = arena()
    ref = register_referee(lm_server, "ref", league_id="arena_1")
    for name in ("ann", "bob"):
        register_player(lm_server, name, league_id="arena_1")
    match, _ = play_one(lm_server, league, ref)
    assert check_ratings(league) == []
    change = RatingChange.objects.filter(match=match).first()
    RatingChange.objects.filter(pk=change.pk).update(mu=change.mu + 1)
    assert check_ratings(league) == [f"rating {change.rating.identity} is not its latest change's"]
