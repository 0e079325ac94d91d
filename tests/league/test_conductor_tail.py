"""The conductor's rest between ticks: in a round's tail it notices the round's end by a small
read every ``tail_poll`` seconds, instead of waiting out ``poll``."""

from __future__ import annotations

import asyncio
from collections import deque

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.utils import timezone

from league import conductor
from league.models import League, Round
from tests.league.lm_support import make_league


def announced_round(league_id: str) -> tuple[League, Round]:
    league = make_league(league_id)
    return league, Round.objects.create(
        league=league, number=1, status=Round.Status.ANNOUNCED, announced_at=timezone.now()
    )


@pytest.mark.django_db
def test_a_round_moved_on_once_it_is_no_longer_announced_or_gone():
    league, rnd = announced_round("tail_status")
    other = Round.objects.create(league=league, number=2, status=Round.Status.ANNOUNCED)
    assert not conductor.rounds_moved_on([rnd.pk, other.pk])
    Round.objects.filter(pk=other.pk).update(status=Round.Status.PLAYED)
    assert conductor.rounds_moved_on([rnd.pk, other.pk])
    assert conductor.rounds_moved_on([other.pk + 1000])  # deleted meanwhile: a tick sorts it out


def in_tail(league: League, rnd: Round, poll: float) -> conductor.Conductor:
    worker = conductor.Conductor(league_id=league.league_id, poll=poll, tail_poll=0.005)
    worker._rounds[league.pk] = rnd
    worker._in_tail = True
    return worker


def test_in_the_tail_the_rest_ends_when_the_round_is_played(transactional_db):
    league, rnd = announced_round("tail_played")
    worker = in_tail(league, rnd, poll=60.0)  # a tick a minute: only the status read can end it

    async def main() -> bool:
        try:
            resting = asyncio.create_task(worker.rest())
            await asyncio.sleep(0.1)
            still_resting = not resting.done()
            await sync_to_async(Round.objects.filter(pk=rnd.pk).update)(status=Round.Status.PLAYED)
            await asyncio.wait_for(resting, 10)
            return still_resting
        finally:  # as Conductor.run does: the worker thread's connection goes with it
            await sync_to_async(connections.close_all)()

    assert asyncio.run(main())


def test_in_the_tail_the_rest_lasts_poll_while_the_round_is_unfinished(transactional_db, monkeypatch):
    league, rnd = announced_round("tail_unfinished")
    worker = in_tail(league, rnd, poll=0.3)
    reads = []
    monkeypatch.setattr(conductor, "rounds_moved_on", lambda pks: reads.append(pks) or False)

    asyncio.run(asyncio.wait_for(worker.rest(), 10))

    assert len(reads) >= 2 and all(pks == [rnd.pk] for pks in reads)


def test_outside_the_tail_there_is_no_status_read(transactional_db, monkeypatch):
    league, rnd = announced_round("tail_none")
    worker = in_tail(league, rnd, poll=0.05)
    worker._in_tail = False
    monkeypatch.setattr(conductor, "rounds_moved_on", lambda pks: pytest.fail("read outside the tail"))

    asyncio.run(asyncio.wait_for(worker.rest(), 10))


def test_status_reads_start_a_share_of_the_shortest_recent_round_after_its_start():
    worker = conductor.Conductor(tail_quiet=0.8)
    worker._rounds[1] = Round(pk=11)
    assert worker.quiet_until(100.0) == 100.0  # no round of this league timed yet: read at once
    worker._began[1] = 100.0
    assert worker.quiet_until(100.0) == 100.0
    worker._lasted[1] = deque([0.5, 0.1, 0.3], maxlen=3)
    assert worker.quiet_until(100.0) == pytest.approx(100.08)  # 0.8 of the shortest, 0.1 s
    worker._rounds[2] = Round(pk=12)  # a second league being played, without a history: at once
    assert worker.quiet_until(100.0) == 100.0
    worker._began[2], worker._lasted[2] = 100.01, deque([0.05])
    assert worker.quiet_until(100.0) == pytest.approx(100.05)  # the league whose end comes first


def test_a_round_is_timed_from_its_matches_sent_to_its_end_noticed():
    worker = conductor.Conductor()
    worker._round_ended(1)  # never started here (a fresh conductor mid-round): nothing to keep
    assert 1 not in worker._lasted
    for _ in range(4):
        worker._round_started(1)
        worker._round_ended(1)
    assert len(worker._lasted[1]) == 3 and all(0 <= s < 1 for s in worker._lasted[1])  # the last three
    assert 1 not in worker._began


def test_in_the_quiet_part_of_a_tail_there_is_no_status_read(transactional_db, monkeypatch):
    league, rnd = announced_round("tail_quiet")
    worker = in_tail(league, rnd, poll=0.05)
    worker._round_started(league.pk)
    worker._lasted[league.pk] = deque([3600.0])  # rounds take an hour: reads would start in 48 min
    monkeypatch.setattr(conductor, "rounds_moved_on", lambda pks: pytest.fail("read in the quiet part"))

    asyncio.run(asyncio.wait_for(worker.rest(), 10))  # the rest lasts poll, and the tick reads
