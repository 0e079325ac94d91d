"""``manage.py demo`` end to end: real LM site, conductor, referees and players on loopback."""

from __future__ import annotations

import subprocess

import pytest

from league.models import AgentStatus, Event, League, MatchResult
from league.standings import ranking_results
from leagueproto.scoring import compute_standings
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
    # The silent player never answered the LM's ping: withdrawn before the schedule, it is in no
    # match, and the others play each other (no free win from a dead seat).
    silent = league.players.get(display_name="Silent-1")
    assert silent.status == AgentStatus.REMOVED and "never answered" in silent.unreachable_reason
    assert Event.objects.filter(league=league, kind="player_withdrawn", agent=silent.player_id).exists()
    playing = players - 1
    assert MatchResult.objects.filter(league=league).count() == playing * (playing - 1) // 2
    assert "Final standings" in done.stdout and f"Champion: {league.champion.player_id}" in done.stdout
    rows = compute_standings(league.players.values_list("player_id", flat=True), ranking_results(league))
    assert sum(r.technical_losses for r in rows) == 0


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


@pytest.mark.parametrize("which", ["lm", "player"])
def test_it_names_a_busy_port_and_creates_nothing(agent_env, manage_py, which):
    import socket

    lm = free_ports(1 + 1 + 2)
    ports = {"lm": lm, "referee": lm + 1, "player": lm + 3}
    purpose = {"lm": "the League Manager site", "referee": "referee 1", "player": "player 2"}[which]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", ports[which]))
        taken.listen()
        args = [*manage_py, "demo", "--players", "2", "--referees", "1", "--exit", "--port", str(lm)]
        args += ["--referee-port", str(lm + 1), "--player-port", str(lm + 2)]
        done = subprocess.run(args, env=agent_env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert f"port {ports[which]} ({purpose}" in done.stderr and "in use" in done.stderr
    assert "Watch it live" not in done.stdout
    assert not League.objects.exists()


def test_a_demo_that_fails_midway_stops_its_processes_and_deletes_its_league(agent_env, manage_py):
    import socket

    from league.models import Event

    lm = free_ports(1 + 1 + 3)
    # Three players play three rounds, with a pause between rounds longer than the whole timeout.
    args = [*manage_py, "demo", "--players", "3", "--referees", "1", "--exit", "--fast", "--timeout", "0.2"]
    args += ["--port", str(lm), "--referee-port", str(lm + 1), "--player-port", str(lm + 2), "--round-pause", "5"]
    done = subprocess.run(args, env=agent_env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0, done.stdout + done.stderr
    assert "did not finish in 0.2 s" in done.stderr and "The league was deleted" in done.stderr
    assert not League.objects.exists()
    assert Event.objects.filter(kind="league_deleted", payload__by="manage.py demo (failed)").exists()
    for port in range(lm, lm + 5):  # every process is gone: each port can be listened on again
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))
