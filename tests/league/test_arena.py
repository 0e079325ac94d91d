"""The arena in the database: opening, registration while it runs, continuous pairing into
ordinary matches, and each result rated once, in the result's own transaction."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone

from league import ratings
from league.actions.arena import open_arena, rate_results
from league.conductor.arena import pair_arena
from league.conductor.dispatch import claim_matches
from league.models import ArenaSeat, Event, League, Match, Player, Rating, RatingChange, Round
from tests.league.lm_support import call, log_for, make_league, message, player_meta, register_player, register_referee

pytestmark = pytest.mark.django_db(transaction=True)


def arena(league_id: str = "arena_1", **settings) -> League:
    league = make_league(league_id, open_seconds=None, schedule_format="arena", **settings)
    return open_arena(league)


def report(ref: dict, match: Match, winner: str | None, loser: str, *, technical: bool = False) -> dict:
    if technical:
        result = {
            "status": "TECHNICAL_LOSS",
            "winner": winner,
            "score": {winner: 3, loser: 0},
            "technical_loss": [loser],
        }
    elif winner is None:
        a, b = match.player_a.player_id, match.player_b.player_id
        result = {"status": "DRAW", "winner": None, "score": {a: 1, b: 1}, "technical_loss": []}
    else:
        result = {"status": "WIN", "winner": winner, "score": {winner: 3, loser: 0}, "technical_loss": []}
    a, b = match.player_a.player_id, match.player_b.player_id
    return message(
        "MATCH_RESULT_REPORT",
        f"referee:{ref['referee_id']}",
        auth_token=ref["auth_token"],
        league_id=match.league.league_id,
        round_id=1,
        match_id=match.match_id,
        game_type="even_odd",
        result=result,
        match_log=log_for(a, b, result),
    )


def play_one(lm_server: str, league: League, ref: dict, *, winner_side: str = "a", technical: bool = False):
    """Pair, claim and report one match of the arena; its match and the report sent."""
    paired = pair_arena(league.pk, capacity=1)
    assert paired.created == 1
    claim_matches(league.pk, paired.rnd.pk)
    match = Match.objects.select_related("player_a", "player_b", "league").get(league=league, status="ASSIGNED")
    a, b = match.player_a.player_id, match.player_b.player_id
    winner, loser = (a, b) if winner_side == "a" else (b, a) if winner_side == "b" else (None, b)
    sent = report(ref, match, winner, loser, technical=technical)
    assert call(lm_server, "report_match_result", sent)["status"] == "RECORDED"
    return match, sent


def test_an_arena_runs_at_once_and_takes_players_while_it_runs(lm_server):
    league = arena()
    assert league.status == League.Status.RUNNING and league.registration_open()
    reply = register_player(lm_server, "ann", league_id="arena_1")
    assert reply["status"] == "ACCEPTED", reply
    assert Round.objects.get(league=league).status == Round.Status.ANNOUNCED


def test_a_result_moves_both_ratings_once_and_a_replayed_report_moves_nothing(lm_server):
    league = arena()
    ref = register_referee(lm_server, "ref", league_id="arena_1")
    for name in ("ann", "bob"):
        assert register_player(lm_server, name, league_id="arena_1")["status"] == "ACCEPTED"
    match, sent = play_one(lm_server, league, ref)
    winner, loser = ratings.rate(ratings.initial(), ratings.initial())
    a = Rating.objects.get(identity=ArenaSeat.objects.get(player=match.player_a).identity)
    b = Rating.objects.get(identity=ArenaSeat.objects.get(player=match.player_b).identity)
    assert (a.mu, a.sigma, a.matches, a.wins) == (winner.mu, winner.sigma, 1, 1)
    assert (b.mu, b.sigma, b.matches, b.losses) == (loser.mu, loser.sigma, 1, 1)
    assert RatingChange.objects.filter(match=match).count() == 2

    assert call(lm_server, "report_match_result", sent)["status"] == "DUPLICATE"
    assert RatingChange.objects.filter(match=match).count() == 2
    a.refresh_from_db()
    assert (a.mu, a.matches) == (winner.mu, 1)
    assert Event.objects.filter(league=league, kind="rating_updated").count() == 1
    # The arena's round stays in play: it is never played out.
    assert Round.objects.get(league=league).status == Round.Status.ANNOUNCED


def test_the_database_refuses_a_second_rating_change_of_one_match(lm_server):
    league = arena()
    ref = register_referee(lm_server, "ref", league_id="arena_1")
    for name in ("ann", "bob"):
        register_player(lm_server, name, league_id="arena_1")
    match, _ = play_one(lm_server, league, ref)
    with pytest.raises(IntegrityError), transaction.atomic():
        rate_results([match.result])
    assert RatingChange.objects.filter(match=match).count() == 2


def test_ratings_follow_a_known_sequence_as_the_library_computes_it(lm_server):
    league = arena()
    ref = register_referee(lm_server, "ref", league_id="arena_1")
    for name in ("ann", "bob"):
        register_player(lm_server, name, league_id="arena_1")
    expected = {"P01": ratings.initial(), "P02": ratings.initial()}
    for side in ("a", "b", "draw", "a"):
        match, _ = play_one(lm_server, league, ref, winner_side=side)
        a, b = match.player_a.player_id, match.player_b.player_id
        if side == "b":
            expected[b], expected[a] = ratings.rate(expected[b], expected[a])
        else:
            expected[a], expected[b] = ratings.rate(expected[a], expected[b], draw=side == "draw")
    for player_id, rating in expected.items():
        identity = ArenaSeat.objects.get(player__league=league, player__player_id=player_id).identity
        row = Rating.objects.get(identity=identity)
        assert (row.mu, row.sigma, row.ordinal, row.matches) == (rating.mu, rating.sigma, rating.ordinal, 4)


def test_a_technical_loss_rests_the_agent_with_a_doubling_backoff_and_keeps_it(lm_server):
    league = arena()
    ref = register_referee(lm_server, "ref", league_id="arena_1")
    for name in ("ann", "bob"):
        register_player(lm_server, name, league_id="arena_1")
    match, _ = play_one(lm_server, league, ref, technical=True)
    loser = ArenaSeat.objects.get(player=match.player_b)
    winner = ArenaSeat.objects.get(player=match.player_a)
    assert loser.failures == 1 and loser.rested_until is not None and winner.rested_until is None
    rest = (loser.rested_until - timezone.now()).total_seconds()
    assert 0 < rest <= 2.0
    # Resting, it is not paired; the arena keeps it (nothing removed), and it is paired once rested.
    assert pair_arena(league.pk, capacity=4).created == 0
    ArenaSeat.objects.filter(pk=loser.pk).update(rested_until=timezone.now() - timedelta(seconds=1))
    match, _ = play_one(lm_server, league, ref, technical=True, winner_side="a")
    loser = ArenaSeat.objects.get(player=match.player_b if match.player_b_id == loser.pk else match.player_a)
    assert loser.failures == 2
    assert 2.0 < (loser.rested_until - timezone.now()).total_seconds() <= 4.0
    assert Player.objects.get(pk=loser.pk).status in ("REGISTERED", "ACTIVE")


def test_pairing_leaves_alone_agents_in_play_and_respects_the_hourly_cap(lm_server):
    league = arena(max_players=10)
    league.arena.max_matches_per_hour = 1
    league.arena.save()
    ref = register_referee(lm_server, "ref", league_id="arena_1")
    for name in ("ann", "bob", "cy", "dee"):
        register_player(lm_server, name, league_id="arena_1")
    first = pair_arena(league.pk, capacity=10)
    assert first.created == 2
    assert pair_arena(league.pk, capacity=10).created == 0  # everyone is in a match
    claim_matches(league.pk, first.rnd.pk)
    for match in Match.objects.select_related("player_a", "player_b", "league").filter(league=league):
        call(lm_server, "report_match_result", report(ref, match, match.player_a.player_id, match.player_b.player_id))
    assert pair_arena(league.pk, capacity=10).created == 0  # one match an hour each, played


def test_an_agent_alone_plays_a_house_bot(lm_server):
    league = arena()
    register_player(lm_server, "ann", league_id="arena_1")
    meta = player_meta(display_name="house-random")
    register_player(lm_server, "house", league_id="arena_1", player_meta=meta)
    paired = pair_arena(league.pk, capacity=4)
    assert paired.created == 1
    seats = {s.player.display_name: s.house for s in ArenaSeat.objects.select_related("player")}
    assert seats == {"house-random": True, "ann": False}


def test_the_arena_page_ranks_agents_by_rating_with_their_uncertainty_and_form(lm_server, client):
    league = arena()
    ref = register_referee(lm_server, "ref", league_id="arena_1")
    for name in ("ann", "bob"):
        register_player(lm_server, name, league_id="arena_1")
    match, _ = play_one(lm_server, league, ref)
    page = client.get("/arenas/arena_1/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "Leaderboard" in body and "Rating over time" in body
    winner, loser = ratings.rate(ratings.initial(), ratings.initial())
    assert f"{round(winner.ordinal, 2)}" in body and f"{round(winner.sigma, 2)}" in body
    data = client.get("/api/leagues/arena_1/live/").json()
    board = data["leaderboard"]
    assert [r["player_id"] for r in board] == [match.player_a.player_id, match.player_b.player_id]
    assert [r["rank"] for r in board] == [1, 2]
    assert board[0]["form"] == [{"mark": "W", "technical": False, "match_id": match.match_id}]
    assert board[1]["matches"] == 1 and board[1]["sigma"] == round(loser.sigma, 2)
    assert [len(s["points"]) for s in data["chart"]["series"]] == [1, 1]
    assert client.get("/leagues/arena_1/").content.decode().count('id="leaderboard-body"') == 1
    # Its matches and players have the league's own pages.
    assert client.get(f"/leagues/arena_1/matches/{match.match_id}/").status_code == 200
    player_page = client.get(f"/leagues/arena_1/players/{match.player_a.player_id}/").content.decode()
    assert 'id="arena-rating"' in player_page and f"{round(winner.ordinal, 2)}" in player_page
    profile = client.get(f"/api/leagues/arena_1/players/{match.player_a.player_id}/").json()
    assert profile["arena_rating"]["matches"] == 1 and profile["arena_rating"]["rating"] == round(winner.ordinal, 2)


def test_a_league_page_shows_each_players_arena_rating_beside_its_standing(lm_server, client):
    league = arena()
    ref = register_referee(lm_server, "ref", league_id="arena_1")
    endpoints = [player_meta(display_name=name) for name in ("ann", "bob")]
    for meta in endpoints:
        register_player(lm_server, meta["display_name"], league_id="arena_1", player_meta=meta)
    match, _ = play_one(lm_server, league, ref)
    # The same agents (same endpoints) in a graded league: their arena rating comes with them.
    make_league("graded")
    for meta in endpoints:
        register_player(lm_server, meta["display_name"], league_id="graded", player_meta=meta)
    winner, _ = ratings.rate(ratings.initial(), ratings.initial())
    body = client.get("/leagues/graded/").content.decode()
    assert f"rating {round(winner.ordinal, 2)}" in body


def test_the_league_command_creates_and_opens_an_arena():
    out = StringIO()
    create = ["create", "--name", "Spring practice", "--league-id", "spring", "--schedule", "arena"]
    call_command("league", *create, stdout=out)
    call_command("league", "open", "spring", stdout=out)
    league = League.objects.get(league_id="spring")
    assert league.is_arena and league.status == League.Status.RUNNING and league.registration_open()
    assert "arena spring open" in out.getvalue()


@pytest.fixture
def admin_client(client):
    User.objects.create_superuser("teacher", "t@example.com", "pw-for-the-test")
    client.force_login(User.objects.get(username="teacher"))
    return client


def test_the_admin_opens_pauses_and_resumes_an_arena_and_shows_who_is_playing(lm_server, admin_client):
    league = make_league("arena_1", open_seconds=None, schedule_format="arena")
    url = reverse("admin:league_league_changelist")
    admin_client.post(url, {"action": "open_arena", "_selected_action": [league.pk]})
    league.refresh_from_db()
    assert league.status == League.Status.RUNNING
    register_player(lm_server, "ann", league_id="arena_1")
    register_player(lm_server, "house", league_id="arena_1", player_meta=player_meta(display_name="house-1"))
    assert pair_arena(league.pk, capacity=2).created == 1
    page = admin_client.get(reverse("admin:league_league_change", args=[league.pk])).content.decode()
    assert "who is playing" in page and "seat:http://127.0.0.1:" in page and "Max matches per hour" in page
    admin_client.post(url, {"action": "pause", "_selected_action": [league.pk]})
    league.refresh_from_db()
    assert league.status == League.Status.PAUSED
    assert pair_arena(league.pk, capacity=2).created == 0  # paused: no pairing
    assert register_player(lm_server, "bob", league_id="arena_1")["status"] == "ACCEPTED"  # joins all the same
    admin_client.post(url, {"action": "resume", "_selected_action": [league.pk]})
    league.refresh_from_db()
    assert league.status == League.Status.RUNNING
