"""The agents of a league the organiser ends are told, with real processes: a player with its
own endpoint (``runplayer``), one playing through the relay (``runplayer --connect``) and
docs/examples/minimal_player.py are registered; the league is cancelled, or deleted while it
registers; each gets LEAGUE_COMPLETED with ``league_status`` and ``reason``, says so and
exits, as after a league played to the end."""

from __future__ import annotations

import sys

import pytest

from league import actions
from league.conductor import delivery_log
from league.models import League, Player
from tests.integration.worlds import Host, MixedWorld
from tests.league.checkagent_support import MINIMAL_PLAYER
from tests.support.servers import Process, free_port
from tests.support.waiting import wait_until

pytestmark = pytest.mark.processes

SETTINGS = {"default_timeout": 3.0, "retries": 1, "retry_delay": 0.2}


def start_players(w: MixedWorld) -> dict[str, Process]:
    w.start_site()
    w.host_ports["Direct"] = free_port()
    direct = w.start_host(Host("Direct"))
    relay = w.spawn(
        "host-Relay",
        [*w.manage, "runplayer", "--connect", "--name", "Relay", "--state-dir", str(w.tmp / "Relay"), *w.common()],
    )
    minimal = w.spawn(
        "host-Minimal",
        [sys.executable, str(MINIMAL_PLAYER), "--port", str(free_port()), "--league-url", w.lm_url]
        + ["--league-id", w.league.league_id, "--name", "Minimal"],
    )
    wait_until(lambda: w.league.players.count() == 3, 120, "the three players registered")
    wait_until(lambda: Player.objects.filter(league=w.league).exclude(relay_channel="").exists(), 60, "relay socket")
    return {"Direct": direct, "Relay": relay, "Minimal": minimal}


@pytest.mark.parametrize("end", ["cancel", "delete"])
def test_players_of_a_league_ended_by_the_organiser_are_told_and_exit(agent_env, manage_py, tmp_path, end):
    w = MixedWorld(agent_env, manage_py, tmp_path, f"farewell_{end}", [], referees=0, **SETTINGS)
    try:
        procs = start_players(w)
        league_id = w.league.league_id
        if end == "cancel":
            actions.cancel_league(w.league)
        else:
            actions.delete_league(w.league, by="test")
        for name, proc in procs.items():
            wait_until(lambda proc=proc: proc.proc.poll() is not None, 60, f"{name} exits")
            assert proc.proc.returncode == 0, name
            log = (tmp_path / f"host-{name}.log").read_text()
            status = "cancelled" if end == "cancel" else "deleted"
            said = f"league {status}: " if name == "Minimal" else f"league {status} ("
            assert said in log and "by the organiser" in log, log[-2000:]
        if end == "cancel":
            # The deliveries are in the league's Event log, each answered.
            def told() -> list[delivery_log.Sent]:
                return list(delivery_log.sent(w.league, kind="LEAGUE_COMPLETED"))

            wait_until(lambda: len(told()) == 3, 30, "the deliveries recorded")
            assert all(d.outcome == "ok" for d in told()), told()
            body = told()[0].message
            assert body["league_status"] == "CANCELLED" and body["champion"] is None
        else:
            assert not League.objects.filter(league_id=league_id).exists()
    finally:
        w.stop()
