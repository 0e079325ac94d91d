"""An agent's page (league/api/profiles.py): what it counts and what it reads to count it."""

from __future__ import annotations

import pytest

from league.api import profiles
from league.models import Match, Referee
from tests.browser.league_data import make_league, play, start

pytestmark = pytest.mark.django_db


def test_a_referees_page_counts_every_match_it_was_given_and_lists_the_latest_hundred(django_assert_max_num_queries):
    league = make_league("busy_referee", players=16)  # 120 matches
    matches = list(Match.objects.filter(league=league).order_by("id"))
    for match in matches[:108]:
        play(match, "odd", "even", 3, notify=lambda *_: None)
    for match in matches[108:111]:
        start(match, notify=lambda *_: None)
    Match.objects.filter(pk__in=[m.pk for m in matches]).update(referee=league.referees.get())
    referee = Referee.objects.select_related("league").get(league=league)
    # However many matches it was given: its counts, and one read of the hundred it lists.
    with django_assert_max_num_queries(4):
        page = profiles.referee_profile(referee)
    assert page["matches_assigned"] == 120
    assert page["running"] == 3
    assert page["matches_reported"] == 108
    listed = [m["match_id"] for m in page["matches"]]
    assert listed == [m.match_id for m in reversed(matches)][:100]
    assert page["load_percent"] == round(100 * 3 / referee.max_concurrent_matches)


def test_a_players_standing_is_its_row_of_the_leagues_shared_table(monkeypatch):
    """Every player's page at one version takes its row from the league's one table (the
    snapshot's), however many players' pages are read; the row is the league's standings row."""
    from league.api import readmodel

    league = make_league("class_cup", players=6)
    for match in Match.objects.filter(league=league, round__number=1):
        play(match, "odd", "even", 3, notify=lambda *_: None)
    expected = {row["player_id"]: row for row in readmodel.standings(league)}
    tables = []
    real = readmodel.standings
    monkeypatch.setattr(readmodel, "standings", lambda *a, **k: tables.append(1) or real(*a, **k))
    for player in league.players.select_related("league").order_by("player_id"):
        assert profiles.player_profile(player)["standing"] == expected[player.player_id]
    assert len(tables) == 1  # the snapshot's, built once for the six pages
    play(Match.objects.filter(league=league, round__number=2).first(), "odd", "even", 3, notify=lambda *_: None)
    player = league.players.select_related("league").get(player_id="P01")
    assert (
        profiles.player_profile(player)["standing"] == {row["player_id"]: row for row in real(league)}["P01"]
    )  # a new version: a new table
    assert len(tables) == 2
