"""A referee stopped (SIGSTOP) mid-league for longer than a match deadline, then resumed
(SIGCONT): the league goes on with the other referee, the stopped one gets no new match until it
answers a ping again, and once resumed it neither plays the start_match calls queued while it was
stopped (they are stale: past their ``start_by``) nor tells the outcome of a match it was playing
(the match went elsewhere: an outcome past its deadline is dropped, and one reached before it is
told only if the LM records it, which it does not once the other referee's result is in). What the
players were told is what is recorded (finding 5 of issue 33: after SIGCONT the players were told
second outcomes). Wherever the stop lands, that holds; the exact window of an outcome reached
just before the stop is tested without processes in
``tests/referee/test_agent.py::test_an_outcome_the_lm_does_not_record_is_told_to_no_one``."""

from __future__ import annotations

import os
import signal
import time
from datetime import datetime

import pytest

from league.models import Event, Match, Referee
from tests.integration.test_recovery import FAST
from tests.integration.worlds import Host, MixedWorld
from tests.support.waiting import wait_until

pytestmark = pytest.mark.processes

STOPPED_FOR = 8.0


@pytest.fixture
def world(agent_env, manage_py, tmp_path):
    settings = {**FAST, "match_deadline": 5.0}
    w = MixedWorld(agent_env, manage_py, tmp_path, "frozenref", [Host("Bot", "slow", 8)], **settings)
    try:
        w.start()
        yield w
    finally:
        w.stop()


def test_a_stopped_referee_plays_nothing_stale_once_resumed(world):
    world.conductor()
    port = f":{world.ref_port}/"
    victim = Referee.objects.get(league=world.league, endpoint__contains=port)
    running = Match.objects.filter(league=world.league, referee=victim, status=Match.Status.RUNNING)
    wait_until(running.exists, 40, "a match for the referee to be stopped", interval=0.01)
    os.kill(world.referees[0].proc.pid, signal.SIGSTOP)
    try:
        time.sleep(STOPPED_FOR)
    finally:
        os.kill(world.referees[0].proc.pid, signal.SIGCONT)
    world.wait_completed(timeout=60)
    world.assert_each_match_recorded_once()
    world.assert_told_equals_recorded()

    # Suspended at its first missed start_match (or ping), it got no start_match while suspended:
    # none sent between the two (a call sent before and timed out after is recorded after, with
    # the time it went out).
    events = list(Event.objects.filter(league=world.league, agent=victim.referee_id).order_by("pk"))
    kinds = [e.kind for e in events]
    assert "referee_suspended" in kinds, kinds
    suspended = events[kinds.index("referee_suspended")].at
    restored = events[kinds.index("referee_restored")].at if "referee_restored" in kinds else None
    starts = [e for e in events if e.direction == "OUT" and e.kind == "START_MATCH"]
    assert starts and all("sent_at" in e.payload for e in starts), [e.payload for e in starts]
    sent = [
        (e.match_id, at)
        for e in starts
        if suspended <= (at := datetime.fromisoformat(e.payload["sent_at"])) and (restored is None or at < restored)
    ]
    assert not sent, (suspended, restored, sent)
