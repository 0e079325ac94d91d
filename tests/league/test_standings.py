"""The standings service (league/standings.py): who is in the table, and every reader of a
league's standings (LM queries, conductor, export, pages) showing the same table."""

from __future__ import annotations

import pytest

from league import export, queries, standings
from league.api import readmodel
from league.conductor.notices import round_boundary
from league.models import AgentStatus, League, Match, Player, Round
from league.standings import entrants
from leagueproto.scoring import ResultRow
from tests.browser.league_data import make_league, play, play_round

pytestmark = pytest.mark.django_db

WIRE_FIELDS = ("rank", "player_id", "display_name", "played", "wins", "draws", "losses", "technical_losses", "points")


def wire(rows: list[dict]) -> list[dict]:
    """The rows as LEAGUE_STANDINGS carries them (the pages add decorations of their own)."""
    return [{k: row[k] for k in WIRE_FIELDS} for row in rows]


def every_reader(league: League) -> dict[str, list[dict]]:
    league.refresh_from_db()
    last = Round.objects.filter(league=league, matches__status=Match.Status.FINISHED).order_by("-number").first()
    return {
        "service": standings.standings(league),
        "uncached": standings.compute(league),
        "queries": queries.standings(league),
        "pages": wire(readmodel.standings(league)),
        "export": export.recompute_standings(export.export_league(league)),
        "conductor": round_boundary(league, last).table,
    }


def test_every_reader_shows_the_same_table():
    league = make_league("same_table", players=4)
    play_round(league, 1)  # both A sides win
    play(Match.objects.get(league=league, round__number=2, match_id__endswith="M1"), "even", "even", 3)  # a draw
    tables = every_reader(league)
    assert tables["service"][0]["points"] == 4 and sum(row["played"] for row in tables["service"]) == 6
    for reader, table in tables.items():
        assert table == tables["service"], reader


def test_a_removed_player_with_results_stays_and_one_without_is_left_out():
    league = make_league("removals", players=4)
    play_round(league, 1)
    late = Player.objects.create(league=league, player_id="P05", display_name="Late", endpoint="http://127.0.0.1:9/mcp")
    played = Player.objects.get(league=league, player_id="P04")
    Player.objects.filter(pk__in=[late.pk, played.pk]).update(status=AgentStatus.REMOVED)

    tables = every_reader(league)
    ids = [row["player_id"] for row in tables["service"]]
    assert sorted(ids) == ["P01", "P02", "P03", "P04"]  # P04 played before it left; P05 never did
    for reader, table in tables.items():
        assert table == tables["service"], reader
    statuses = {row["player_id"]: row["status"] for row in readmodel.standings(league)}
    assert statuses["P04"] == AgentStatus.REMOVED


def test_the_cached_table_follows_new_results_removals_and_returns():
    league = make_league("cached", players=4)
    before = standings.standings(league)
    assert [row["played"] for row in before] == [0, 0, 0, 0]
    play_round(league, 1)
    assert sum(row["played"] for row in standings.standings(league)) == 4
    Player.objects.create(league=league, player_id="P05", display_name="Late", endpoint="http://127.0.0.1:9/mcp")
    assert len(standings.standings(league)) == 5
    Player.objects.filter(league=league, player_id="P05").update(status=AgentStatus.REMOVED)
    assert len(standings.standings(league)) == 4
    mine = standings.standings(league)
    mine[0]["points"] = 99  # a caller's copy: the cache is not changed through it
    assert standings.standings(league)[0]["points"] != 99


def test_entrants_is_the_one_rule_on_removed_players():
    players = [("P01", "A", AgentStatus.ACTIVE), ("P02", "B", AgentStatus.REMOVED), ("P03", "C", AgentStatus.REMOVED)]
    results = [ResultRow("R1M1", "P01", "P02", 3, 0)]
    assert entrants(players, results) == {"P01": "A", "P02": "B"}
    assert entrants(players, []) == {"P01": "A"}
