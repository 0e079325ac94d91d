"""The conductor's database steps: Event rows written by ``events.append_events``, the players'
records in START_MATCH, a tick's reads, claims and settled starts."""

from __future__ import annotations

import threading
from datetime import timedelta

import orjson
import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from league import queries, standings
from league.auth import lm_token
from league.conductor import common, delivery_log, dispatch, notices, reachability, transitions, worker
from league.events import strip_secrets
from league.models import AgentStatus, Event, League, Match, MatchResult, Player, Referee, Round
from leagueproto.jsonutil import dumps, loads
from tests.league.lm_support import make_league

pytestmark = pytest.mark.django_db


def add_players(league: League, n: int) -> list[Player]:
    return [
        Player.objects.create(
            league=league,
            player_id=f"P{i:02d}",
            display_name=f"Player {i}",
            endpoint=f"http://127.0.0.1:1/p{i}",
            token_hash=f"{i:064x}",
            status=AgentStatus.ACTIVE,
        )  # fmt: skip
        for i in range(1, n + 1)
    ]


def add_referee(league: League, status: str) -> Referee:
    return Referee.objects.create(
        league=league, referee_id="REF01", display_name="R", endpoint="http://127.0.0.1:1/r", token_hash="0" * 64,
        max_concurrent_matches=3, status=status,
    )  # fmt: skip


def running(league: League) -> League:
    League.objects.filter(pk=league.pk).update(status=League.Status.RUNNING)
    league.refresh_from_db()
    return league


def test_a_notice_to_several_agents_is_one_row_with_each_recipients_envelope_and_outcome():
    league = make_league("log_rows")
    body = {"message_type": "ROUND_ANNOUNCEMENT", "round_id": 1, "auth_token": "secret", "conversation_id": "c1"}
    first = common.Delivery("P01", "http://x/1", "notify_round", {**body, "sender": "league_manager"})
    second = common.Delivery(
        "P02", "http://x/2", "notify_round", {**body, "conversation_id": "c2", "sender": "league_manager:LM01"}
    )
    ack = {"message_type": "ACK", "status": "received", "auth_token": "also secret"}
    before = timezone.now()

    delivery_log.record_deliveries(league, [[(first, "ok", ack), (second, "timeout", None)]])

    (row,) = Event.objects.filter(league=league, direction="OUT")
    assert (row.kind, row.agent, row.match_id) == ("ROUND_ANNOUNCEMENT", "", "")
    assert row.payload == strip_secrets(row.payload)  # already without secrets
    assert row.payload["method"] == "notify_round" and row.payload["message"]["round_id"] == 1
    assert "auth_token" not in row.payload["message"]
    assert row.payload["to"] == {
        "P01": {"outcome": "ok", "conversation_id": "c1", "reply": {"message_type": "ACK", "status": "received"}},
        "P02": {"outcome": "timeout", "conversation_id": "c2", "sender": "league_manager:LM01"},
    }
    assert row.at >= before and row.at.tzinfo is not None


def test_the_log_reads_back_one_delivery_per_agent_whatever_the_rows():
    league = make_league("log_read")
    notice = {"message_type": "ROUND_COMPLETED", "round_id": 1, "conversation_id": "c"}
    batch = [common.Delivery(f"P0{n}", f"http://x/{n}", "notify_round_completed", notice) for n in (1, 2, 3)]
    start = {"message_type": "START_MATCH", "match_id": "R1M1", "match_token": "secret", "conversation_id": "s"}
    lone = common.Delivery("REF01", "http://x/r", "start_match", start)
    ack = {"message_type": "ACK", "status": "received"}

    delivery_log.record_deliveries(league, [[(d, "ok", ack) for d in batch], [(lone, "error", None)]])

    every = list(delivery_log.sent(league))
    assert [(d.agent, d.kind, d.method, d.outcome) for d in every] == [
        ("P01", "ROUND_COMPLETED", "notify_round_completed", "ok"),
        ("P02", "ROUND_COMPLETED", "notify_round_completed", "ok"),
        ("P03", "ROUND_COMPLETED", "notify_round_completed", "ok"),
        ("REF01", "START_MATCH", "start_match", "error"),
    ]
    assert every[-1].match_id == "R1M1" and "match_token" not in every[-1].message
    assert every[0].round_id == 1 and every[0].reply == ack and every[0].message == notice
    # One agent's: its part of each batch only, the bodies left in the database.
    (mine,) = delivery_log.sent(league, agent="P02")
    assert (mine.agent, mine.kind, mine.outcome, mine.round_id, mine.reply) == ("P02", "ROUND_COMPLETED", "ok", 1, ack)
    assert mine.message is None and mine.event_id == every[1].event_id
    (start,) = delivery_log.sent(league, agent="REF01")
    assert (start.method, start.outcome, start.match_id, start.round_id) == ("start_match", "error", "R1M1", None)
    assert list(delivery_log.sent(league, agent="P09")) == []
    assert [d.agent for d in delivery_log.sent(league, kind="START_MATCH")] == ["REF01"]
    assert Event.objects.filter(league=league, direction="OUT").count() == 2


def test_a_reply_that_is_not_a_plain_ack_is_kept_without_its_secrets():
    league = make_league("log_odd_replies")
    body = {"message_type": "ROUND_COMPLETED", "round_id": 2, "auth_token": "secret", "conversation_id": "c1"}
    sent = [common.Delivery(f"P0{n}", f"http://x/{n}", "notify_round_completed", body) for n in (1, 2, 3, 4)]
    replies = [
        {"message_type": "ACK", "status": "received"},
        # A student's agent may answer anything: a status that is not a word, an error, no ack.
        {"message_type": "ACK", "status": {"auth_token": "hidden", "note": "nested"}},
        {"message_type": "LEAGUE_ERROR", "error_code": "E005", "auth_token": "hidden too"},
        {"message_type": "ACK", "status": "received", "auth_token": "and this"},
    ]

    delivery_log.record_deliveries(league, [[(d, "ok", r) for d, r in zip(sent, replies, strict=True)]])

    kept = [d.reply for d in delivery_log.sent(league)]
    assert kept == [
        {"message_type": "ACK", "status": "received"},
        {"message_type": "ACK", "status": {"note": "nested"}},
        {"message_type": "LEAGUE_ERROR", "error_code": "E005"},
        {"message_type": "ACK", "status": "received"},
    ]
    assert "hidden" not in str(list(Event.objects.filter(league=league).values_list("payload", flat=True)))


def played_round(league: League, players: list[Player], number: int, results: list[tuple[int, int, int, int]]) -> Round:
    """Round ``number`` with its matches FINISHED: ``results`` as (a, b, points_a, points_b)."""
    rnd = Round.objects.create(league=league, number=number, status=Round.Status.ANNOUNCED, announced_at=timezone.now())
    for k, (a, b, pa, pb) in enumerate(results):
        match = Match.objects.create(
            league=league, round=rnd, match_id=f"R{number}M{k + 1}", player_a=players[a], player_b=players[b],
            game_type="even_odd", status=Match.Status.FINISHED,
        )  # fmt: skip
        MatchResult.objects.create(
            match=match, league=league, outcome="DRAW" if pa == pb else ("WIN_A" if pa > pb else "WIN_B"),
            points_a=pa, points_b=pb, report_digest="x",
        )  # fmt: skip
    return rnd


def test_records_before_a_round_count_only_the_earlier_rounds():
    league = make_league("log_records")
    players = add_players(league, 4)
    rounds = [
        played_round(league, players, 1, [(0, 1, 3, 0), (2, 3, 1, 1)]),
        played_round(league, players, 2, [(0, 2, 0, 3), (1, 3, 3, 0)]),
        played_round(league, players, 3, [(0, 3, 0, 0), (1, 2, 1, 1)]),
    ]
    everyone = [p.player_id for p in players]

    records = [dispatch.records_before(rnd, everyone) for rnd in rounds]

    zero = {"wins": 0, "losses": 0, "draws": 0}
    assert records[0] == {p: zero for p in everyone}
    assert records[1]["P01"] == {"wins": 1, "losses": 0, "draws": 0}
    assert records[2]["P01"] == {"wins": 1, "losses": 1, "draws": 0}
    assert records[2]["P04"] == {"wins": 0, "losses": 1, "draws": 1}
    # Only the players asked for, and a player with no result yet has an empty record.
    assert dispatch.records_before(rounds[2], ["P02", "P99"]) == {
        "P02": {"wins": 1, "losses": 1, "draws": 0},
        "P99": zero,
    }


def test_the_records_in_the_table_after_a_round_are_the_records_before_the_next():
    league = make_league("log_records_table")
    players = add_players(league, 4)
    played_round(league, players, 1, [(0, 1, 3, 0), (2, 3, 1, 1)])
    played_round(league, players, 2, [(0, 2, 0, 3), (1, 3, 0, 0)])
    # A technical loss counts as a loss in both; a removed player with results stays in both.
    MatchResult.objects.filter(match__match_id="R1M1").update(technical_loss_b=True)
    Player.objects.filter(pk=players[3].pk).update(status=AgentStatus.REMOVED)
    upcoming = Round.objects.create(league=league, number=3, status=Round.Status.PENDING)
    everyone = [p.player_id for p in players]

    records = dispatch.records_in(standings.standings(league))

    assert records == dispatch.records_before(upcoming, everyone)
    assert records["P02"] == {"wins": 0, "losses": 2, "draws": 0}
    assert records["P04"] == {"wins": 0, "losses": 1, "draws": 1}


def test_a_claim_given_the_records_reads_none(django_assert_num_queries):
    league = running(make_league("log_claim_records"))
    players = add_players(league, 4)
    add_referee(league, AgentStatus.ACTIVE)
    played_round(league, players, 1, [(0, 1, 3, 0), (2, 3, 1, 1)])
    rnd = Round.objects.create(league=league, number=2, status=Round.Status.ANNOUNCED)
    Match.objects.create(
        league=league, round=rnd, match_id="R2M1", player_a=players[0], player_b=players[2], game_type="even_odd"
    )
    records = dispatch.records_in(standings.standings(league))

    # Referees, busy counts, candidates, round, assignment, events; and the savepoint's two.
    with django_assert_num_queries(8):
        (claimed,) = dispatch.claim_matches(league.pk, rnd.pk, league=league, records=records)

    assert claimed.delivery.message["standings"] == dispatch.records_before(rnd, ["P01", "P03"])


def test_the_standings_update_is_serialised_once_and_reads_as_the_table():
    league = running(make_league("log_standings"))
    players = add_players(league, 4)
    rnd = played_round(league, players, 1, [(0, 1, 3, 0), (2, 3, 1, 1)])

    boundary = notices.round_boundary(league, rnd)

    assert boundary.table == queries.standings(league) and boundary.table[0]["player_id"] == "P01"
    bodies = [d.message["standings"] for d in boundary.updates]
    # Serialised already, once for all: every message holds the same JSON text.
    assert len(bodies) == 4 and isinstance(bodies[0], orjson.Fragment) and all(b is bodies[0] for b in bodies)
    for d in boundary.updates:  # what each player is sent: its own envelope, the table as a list
        sent = loads(dumps({"jsonrpc": "2.0", "id": 1, "method": d.method, "params": d.message}))["params"]
        assert sent["standings"] == boundary.table and sent["auth_token"] == d.message["auth_token"]
    # Each message is its own conversation; each player gets its own LM token.
    every = [*boundary.updates, *boundary.completed]
    assert len({d.message["conversation_id"] for d in every}) == len(every) == 8
    assert [d.message["auth_token"] for d in boundary.updates] == [
        lm_token(league.league_id, p.player_id, p.token_hash) for p in players
    ]
    delivery_log.record_deliveries(league, [[(d, "ok", None) for d in boundary.updates]])
    kept = Event.objects.filter(league=league, kind="LEAGUE_STANDINGS_UPDATE").order_by("id").first()
    assert kept.payload["message"]["standings"] == boundary.table  # the log keeps the body as JSON
    assert "auth_token" not in kept.payload["message"]


def test_a_ticks_survey_reads_the_rounds_progress_and_the_matches_in_play():
    league = make_league("log_survey")
    players = add_players(league, 2)
    referee = add_referee(league, AgentStatus.ACTIVE)
    League.objects.filter(pk=league.pk).update(status=League.Status.RUNNING)
    rnd = Round.objects.create(league=league, number=1, status=Round.Status.ANNOUNCED, announced_at=timezone.now())
    now = timezone.now()
    Match.objects.create(
        league=league, round=rnd, match_id="R1M1", player_a=players[0], player_b=players[1], game_type="even_odd",
        status=Match.Status.RUNNING, referee=referee, attempt=1, assigned_at=now, deadline_at=now,
    )  # fmt: skip

    survey = worker.Conductor(league_id=league.league_id).survey({league.pk: rnd.pk}, {league.pk})

    assert [lg.pk for lg in survey.leagues] == [league.pk] and survey.leagues[0].status == League.Status.RUNNING
    assert survey.progress[rnd.pk] == transitions.RoundProgress(Round.Status.ANNOUNCED, scheduled=0, in_play=1)
    assert survey.capacity[league.pk] == 3
    (row,) = survey.in_play[league.pk]
    assert (row.status, row.referee_pk, row.referee_id, row.attempt) == ("RUNNING", referee.pk, "REF01", 1)
    assert row.deadline_at == now and row.assigned_at == now


def test_the_owed_round_is_the_earliest_of_its_own_league():
    league, other = make_league("log_owed"), make_league("log_owed_other")
    assert transitions.owed_round(league) is None
    Round.objects.create(league=other, number=1, status=Round.Status.COMPLETED, notices_owed=True)
    for number, owed in ((1, False), (2, True), (3, True)):
        Round.objects.create(league=league, number=number, status=Round.Status.COMPLETED, notices_owed=owed)

    found = transitions.owed_round(league)

    assert (found.league_id, found.number, found.notices_owed) == (league.pk, 2, True)
    assert transitions.owed_round(other).league_id == other.pk


def test_settling_starts_moves_only_accepted_matches_still_in_their_assignment():
    league = make_league("log_settle")
    a, b, c, d = add_players(league, 4)
    referee = add_referee(league, AgentStatus.REGISTERED)
    league = running(league)
    rnd = Round.objects.create(league=league, number=1, status=Round.Status.PENDING)
    for number, (pa, pb) in enumerate(((a, b), (c, d), (a, c)), start=1):
        Match.objects.create(
            league=league, round=rnd, match_id=f"R1M{number}", player_a=pa, player_b=pb, game_type="even_odd",
        )  # fmt: skip
    claimed = transitions.announce_round(league, rnd.pk, None).claimed
    assert [item.match_id for item in claimed] == ["R1M1", "R1M2", "R1M3"]
    for match in Match.objects.filter(league=league):
        assert (match.status, match.referee_id, match.attempt) == ("ASSIGNED", referee.pk, 1)
        assert match.deadline_at - match.assigned_at == timedelta(seconds=league.match_deadline)
    # R1M3 was given again (attempt 2) before its first start_match was answered.
    Match.objects.filter(match_id="R1M3").update(attempt=2)
    accepted = {"message_type": "START_MATCH_ACK", "status": "ACCEPTED"}
    refused = {"message_type": "START_MATCH_ACK", "status": "REJECTED", "reason": "busy"}
    before = timezone.now()

    sent_at = before - timedelta(seconds=3)  # the calls went out before their answers came

    moved = dispatch.settle_starts(
        league, [(claimed[0], "ok", accepted), (claimed[1], "ok", refused), (claimed[2], "ok", accepted)], sent_at
    )

    assert moved == {claimed[0].match_pk}
    status = dict(Match.objects.filter(league=league).values_list("match_id", "status"))
    assert status == {"R1M1": "RUNNING", "R1M2": "ASSIGNED", "R1M3": "ASSIGNED"}
    referee.refresh_from_db()
    assert referee.status == AgentStatus.ACTIVE and referee.last_seen_at >= before
    started = Event.objects.filter(league=league, kind="match_started")
    assert [(e.agent, e.match_id, e.payload) for e in started] == [("REF01", "R1M1", {"attempt": 1})]
    sent = Event.objects.filter(league=league, direction="OUT", kind="START_MATCH").order_by("id")
    assert [e.match_id for e in sent] == ["R1M1", "R1M2", "R1M3"]
    assert sent[1].payload["reply"]["status"] == "REJECTED"
    # Each row says when its call went out, not only when it was recorded.
    assert {e.payload["sent_at"] for e in sent} == {sent_at.isoformat()}
    assert all(e.at >= before for e in sent)


def test_a_start_whose_report_came_first_is_still_in_the_event_log():
    """Finding 7: a batch's first matches are often reported before all its start_match calls
    are answered; each still gets its START_MATCH and match_started rows (and stays FINISHED)."""
    league = make_league("log_settle_reported")
    a, b = add_players(league, 2)
    referee = add_referee(league, AgentStatus.ACTIVE)
    league = running(league)
    rnd = Round.objects.create(league=league, number=1, status=Round.Status.PENDING)
    Match.objects.create(league=league, round=rnd, match_id="R1M1", player_a=a, player_b=b, game_type="even_odd")
    (item,) = transitions.announce_round(league, rnd.pk, None).claimed
    Match.objects.filter(pk=item.match_pk).update(status=Match.Status.FINISHED)  # its report came first

    started = dispatch.settle_starts(league, [(item, "ok", {"message_type": "START_MATCH_ACK", "status": "ACCEPTED"})])

    assert started == {item.match_pk}
    assert Match.objects.get(pk=item.match_pk).status == Match.Status.FINISHED
    kinds = list(Event.objects.filter(league=league, match_id="R1M1").values_list("kind", flat=True))
    assert kinds.count("START_MATCH") == 1 and kinds.count("match_started") == 1, kinds
    assert referee.referee_id == item.referee_id


def test_settling_starts_leaves_a_suspended_referee_suspended():
    league = make_league("log_settle_suspended")
    a, b = add_players(league, 2)
    referee = add_referee(league, AgentStatus.ACTIVE)
    league = running(league)
    rnd = Round.objects.create(league=league, number=1, status=Round.Status.PENDING)
    Match.objects.create(league=league, round=rnd, match_id="R1M1", player_a=a, player_b=b, game_type="even_odd")
    (item,) = transitions.announce_round(league, rnd.pk, None).claimed
    Referee.objects.filter(pk=referee.pk).update(status=AgentStatus.SUSPENDED)

    dispatch.settle_starts(league, [(item, "ok", {"message_type": "START_MATCH_ACK", "status": "ACCEPTED"})])

    referee.refresh_from_db()
    assert referee.status == AgentStatus.SUSPENDED and referee.last_seen_at is None


def start_match_from_models(league: League, match_pk: int) -> dict:
    """START_MATCH as built from the match's model rows (what the claim used to load)."""
    match = Match.objects.select_related("round", "player_a", "player_b", "referee__league").get(pk=match_pk)
    return dispatch.start_match_message(league, dispatch.MatchToStart.of(match), match.referee)


def comparable(message: dict) -> dict:
    return {k: v for k, v in message.items() if k not in ("conversation_id", "timestamp", "start_by", "deadline_at")}


def test_a_claim_read_as_values_sends_what_the_model_rows_say(django_assert_num_queries):
    league = make_league("log_claim")
    players = add_players(league, 4)
    add_referee(league, AgentStatus.ACTIVE)
    league = running(league)
    played_round(league, players, 1, [(0, 1, 3, 0), (2, 3, 1, 1)])
    Round.objects.filter(league=league, number=1).update(status=Round.Status.COMPLETED)
    rnd = Round.objects.create(league=league, number=2, status=Round.Status.PENDING)
    for number, (a, b) in enumerate(((0, 2), (1, 3), (0, 3), (1, 2)), start=1):
        Match.objects.create(
            league=league, round=rnd, match_id=f"R2M{number}", player_a=players[a], player_b=players[b],
            game_type="even_odd", attempt=1 if number == 2 else 0,  # R2M2 was tried once already
        )  # fmt: skip

    claimed = transitions.announce_round(league, rnd.pk, None).claimed  # the referee has room for 3

    assert [(item.match_id, item.attempt) for item in claimed] == [("R2M1", 1), ("R2M2", 2), ("R2M3", 1)]
    for item in claimed:
        message = item.delivery.message
        assert comparable(message) == comparable(start_match_from_models(league, item.match_pk))
        assert message["match_token"] == common.match_token(league.league_id, item.match_id, item.attempt)
    first = claimed[0].delivery.message
    assert (first["round_id"], first["player_A_id"], first["player_B_id"]) == (2, "P01", "P03")
    assert first["player_A_endpoint"] == "http://127.0.0.1:1/p1"
    assert first["standings"] == {
        "P01": {"wins": 1, "losses": 0, "draws": 0},
        "P03": {"wins": 0, "losses": 0, "draws": 1},
    }
    assert dict(Match.objects.filter(round=rnd).values_list("match_id", "attempt")) == {
        "R2M1": 1, "R2M2": 2, "R2M3": 1, "R2M4": 0,
    }  # fmt: skip

    # A later claim (a referee freed up) reads the round itself, in as many queries for any number.
    Match.objects.filter(match_id="R2M1").update(status=Match.Status.FINISHED)
    # Referees, busy counts, candidates, round, the players' records, assignment, events; and
    # the savepoint's two.
    with django_assert_num_queries(9):
        (later,) = dispatch.claim_matches(league.pk, rnd.pk, league=league)
    assert later.match_id == "R2M4"
    assert comparable(later.delivery.message) == comparable(start_match_from_models(league, later.match_pk))


def test_a_match_with_an_unreachable_player_is_recorded_as_any_result_and_ends_the_round():
    league = make_league("log_decided")
    a, b, c, d = add_players(league, 4)
    league = running(league)
    rnd = Round.objects.create(league=league, number=1, status=Round.Status.ANNOUNCED, announced_at=timezone.now())
    for number, (pa, pb) in enumerate(((a, b), (c, d)), start=1):
        Match.objects.create(
            league=league, round=rnd, match_id=f"R1M{number}", player_a=pa, player_b=pb, game_type="even_odd",
        )  # fmt: skip
    Player.objects.filter(pk__in=[b.pk, c.pk, d.pk]).update(unreachable_since=timezone.now(), unreachable_reason="gone")

    decided = reachability.decide_unreachable(rnd.pk)

    assert decided == ["R1M1", "R1M2"]
    results = {r.match.match_id: r for r in MatchResult.objects.select_related("match", "winner")}
    assert (results["R1M1"].winner.player_id, results["R1M1"].points_a, results["R1M1"].points_b) == ("P01", 3, 0)
    assert results["R1M2"].winner is None and (results["R1M2"].points_a, results["R1M2"].points_b) == (0, 0)
    assert set(Match.objects.filter(round=rnd).values_list("status", flat=True)) == {Match.Status.FINISHED}
    assert transitions.round_progress(rnd.pk) == transitions.RoundProgress(Round.Status.PLAYED, 0, 0)
    finished = Event.objects.filter(league=league, kind="match_finished")
    assert {e.agent for e in finished} == {"league_manager"}
    assert reachability.decide_unreachable(rnd.pk) == []  # decided once


@pytest.mark.django_db(transaction=True)
def test_starting_matches_locks_only_their_rows_so_reports_finishing_the_round_never_deadlock():
    """Finding 7 (PostgreSQL): ``start_running`` locked the matches with Match's default ordering,
    which joins the round, so FOR UPDATE locked the round's row too; a report finishing one of
    the batch's matches (match rows, then the round's, ``mark_round_played``) could deadlock with
    it, and the whole batch's START_MATCH and match_started rows were rolled back. Now only the
    match rows are locked: the round's row stays free while a batch's starts are recorded."""
    if connection.vendor != "postgresql":
        pytest.skip("row locks: PostgreSQL only (SQLite has one writer at a time)")
    league = make_league("log_settle_locks")
    a, b = add_players(league, 2)
    add_referee(league, AgentStatus.ACTIVE)
    league = running(league)
    rnd = Round.objects.create(league=league, number=1, status=Round.Status.PENDING)
    Match.objects.create(league=league, round=rnd, match_id="R1M1", player_a=a, player_b=b, game_type="even_odd")
    (item,) = transitions.announce_round(league, rnd.pk, None).claimed
    holding, done = threading.Event(), threading.Event()

    def start_and_hold() -> None:
        try:
            with transaction.atomic():
                dispatch.start_running([item])
                holding.set()
                done.wait(10)
        finally:
            connections.close_all()

    thread = threading.Thread(target=start_and_hold)
    thread.start()
    try:
        assert holding.wait(10)
        with transaction.atomic():  # NOWAIT: raises at once if the starts hold the round's row
            assert list(Round.objects.select_for_update(nowait=True).filter(pk=rnd.pk).values_list("pk", flat=True))
    finally:
        done.set()
        thread.join(10)


def test_a_rounds_progress_counts_its_matches_waiting_and_in_play():
    """``round_progress``, the query every tick makes for each round being played (SQL of its own)."""
    league = running(make_league("log_progress"))
    players = add_players(league, 8)
    rnd = Round.objects.create(league=league, number=1, status=Round.Status.ANNOUNCED)
    empty = Round.objects.create(league=league, number=2, status=Round.Status.PENDING)
    statuses = [Match.Status.SCHEDULED, Match.Status.ASSIGNED, Match.Status.RUNNING, Match.Status.FINISHED]
    for n, status in enumerate(statuses):
        a, b = players[2 * n], players[2 * n + 1]
        Match.objects.create(
            league=league,
            round=rnd,
            match_id=f"R1M{n + 1}",
            player_a=a,
            player_b=b,
            game_type="even_odd",
            status=status,
        )
    assert transitions.round_progress(rnd.pk) == transitions.RoundProgress(Round.Status.ANNOUNCED, 1, 2)
    Match.objects.filter(round=rnd).update(status=Match.Status.FINISHED)
    Round.objects.filter(pk=rnd.pk).update(status=Round.Status.PLAYED)
    assert transitions.round_progress(rnd.pk) == transitions.RoundProgress(Round.Status.PLAYED, 0, 0)
    assert transitions.round_progress(empty.pk) == transitions.RoundProgress(Round.Status.PENDING, 0, 0)
    gone = empty.pk
    empty.delete()
    assert transitions.round_progress(gone) == transitions.RoundProgress(Round.Status.PENDING, 0, 0)


def test_the_leagues_a_tick_works_on_are_those_in_progress_in_order():
    """``working_leagues``, the other read of every tick (SQL of its own): whole League rows."""
    made = {
        status: make_league(f"log_work_{status.lower()}")
        for status in (League.Status.RUNNING, League.Status.COMPLETED, League.Status.REGISTERING, League.Status.PAUSED)
    }
    for status, league in made.items():
        League.objects.filter(pk=league.pk).update(status=status, match_deadline=42)
    working = transitions.working_leagues()
    assert [league.league_id for league in working] == ["log_work_running", "log_work_registering"]
    assert working[0] == League.objects.get(league_id="log_work_running") and working[0].match_deadline == 42
    assert [league.league_id for league in transitions.working_leagues("log_work_registering")] == [
        "log_work_registering"
    ]
    assert transitions.working_leagues("log_work_completed") == []
