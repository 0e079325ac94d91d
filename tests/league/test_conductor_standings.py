"""START_MATCH carries the two players' current records; the real referee hands each player its
own as ``your_standings`` in CHOOSE_PARITY_CALL."""

from __future__ import annotations

from contextlib import ExitStack

import pytest
from django.db import connection

from league import actions, conductor
from league.models import League, MatchResult, Round
from tests.league.lm_support import make_league, player_meta, register_player
from tests.league.test_conductor import FAST, conduct
from tests.referee.conftest import run_referee
from tests.referee.scripted import ScriptedPlayer, serving
from tests.support.servers import free_port


def records_before(league: League, round_number: int) -> dict[str, dict[str, int]]:
    """Recomputed from the stored results, independently of the conductor."""
    records: dict[str, dict[str, int]] = {}
    for result in MatchResult.objects.filter(league=league).select_related(
        "match__round", "match__player_a", "match__player_b"
    ):
        if result.match.round.number >= round_number:
            continue
        for player, points in ((result.match.player_a, result.points_a), (result.match.player_b, result.points_b)):
            record = records.setdefault(player.player_id, {"wins": 0, "losses": 0, "draws": 0})
            record[{3: "wins", 1: "draws", 0: "losses"}[points]] += 1
    return records


def test_each_match_tells_the_players_their_records_so_far(lm_server, tmp_path):
    league = make_league("standings_in_start", **FAST)
    choices = ["even", "odd", "odd", "even"]
    players = []
    with ExitStack() as stack:
        ref = stack.enter_context(
            run_referee(league_url=lm_server, league_id=league.league_id, state_dir=tmp_path, grace_seconds=0.5)
        )
        ref.wait_registered()
        for n, choice in enumerate(choices):
            port = free_port()
            endpoint = f"http://127.0.0.1:{port}/mcp"
            reply = register_player(lm_server, f"p{n}", player_meta=player_meta(endpoint), league_id=league.league_id)
            player = ScriptedPlayer(reply["player_id"], choices=[choice])
            stack.enter_context(serving(player.app(), port))
            players.append(player)
        actions.close_registration(league)
        conduct(league.league_id)

    league.refresh_from_db()
    assert league.status == League.Status.COMPLETED
    seen_a_record = False
    for player in players:
        calls = player.received.of("choose_parity")
        assert len(calls) == len(choices) - 1  # one per opponent
        for call in calls:
            expected = records_before(league, call["round_id"]).get(
                player.player_id, {"wins": 0, "losses": 0, "draws": 0}
            )
            assert call["context"]["your_standings"] == expected, (player.player_id, call["round_id"])
            seen_a_record |= sum(expected.values()) > 0
        assert calls[0]["context"]["your_standings"] == {"wins": 0, "losses": 0, "draws": 0}
    assert seen_a_record


@pytest.mark.django_db
def test_a_rounds_results_are_found_from_the_round_not_by_scanning_the_league():
    """Read twice a round: filtered by the result's league, SQLite walked every result of the
    league so far (22 ms by the last round of a 100-player league, a cost growing with n²)."""
    prepared = conductor._ROUND_RESULTS._get(connection)
    # On every backend: the round is picked by its league and number; the results' own league
    # column (whose index made SQLite walk them all) is not in the query.
    result_league = f"{connection.ops.quote_name(MatchResult._meta.db_table)}.{connection.ops.quote_name('league_id')}"
    assert result_league not in prepared.sql
    assert connection.ops.quote_name(Round._meta.db_table) in prepared.sql.split(" WHERE ")[1]
    if connection.vendor == "sqlite":  # and SQLite's plan starts from the round's unique index
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN QUERY PLAN " + prepared.sql, prepared.params)
            steps = [row[-1] for row in cursor.fetchall()]
        assert steps[0].startswith("SEARCH league_round USING COVERING INDEX"), steps
        assert not any("league_matchresult_league_id" in step for step in steps), steps
