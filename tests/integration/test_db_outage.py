"""The database goes away mid-league (SQLite: another connection holds the write lock, so every
write fails with "database is locked"): the conductor does not exit, the LM refuses what it
cannot record with a retryable JSON-RPC error, the referees re-send their reports, and the
league completes with every match recorded once. Each side logs the outage once."""

from __future__ import annotations

import sqlite3
import time
from datetime import timedelta

import httpx
import pytest
from django.db import connection
from django.utils import timezone

from league.models import Match, MatchResult, Round
from leagueproto.envelope import parse_timestamp
from tests.integration.test_recovery import FAST
from tests.integration.worlds import Host, MixedWorld
from tests.support.waiting import wait_until

pytestmark = pytest.mark.processes

# Slow players (each answer at 60 % of its time limit): when round 2 is under way its other
# matches are still being played as the database goes away, so their reports meet the outage.
PLAYERS = Host("Bot", "slow", 8)
OUTAGE_SECONDS = 6.0


class LockedDatabase:
    """Holds SQLite's write lock from a connection of its own (what an outage looks like to
    writers: after their busy timeout, "database is locked"; readers go on, WAL)."""

    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, timeout=30, isolation_level=None)

    def __enter__(self) -> LockedDatabase:
        self.conn.execute("BEGIN EXCLUSIVE")
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.execute("ROLLBACK")
        self.conn.close()


@pytest.fixture
def world(agent_env, manage_py, tmp_path):
    if connection.vendor != "sqlite":
        pytest.skip("the outage is simulated with SQLite's file lock")
    # Writers give up after 1 s instead of 30: the outage shows as errors, not as a long wait.
    env = {**agent_env, "SQLITE_BUSY_TIMEOUT": "1"}
    w = MixedWorld(env, manage_py, tmp_path, "dboutage", [PLAYERS], **FAST, round_pause=1.0)
    try:
        w.start()
        yield w
    finally:
        w.stop()


def registration_call(lm_url: str) -> dict:
    """A call whose answer the LM must record (a registration, refused or not, is logged)."""
    message = {
        "protocol": "league.v2",
        "message_type": "LEAGUE_REGISTER_REQUEST",
        "sender": "player:late",
        "timestamp": "2026-01-01T00:00:00Z",
        "conversation_id": "conv-outage",
        "league_id": "dboutage",
        "player_meta": {"display_name": "Late", "contact_endpoint": "http://127.0.0.1:9/mcp"},
    }
    body = {"jsonrpc": "2.0", "id": 7, "method": "register_player", "params": message}
    return httpx.post(lm_url, json=body, timeout=10).json()


def test_the_league_rides_out_a_database_outage(world):
    """Two outages: one mid-round (the referees' reports are refused and re-sent), one during the
    pause between rounds (the conductor's announcement of the next round cannot be written)."""
    conductor = world.conductor()
    # Round 2 under way: its matches being played (slow players: for at least half a second).
    running = Match.objects.filter(league=world.league, round__number=2, status=Match.Status.RUNNING)
    wait_until(running.exists, 40, "round 2 under way", interval=0.01)
    with LockedDatabase(connection.settings_dict["NAME"]):
        before = world.results()  # counted under the lock: a result may land just before it
        refused = registration_call(world.lm_url)
        time.sleep(OUTAGE_SECONDS)
        during = world.results()  # reads still work under the write lock
    unlocked_at = timezone.now()

    completed = Round.objects.filter(league=world.league, status=Round.Status.COMPLETED)
    done = completed.count()
    wait_until(lambda: completed.count() != done, 40, "a round completed after the outage", interval=0.005)
    with LockedDatabase(connection.settings_dict["NAME"]):  # in the round pause
        time.sleep(OUTAGE_SECONDS)
    world.wait_completed(timeout=60)
    world.assert_each_match_recorded_once()
    world.assert_told_equals_recorded()

    assert during == before, "nothing could be recorded while the database was locked"
    assert conductor.proc.poll() is None, "the conductor kept running"
    error = refused["error"]
    assert error["code"] == -32000 and error["data"]["retryable"] is True, refused
    assert "Internal error" not in error["message"]
    # Matches that ended early in the outage were reported after it: each report was refused
    # (the LM gives up on the lock after 1 s; the referee's call after 2 s) and sent again.
    resent = [
        r
        for r in MatchResult.objects.filter(league=world.league, reported_at__gt=unlocked_at)
        if max(parse_timestamp(e["at"]) for e in r.log) < unlocked_at - timedelta(seconds=3)
    ]
    assert resent, "a report refused during the outage was sent again and recorded"

    conductor_log = (world.tmp / "conductor.log").read_text()
    lm_log = (world.tmp / "lm.log").read_text()
    for log in (conductor_log, lm_log):  # once per outage, not once per failed call
        assert 1 <= log.count("database unavailable") == log.count("database available again") <= 2, log
    assert "Internal error" not in lm_log and "Traceback" not in lm_log, lm_log
    assert "Traceback" not in conductor_log, conductor_log
