"""The standings service (league/standings.py): who is in the table, and every reader of a
league's standings (LM queries, conductor, export, pages) showing the same table."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection

from league import export, queries, standings
from league.api import readmodel
from league.conductor.notices import round_boundary
from league.models import AgentStatus, League, Match, MatchResult, Player, Round
from league.standings import entrants
from leagueproto.scoring import ResultRow
from tests.browser.league_data import make_league, play, play_round

pytestmark = pytest.mark.django_db

RESULTS = MatchResult._meta.db_table


def reads_every_result(sql: str) -> bool:
    """Whether ``sql`` reads a league's results for the ranking (their points) with no lower
    bound on their id: ``ranking_results``, not the read of the results added since
    (``_add_new_results``)."""
    return f'"{RESULTS}"."points_a"' in sql and f'"{RESULTS}"."id" >' not in sql


def counts_results(sql: str) -> bool:
    """Whether ``sql`` is the aggregate of a league's results that ``standings_key`` reads."""
    return sql.startswith("SELECT COUNT(") and f'FROM "{RESULTS}"' in sql


@pytest.fixture(autouse=True)
def fresh_cache() -> None:
    standings.clear_cache()


@pytest.fixture
def full_reads() -> Iterator[list[int]]:
    """Counts the reads of every result of a league (``ranking_results``), ``compute``'s included."""
    reads = [0]

    def counted(execute: Callable, sql: str, params: Any, many: bool, context: dict) -> Any:
        if reads_every_result(sql):
            reads[0] += 1
        return execute(sql, params, many, context)

    with connection.execute_wrapper(counted):
        yield reads


def read(league: League, full_reads: list[int]) -> tuple[list[dict], bool]:
    """The cached standings, and whether getting them read every result."""
    before = full_reads[0]
    rows = standings.standings(league)
    return rows, full_reads[0] > before


def match(league: League, match_id: str) -> Match:
    return Match.objects.get(league=league, match_id=match_id)


def changed(league: League) -> None:
    """What every write path does after changing what the standings read (these tests write rows
    by hand): the league's version moves on."""
    League.objects.filter(pk=league.pk).changed()


def both_lose(m: Match) -> None:
    MatchResult.objects.create(
        match=m,
        league=m.league,
        outcome=MatchResult.Outcome.BOTH_LOSE,
        points_a=0,
        points_b=0,
        technical_loss_a=True,
        technical_loss_b=True,
        report_digest=f"digest-{m.match_id}",
    )
    changed(m.league)


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
    changed(league)
    assert len(standings.standings(league)) == 5
    Player.objects.filter(league=league, player_id="P05").update(status=AgentStatus.REMOVED)
    changed(league)
    assert len(standings.standings(league)) == 4
    mine = standings.standings(league)
    mine[0]["points"] = 99  # a caller's copy: the cache is not changed through it
    assert standings.standings(league)[0]["points"] != 99


def test_entrants_is_the_one_rule_on_removed_players():
    players = [("P01", "A", AgentStatus.ACTIVE), ("P02", "B", AgentStatus.REMOVED), ("P03", "C", AgentStatus.REMOVED)]
    results = [ResultRow("R1M1", "P01", "P02", 3, 0)]
    assert entrants(players, results) == {"P01": "A", "P02": "B"}
    assert entrants(players, []) == {"P01": "A"}


def test_the_table_and_the_ranks_before_the_latest_round_come_from_one_pass():
    players = [(f"P0{i}", f"N{i}", AgentStatus.ACTIVE) for i in (1, 2, 3)]
    first = [(1, ResultRow("R1M1", "P01", "P02", 3, 0))]
    ranked, before = standings.rank_and_before(players, first)
    assert [row.player_id for row, _ in ranked] == ["P01", "P02", "P03"]
    assert before is None  # one round: nothing to compare with
    both = [*first, (2, ResultRow("R2M1", "P02", "P01", 3, 0)), (2, ResultRow("R2M2", "P02", "P03", 3, 0))]
    ranked, before = standings.rank_and_before(players, both)
    # The same table as ranking every result at once, and the ranks of round 1's table.
    assert ranked == standings.rank(players, [row for _, row in both])
    assert before == {row.player_id: row.rank for row, _ in standings.rank(players, [row for _, row in first])}
    assert before == {"P01": 1, "P02": 2, "P03": 3}
    assert [row.player_id for row, _ in ranked] == ["P02", "P01", "P03"]


def _afresh(players, results, fmt=standings.ROUND_ROBIN):
    return standings.rank_and_before(players, results, fmt)


def test_a_running_ranking_is_the_ranking_afresh_whatever_comes_next():
    import random

    from league.formats import TableFormat

    rng = random.Random(7)
    ids = [f"P{i:02d}" for i in range(1, 9)]
    players = [(p, f"N{p}", AgentStatus.ACTIVE) for p in ids]
    results: list[tuple[int, ResultRow]] = []
    running = standings.RunningRanking()
    kept_tables = []
    for number in range(1, 8):
        for m in range(4):
            a, b = rng.sample(ids, 2)
            points = rng.choice([(3, 0), (1, 1), (0, 3)])
            results.append((number, ResultRow(f"R{number}M{m}", a, b, *points, points[0] == 0 and rng.random() < 0.2)))
            assert running.rank_and_before(players, list(results)) == _afresh(players, results)
            kept_tables.append(running._kept.table)
    # Results were added to the one table kept (the ranks before a round taken as it began).
    assert all(t is kept_tables[0] for t in kept_tables)
    # Whatever else changes, the ranking is the one afresh.
    edited = [(1, ResultRow("R1M0", results[0][1].player_b, results[0][1].player_a, 3, 0)), *results[1:]]
    assert running.rank_and_before(players, edited) == _afresh(players, edited)
    assert running._kept.table is not kept_tables[0]
    fewer = results[:-3]
    assert running.rank_and_before(players, fewer) == _afresh(players, fewer)
    renamed = [(p, "Another" if p == "P01" else n, s) for p, n, s in players]
    assert running.rank_and_before(renamed, results) == _afresh(renamed, results)
    late = [*results, (3, ResultRow("R3M9", "P01", "P02", 3, 0))]  # an earlier round's result after a later one
    assert running.rank_and_before(renamed, late) == _afresh(renamed, late)
    removed = [*players, ("P09", "Gone", AgentStatus.REMOVED)]
    assert running.rank_and_before(removed, results) == _afresh(removed, results)
    first_of_removed = [*results, (8, ResultRow("R8M0", "P09", "P01", 0, 3))]  # now in the table
    assert running.rank_and_before(removed, first_of_removed) == _afresh(removed, first_of_removed)
    swiss = TableFormat(tie_breaks=standings.ROUND_ROBIN.tie_breaks, byes=(("P03", 3, 8),))
    assert running.rank_and_before(removed, first_of_removed, swiss) == _afresh(removed, first_of_removed, swiss)
    # A caller's copy of the ranks before is its own.
    ranked, before = running.rank_and_before(removed, first_of_removed)
    before["P01"] = 99
    assert running.rank_and_before(removed, first_of_removed)[1]["P01"] != 99


def test_a_leagues_page_ranks_only_the_results_added_since_its_last_version():
    league = make_league("running", players=6)
    play_round(league, 1)
    first = readmodel.standings(league)
    table = readmodel._rankings[league.pk]._kept.table
    play_round(league, 2)
    second = readmodel.standings(league)
    assert readmodel._rankings[league.pk]._kept.table is table  # round 2's results added to it
    assert [row["player_id"] for row in second] == [row["player_id"] for row in standings.compute(league)]
    assert [row["points"] for row in second] == [row["points"] for row in standings.compute(league)]
    assert any(row["rank_change"] is not None for row in second)
    assert first != second


def test_new_results_are_added_to_the_cached_table_and_anything_else_reads_every_result(settings, full_reads):
    settings.STANDINGS_CACHE_TTL = 3600  # no full read for its age until the end
    league = make_league("incremental", players=6)
    Player.objects.filter(league=league, player_id="P06").update(status=AgentStatus.REMOVED)

    def step(*, full: bool) -> list[str]:
        rows, was_full = read(league, full_reads)
        assert rows == standings.compute(league)
        assert was_full == full
        return [row["player_id"] for row in rows]

    assert "P06" not in step(full=True)  # removed before it played
    play(match(league, "R1M1"), "even", "odd", 4)  # P01 beats P04
    step(full=False)
    play(match(league, "R1M2"), "odd", "odd", 3)  # a draw
    play(match(league, "R2M1"), "even", "even", 2, technical="A")  # P05 fails: P01 wins
    step(full=False)
    play(match(league, "R1M3"), "even", "odd", 5)  # a result of P06: now it is listed
    assert "P06" in step(full=True)
    Player.objects.filter(league=league, player_id="P04").update(status=AgentStatus.REMOVED)
    changed(league)
    assert "P04" in step(full=True)  # the players changed; P04 has a result
    both_lose(match(league, "R2M3"))  # P04 and P03
    assert "P04" in step(full=False)
    Player.objects.create(league=league, player_id="P07", display_name="Late", endpoint="http://127.0.0.1:9/mcp")
    play(match(league, "R2M2"), "even", "odd", 2)  # with a new player too: every result is read
    assert "P07" in step(full=True)

    # An admin's edit of a counted result changes no key: it shows with the first call
    # STANDINGS_CACHE_TTL after the last full read, however many results were added in between.
    MatchResult.objects.filter(match__match_id="R1M2", league=league).update(outcome="WIN_A", points_a=3, points_b=0)
    play(match(league, "R3M1"), "odd", "odd", 1)
    assert read(league, full_reads)[1] is False  # younger than the TTL: the edit is not seen yet
    settings.STANDINGS_CACHE_TTL = 0  # the last full read is now older than the TTL
    play(match(league, "R3M2"), "odd", "even", 1)
    step(full=True)
    assert next(row for row in standings.standings(league) if row["player_id"] == "P02")["wins"] == 1  # R1M2


def test_a_deleted_result_reads_every_result_again(full_reads):
    league = make_league("deleted", players=4)
    play(match(league, "R1M1"), "even", "odd", 4)
    standings.standings(league)
    MatchResult.objects.filter(league=league, match__match_id="R1M1").delete()
    play(match(league, "R1M2"), "even", "odd", 4)
    play(match(league, "R2M1"), "odd", "odd", 4)  # one more result than before, two new ones
    rows, was_full = read(league, full_reads)
    assert was_full and rows == standings.compute(league)
    assert sum(row["played"] for row in rows) == 4


def test_adding_results_costs_the_version_the_key_and_one_query(django_assert_num_queries):
    league = make_league("one_query", players=4)
    standings.standings(league)
    play_round(league, 1)
    with django_assert_num_queries(4):  # the version, the two aggregates of the key, the new results
        rows = standings.standings(league)
    assert rows == standings.compute(league)
    assert sum(row["played"] for row in rows) == 4


def test_a_read_while_nothing_changed_costs_the_version_only(django_assert_num_queries):
    league = make_league("unchanged", players=4)
    play_round(league, 1)
    first = standings.standings(league)
    for _ in range(3):
        with django_assert_num_queries(1):
            assert standings.standings(league) == first


def test_a_row_just_read_gives_its_version_and_a_row_kept_is_read_again(django_assert_num_queries):
    league = make_league("just_read", players=4)
    first = standings.standings(league)
    row = League.objects.get(pk=league.pk)  # an agent's query reads its league with its token
    with django_assert_num_queries(0):
        assert standings.standings(row, just_read=True) == first
    play_round(league, 1)  # ``league`` is now behind: its version is not the league's
    with django_assert_num_queries(0):
        assert standings.standings(league, just_read=True) == first  # what the row says it is
    kept = standings.standings(league)  # a row kept for long: the version is read
    assert kept == standings.compute(league) and sum(row["played"] for row in kept) == 4
    row = League.objects.get(pk=league.pk)
    with django_assert_num_queries(0):
        assert standings.standings(row, just_read=True) == kept


def test_a_hand_edit_that_moves_no_version_shows_after_the_ttl(settings):
    settings.STANDINGS_CACHE_TTL = 3600
    league = make_league("hand_edit", players=4)
    standings.standings(league)
    Player.objects.filter(league=league, player_id="P01").update(display_name="Renamed")
    assert "Renamed" not in {row["display_name"] for row in standings.standings(league)}
    settings.STANDINGS_CACHE_TTL = 0
    assert "Renamed" in {row["display_name"] for row in standings.standings(league)}


def test_a_result_the_full_read_saw_before_its_key_did_is_not_counted_twice(full_reads):
    league = make_league("race", players=4)
    late = [match(league, "R1M1")]

    def a_result_after_the_key(execute: Callable, sql: str, params: Any, many: bool, context: dict) -> Any:
        answer = execute(sql, params, many, context)
        if late and counts_results(sql):  # written after the key counted the results
            play(late.pop(), "even", "odd", 4)
        return answer

    with connection.execute_wrapper(a_result_after_the_key):
        assert sum(row["played"] for row in standings.standings(league)) == 2  # read after the key
    assert not late
    rows, was_full = read(league, full_reads)
    assert was_full and rows == standings.compute(league)
    assert sum(row["played"] for row in rows) == 2
