"""``manage.py demo`` end to end: real LM site, conductor, referees and players on loopback."""

from __future__ import annotations

import subprocess

import pytest

from league.models import League, MatchResult
from league.queries import result_rows
from league.standings import compute_standings
from tests.support.servers import free_ports

pytestmark = pytest.mark.processes


@pytest.mark.parametrize(("game", "players"), [("even_odd", 8), ("even_odd_bo5", 4)])
def test_it_plays_a_league_to_the_end_and_prints_the_standings(agent_env, manage_py, game, players):
    # One block of consecutive free ports, so the LM, referee and player ranges cannot overlap.
    lm = free_ports(1 + 2 + players)
    refs, base = lm + 1, lm + 3
    args = [
        *manage_py,
        "demo",
        "--players",
        str(players - 1),
        "--silent",
        "1",
        "--referees",
        "2",
        "--game",
        game,
        "--fast",
        "--exit",
        "--timeout",
        "120",
        "--port",
        str(lm),
        "--referee-port",
        str(refs),
        "--player-port",
        str(base),
    ]
    done = subprocess.run(args, env=agent_env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr

    league = League.objects.get()
    assert league.status == League.Status.COMPLETED
    assert MatchResult.objects.filter(league=league).count() == players * (players - 1) // 2
    assert "Final standings" in done.stdout and f"Champion: {league.champion.player_id}" in done.stdout
    silent = league.players.get(display_name="Silent-1")
    rows = {
        r.player_id: r
        for r in compute_standings(league.players.values_list("player_id", flat=True), result_rows(league))
    }
    assert rows[silent.player_id].technical_losses == rows[silent.player_id].played == players - 1
    assert rows[silent.player_id].points == 0


@pytest.mark.django_db
def test_it_cancels_earlier_unfinished_demo_leagues_but_nothing_else():
    from league import actions
    from league.management.commands.demo import Demo

    old = actions.open_registration(actions.create_league(name="old", league_id="demo_20250101_000000"), 60)
    other = actions.open_registration(actions.create_league(name="class", league_id="class_2026"), 60)
    Demo().retire_old_demos()
    old.refresh_from_db()
    other.refresh_from_db()
    assert old.status == League.Status.CANCELLED
    assert other.status == League.Status.REGISTERING
