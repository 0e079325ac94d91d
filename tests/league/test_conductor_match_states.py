"""A match's life on the LM (docs/architecture.md, "A match's states"): at most one recorded
result per match, a result only from a log that bears it out, and a released match whose valid
report arrives late recorded as played (the first valid result wins), over real HTTP."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from asgiref.sync import sync_to_async
from django.db import connections
from django.db.models.signals import post_save
from django.utils import timezone

from league import actions
from league.conductor.dispatch import claim_matches, release_match, stale_assignments, start_call_budget
from league.conductor.dispatcher import Dispatcher
from league.conductor.shared import Shared
from league.conductor.transitions import extend_deadlines
from league.models import AgentStatus, Event, League, Match, MatchResult, Player, Referee
from leagueproto.client import AgentClient
from leagueproto.envelope import parse_timestamp
from tests.league.lm_support import call, make_league, register_player, register_referee, win_report


def _league_with_a_match(lm_server, referees: int = 2):
    league = make_league()
    refs = [register_referee(lm_server, f"ref{n}") for n in range(1, referees + 1)]
    for name in ("p1", "p2"):
        register_player(lm_server, name)
    a, b = Player.objects.filter(league=league).order_by("player_id")
    match = actions.create_match(league, 1, a, b, match_id="R1M1")
    League.objects.filter(pk=league.pk).update(status=League.Status.RUNNING)
    league.refresh_from_db()
    return league, refs, match


def _claim(league, match, avoid=()):
    (dispatch,) = claim_matches(league.pk, match.round_id, avoid)
    return dispatch


def test_a_report_of_a_match_released_at_its_deadline_is_recorded_as_played(lm_server):
    """Finding 1: the report that comes after the release is the match's result, not an E015."""
    league, (ref1, _), match = _league_with_a_match(lm_server)
    first = _claim(league, match)
    assert first.referee_id == ref1["referee_id"]
    assert release_match(match.pk, first.referee_pk, first.attempt, "no result by the match deadline")

    reply = call(lm_server, "report_match_result", win_report(ref1))
    assert (reply["message_type"], reply["status"]) == ("MATCH_RESULT_ACK", "RECORDED")
    match.refresh_from_db()
    assert (match.status, match.referee.referee_id) == (Match.Status.FINISHED, ref1["referee_id"])
    assert MatchResult.objects.get(match=match).winner.player_id == "P01"


def test_a_late_report_withdraws_the_redispatch_in_flight_and_the_first_result_stands(lm_server):
    """Finding 2: the match went to another referee meanwhile; the first valid report wins and
    the second referee's different outcome is refused."""
    league, (ref1, ref2), match = _league_with_a_match(lm_server)
    first = _claim(league, match)
    release_match(match.pk, first.referee_pk, first.attempt, "no result by the match deadline")
    again = _claim(league, match, avoid=[first.referee_pk])
    assert again.referee_id == ref2["referee_id"] and again.attempt == first.attempt + 1

    assert call(lm_server, "report_match_result", win_report(ref1))["status"] == "RECORDED"
    withdrawn = Event.objects.get(league=league, kind="match_withdrawn", match_id="R1M1")
    assert withdrawn.agent == ref2["referee_id"]
    late = call(lm_server, "report_match_result", win_report(ref2, winner="P02", loser="P01"))
    assert late["error_code"] == "E015"
    (result,) = MatchResult.objects.filter(match=match)
    assert (result.winner.player_id, result.referee.referee_id) == ("P01", ref1["referee_id"])


def test_a_referee_never_given_the_match_cannot_record_it_even_once_released(lm_server):
    league, (ref1, ref2), match = _league_with_a_match(lm_server)
    first = _claim(league, match)
    release_match(match.pk, first.referee_pk, first.attempt, "no result by the match deadline")
    reply = call(lm_server, "report_match_result", win_report(ref2))
    assert reply["error_code"] == "E015"
    assert not MatchResult.objects.exists()


def test_a_late_report_whose_log_does_not_bear_out_its_result_is_refused(lm_server):
    league, (ref1, _), match = _league_with_a_match(lm_server)
    first = _claim(league, match)
    release_match(match.pk, first.referee_pk, first.attempt, "no result by the match deadline")
    report = win_report(ref1)
    report["match_log"] = win_report(ref1, winner="P02", loser="P01")["match_log"]
    assert call(lm_server, "report_match_result", report)["error_code"] == "E015"
    match.refresh_from_db()
    assert match.status == Match.Status.SCHEDULED and not MatchResult.objects.exists()


def test_start_match_says_until_when_the_conductor_waits_for_its_answer(lm_server):
    league, _, match = _league_with_a_match(lm_server)
    message = _claim(league, match).delivery.message
    start_by = parse_timestamp(message["start_by"])
    budget = timedelta(seconds=start_call_budget(league))
    assert timezone.now() + budget - timedelta(seconds=1) <= start_by <= timezone.now() + budget + timedelta(seconds=3)
    assert message["attempt"] == 1
    match.refresh_from_db()
    assert parse_timestamp(message["deadline_at"]) == match.deadline_at.replace(microsecond=0)


def test_deadlines_of_matches_in_play_are_extended_by_an_outage(lm_server):
    """Finding 1/2: the time the database was away is given back to the matches in play."""
    league, _, match = _league_with_a_match(lm_server)
    _claim(league, match)
    match.refresh_from_db()
    before = match.deadline_at
    assert extend_deadlines(league.league_id, 40.0) == 1
    match.refresh_from_db()
    assert match.deadline_at - before == timedelta(seconds=40)
    event = Event.objects.get(league=league, kind="deadlines_extended")
    assert event.payload == {"seconds": 40.0, "matches": 1}


def test_a_player_the_report_says_was_silent_is_marked_unreachable(lm_server):
    """Finding 6: the referee's report names a player that gave no answer at all; the LM marks it
    unreachable, so its next matches are decided at once (until it answers a probe)."""
    league, (ref1, _), match = _league_with_a_match(lm_server)
    _claim(league, match)
    report = win_report(ref1)
    report["result"]["details"]["silent"] = ["P02", "P09"]  # P09 is not in the match: ignored
    assert call(lm_server, "report_match_result", report)["status"] == "RECORDED"
    silent = Player.objects.get(league=league, player_id="P02")
    assert silent.unreachable_since is not None and "R1M1" in silent.unreachable_reason
    assert Player.objects.get(league=league, player_id="P01").unreachable_since is None
    assert Event.objects.filter(league=league, kind="player_unreachable", agent="P02").count() == 1


def _send(league, items, dispatcher: Dispatcher | None = None) -> None:
    """The conductor's dispatcher sends ``items`` (start_match) and settles what came back."""

    async def send() -> None:
        nonlocal dispatcher
        dispatcher = dispatcher or Dispatcher(Shared(client=AgentClient()))
        try:
            dispatcher.send_starts(league, items)
            await dispatcher.starts_sent(league)
            await dispatcher.shared.agents().close()
        finally:
            await sync_to_async(connections.close_all)()

    asyncio.run(send())


def test_a_match_given_back_is_no_longer_being_started_when_it_is_back_in_the_pool(lm_server):
    """A match its referee did not take is back in the pool while the failed batch is still under
    way: claimed again then, it must be sent, not skipped as being started (it would stay ASSIGNED
    until the stale-assignment sweep, ~10 s, and its round with it), and not to the referee that
    just failed (it cools down before the match is back)."""
    league, _, match = _league_with_a_match(lm_server)  # the referees' endpoints: nothing listens
    first = _claim(league, match)
    dispatcher = Dispatcher(Shared(client=AgentClient()))
    when_back: list[tuple[bool, bool]] = []

    def released(sender, instance: Match, **kwargs) -> None:  # noqa: ANN001 (a signal receiver)
        if instance.pk == match.pk and instance.status == Match.Status.SCHEDULED:
            when_back.append((dispatcher.in_flight(match.pk), first.referee_pk in dispatcher.cooling()))

    post_save.connect(released, sender=Match, weak=False)
    try:
        _send(league, [first], dispatcher)
    finally:
        post_save.disconnect(released, sender=Match)
    assert when_back == [(False, True)]  # at the moment it is back: not being started, its referee resting


def test_a_start_match_that_may_have_reached_its_referee_is_never_given_to_another(lm_server):
    """A referee killed mid-call may have played the match and told its players: a start_match
    that got through on some try stays with it (sent again until it answers) until its deadline;
    one that never got through (every try refused) goes back at once."""
    league, _, match = _league_with_a_match(lm_server)  # the referees' endpoints: nothing listens
    first = _claim(league, match)
    _send(league, [first])  # refused on every try: never delivered
    match.refresh_from_db()
    assert match.status == Match.Status.SCHEDULED
    assert Event.objects.filter(kind="match_released", match_id="R1M1").count() == 1

    second = _claim(league, match)
    Match.objects.filter(pk=match.pk).update(assigned_at=timezone.now() - timedelta(seconds=600))
    Referee.objects.filter(pk=second.referee_pk).update(status=AgentStatus.ACTIVE, failures=0)
    (again,) = stale_assignments(league.pk, start_call_budget(league))
    assert again.sent_before and (again.match_pk, again.attempt) == (match.pk, second.attempt)
    _send(league, [again])  # sent before: that try may have got through
    match.refresh_from_db()
    assert (match.status, match.referee_id, match.attempt) == (Match.Status.ASSIGNED, second.referee_pk, 2)
    assert Event.objects.filter(kind="match_released", match_id="R1M1").count() == 1
