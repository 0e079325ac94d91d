"""Swiss and knockout leagues round by round, through the conductor's transitions on the database:
each round drawn once its predecessor is played, once (``draw_next_round`` is idempotent), with no
rematch, at most one bye per player, and standings that count byes (Swiss) or stages (knockout)."""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Callable

import pytest
from django.db import transaction

from league import actions, formats, standings
from league.actions.results import mark_round_played
from league.api.readmodel import snapshot
from league.arena import identity_of
from league.conductor.transitions import create_schedule, draw_next_round, mark_round_completed, next_round
from league.models import Bye, Event, League, Match, MatchResult, Player, Rating, Round
from leagueproto.scoring import BYE_POINTS, id_sort_key

pytestmark = pytest.mark.django_db

Decide = Callable[[Match], str]  # a match's outcome: WIN_A, WIN_B or DRAW


def lower_id_wins(match: Match) -> str:
    a, b = match.player_a.player_id, match.player_b.player_id
    return "WIN_A" if id_sort_key(a) < id_sort_key(b) else "WIN_B"


def registered_league(league_id: str, players: int, **settings) -> League:
    league = actions.create_league(name=league_id, league_id=league_id, **settings)
    league = actions.open_registration(league, 600)
    for n in range(1, players + 1):
        Player.objects.create(
            league=league, player_id=f"P{n:02d}", display_name=f"p{n}", endpoint=f"http://127.0.0.1:{9100 + n}/mcp"
        )
    return league


def started_league(league_id: str, players: int, **settings) -> League:
    return start(registered_league(league_id, players, **settings))


def start(league: League) -> League:
    actions.start_league(league)
    assert create_schedule(league.pk)
    league.refresh_from_db()
    return league


def play_round(rnd: Round, decide: Decide = lower_id_wins) -> None:
    """Every match of ``rnd`` finished with ``decide``'s outcome, and the round PLAYED."""
    points = {"WIN_A": (3, 0), "WIN_B": (0, 3), "DRAW": (1, 1)}
    for match in Match.objects.filter(round=rnd).select_related("player_a", "player_b"):
        outcome = decide(match)
        winner = {"WIN_A": match.player_a, "WIN_B": match.player_b}.get(outcome)
        a, b = points[outcome]
        MatchResult.objects.create(
            match=match, league=rnd.league, outcome=outcome, winner=winner, points_a=a, points_b=b, report_digest="-"
        )
        Match.objects.filter(pk=match.pk).update(status=Match.Status.FINISHED)
    with transaction.atomic():  # as record_results calls it (it locks the round on PostgreSQL)
        assert mark_round_played(rnd.pk)


def play_out(league: League, decide: Decide = lower_id_wins) -> list[Round]:
    """Every round played, completed and the next drawn, as the conductor does, until none is left."""
    while True:
        rnd = Round.objects.filter(league=league).exclude(status=Round.Status.COMPLETED).order_by("number").first()
        if rnd is None:
            return list(Round.objects.filter(league=league).order_by("number"))
        play_round(rnd, decide)
        draw_next_round(league.pk)
        assert mark_round_completed(rnd.pk)


def pairs_of(league: League) -> list[frozenset[str]]:
    rows = Match.objects.filter(league=league).values_list("player_a__player_id", "player_b__player_id")
    return [frozenset(pair) for pair in rows]


def test_a_swiss_league_stores_only_its_first_round_at_the_start():
    league = started_league("swiss_first", 8, schedule_format="swiss", swiss_rounds=3)
    assert league.status == League.Status.RUNNING
    assert list(league.rounds.values_list("number", flat=True)) == [1]
    assert league.matches.count() == 4
    assert Event.objects.filter(league=league, kind="round_drawn").count() == 1


def test_drawing_the_next_round_twice_draws_it_once():
    league = started_league("swiss_twice", 8, schedule_format="swiss", swiss_rounds=3)
    first = league.rounds.get()
    assert draw_next_round(league.pk) is None, "round 1 is not played yet"
    play_round(first)
    drawn = draw_next_round(league.pk)
    assert drawn is not None and drawn.number == 2
    # A conductor killed after the draw committed, before round 1's boundary, runs it again.
    assert draw_next_round(league.pk) is None
    assert mark_round_completed(first.pk)
    assert draw_next_round(league.pk) is None
    assert list(league.rounds.values_list("number", flat=True)) == [1, 2]
    assert league.matches.count() == 8
    assert Event.objects.filter(league=league, kind="round_drawn").count() == 2


def test_a_round_completed_without_its_successor_drawn_gets_it_on_the_next_read():
    league = started_league("swiss_guarded", 6, schedule_format="swiss", swiss_rounds=2)
    first = league.rounds.get()
    play_round(first)
    assert mark_round_completed(first.pk)  # a conductor stopped before drawing
    upcoming = next_round(league)
    assert upcoming.rnd is not None and upcoming.rnd.number == 2
    assert next_round(league).rnd.pk == upcoming.rnd.pk
    assert league.rounds.count() == 2


@pytest.mark.parametrize("players, rounds", [(8, 5), (9, 4), (7, 6)])
def test_a_swiss_league_plays_its_rounds_without_rematch_and_one_bye_each(players, rounds):
    league = started_league(f"swiss_{players}_{rounds}", players, schedule_format="swiss", swiss_rounds=rounds)
    played = play_out(league)
    assert [r.number for r in played] == list(range(1, rounds + 1))
    pairs = pairs_of(league)
    assert len(pairs) == len(set(pairs)), "a pair met twice"
    byes = Counter(Bye.objects.filter(league=league).values_list("player__player_id", flat=True))
    assert sum(byes.values()) == (rounds if players % 2 else 0)
    assert all(n == 1 for n in byes.values())
    assert all(Bye.objects.filter(round=r).count() <= 1 for r in played)
    # Each player plays or sits out every round exactly once.
    for rnd in played:
        seated = [
            p for a, b in Match.objects.filter(round=rnd).values_list("player_a_id", "player_b_id") for p in (a, b)
        ]
        seated += list(Bye.objects.filter(round=rnd).values_list("player_id", flat=True))
        assert sorted(seated) == sorted(league.players.values_list("pk", flat=True))
    table = standings.standings(league)
    for row in table:
        assert row["points"] == 3 * row["wins"] + row["draws"] + BYE_POINTS * byes.get(row["player_id"], 0)
        assert row["played"] == rounds - byes.get(row["player_id"], 0)


def test_swiss_roles_are_balanced():
    league = started_league("swiss_roles", 8, schedule_format="swiss", swiss_rounds=6)
    play_out(league)
    as_a = Counter(Match.objects.filter(league=league).values_list("player_a__player_id", flat=True))
    as_b = Counter(Match.objects.filter(league=league).values_list("player_b__player_id", flat=True))
    for player_id in league.players.values_list("player_id", flat=True):
        assert abs(as_a[player_id] - as_b[player_id]) <= 2, (player_id, as_a[player_id], as_b[player_id])


def test_the_swiss_page_explains_buchholz_and_ranks_by_it():
    league = started_league("swiss_page", 8, schedule_format="swiss", swiss_rounds=3)
    play_out(league)
    snap = snapshot(league.league_id)
    assert "Buchholz" in snap["tie_break_rule"] and "bye" in snap["tie_break_rule"]
    assert snap["progress"]["rounds_total"] == 3
    rows = snap["standings"]
    assert all("buchholz" in row for row in rows)
    for above, below in zip(rows, rows[1:], strict=False):
        if above["points"] == below["points"]:
            assert above["buchholz"] >= below["buchholz"]
            if above["buchholz"] != below["buchholz"]:
                assert below["decided_by"] == "buchholz" and "Buchholz" in below["tie_break"]


def test_a_knockout_of_eight_ends_after_the_final_with_its_winner_first():
    league = started_league("ko_eight", 8, schedule_format="knockout")
    played = play_out(league)
    assert [Match.objects.filter(round=r).count() for r in played] == [4, 2, 1]
    # No ratings: seeded by id, 1 v 8, 4 v 5, 2 v 7, 3 v 6 (1 and 2 only meet in the final).
    assert dict(league.players.values_list("player_id", "seed")) == {f"P{n:02d}": n for n in range(1, 9)}
    first = Match.objects.filter(round=played[0]).order_by("match_id")
    assert [(m.player_a.player_id, m.player_b.player_id) for m in first] == [
        ("P01", "P08"),
        ("P04", "P05"),
        ("P02", "P07"),
        ("P03", "P06"),
    ]
    final = Match.objects.get(round=played[-1])
    assert (final.player_a.player_id, final.player_b.player_id) == ("P01", "P02")
    table = standings.standings(league)
    assert [row["player_id"] for row in table[:2]] == ["P01", "P02"]


@pytest.mark.parametrize(("players", "rounds"), [(8, 3), (6, 3), (5, 3), (2, 1)])
def test_a_knockouts_progress_counts_every_round_it_will_play_from_the_start(players, rounds):
    league = registered_league(f"ko_progress_{players}", players, schedule_format="knockout")
    assert snapshot(league.league_id)["progress"]["rounds_total"] == rounds  # before the draw
    league = start(league)
    assert snapshot(league.league_id)["progress"]["rounds_total"] == rounds  # one round drawn
    played = play_out(league)
    assert len(played) == rounds
    assert snapshot(league.league_id)["progress"]["rounds_total"] == rounds


def rate(league: League, ordinals: dict[str, float]) -> None:
    """Arena ratings in the league's game for these players, with these ordinals."""
    for player in league.players.filter(player_id__in=ordinals):
        ordinal = ordinals[player.player_id]
        Rating.objects.update_or_create(
            identity=identity_of(player.connection, player.canonical_endpoint, player.display_name),
            game_type=league.game_type,
            defaults={"mu": ordinal + 3, "sigma": 1.0, "ordinal": ordinal},
        )


def test_a_knockout_is_seeded_by_arena_rating_then_unrated_players_by_id_and_keeps_its_seeds():
    league = registered_league("ko_rated", 6, schedule_format="knockout")
    rate(league, {"P05": 20.0, "P03": 10.0, "P06": 10.0})
    league = start(league)
    seeds = {"P05": 1, "P03": 2, "P06": 3, "P01": 4, "P02": 5, "P04": 6}
    assert dict(league.players.values_list("player_id", "seed")) == seeds
    first = league.rounds.get(number=1)
    # 8 places for 6 players: the top-rated two sit round 1 out, seed 3 meets the lowest seed.
    assert sorted(Bye.objects.filter(round=first).values_list("player__player_id", flat=True)) == ["P03", "P05"]
    assert [(m.player_a.player_id, m.player_b.player_id) for m in first.matches.order_by("match_id")] == [
        ("P01", "P02"),
        ("P06", "P04"),
    ]
    bracket = formats.knockout_bracket(league)
    assert bracket.seeds == seeds
    assert [match for match, _ in bracket.rounds[0]] == [("P05", None), ("P01", "P02"), ("P03", None), ("P06", "P04")]

    rate(league, {"P01": 50.0})  # the ratings move during the knockout: its bracket does not
    played = play_out(league)
    second = played[1].matches.order_by("match_id")
    assert [(m.player_a.player_id, m.player_b.player_id) for m in second] == [("P05", "P01"), ("P03", "P04")]
    final = Match.objects.get(round=played[-1])
    assert (final.player_a.player_id, final.player_b.player_id) == ("P03", "P01")  # seed 2 v seed 4
    from league.export import export_league, recompute_standings

    assert recompute_standings(export_league(league)) == standings.standings(league)
    assert [row["player_id"] for row in standings.standings(league)[:2]] == ["P01", "P03"]


def round_pairs(rnd: Round) -> list[tuple[str, str]]:
    return [(m.player_a.player_id, m.player_b.player_id) for m in rnd.matches.order_by("match_id")]


def test_a_swiss_first_round_splits_the_field_by_arena_rating():
    league = registered_league("swiss_rated", 4, schedule_format="swiss", swiss_rounds=2)
    rate(league, {"P04": 30.0, "P03": 20.0, "P02": 10.0, "P01": 5.0})
    league = start(league)
    # Best v 3rd best, 2nd v 4th (by id alone it would be P01 v P03, P02 v P04).
    assert round_pairs(league.rounds.get(number=1)) == [("P04", "P02"), ("P03", "P01")]


def test_a_swiss_round_ranks_unrated_players_after_rated_ones_then_by_id():
    league = registered_league("swiss_unrated", 6, schedule_format="swiss", swiss_rounds=2)
    rate(league, {"P06": 12.0, "P05": 3.0})
    league = start(league)
    # Ranked P06, P05, P01, P02, P03, P04: the top half meets the bottom half.
    assert round_pairs(league.rounds.get(number=1)) == [("P06", "P02"), ("P05", "P03"), ("P01", "P04")]


def test_a_swiss_score_group_is_ordered_by_arena_rating():
    league = registered_league("swiss_groups", 8, schedule_format="swiss", swiss_rounds=3)
    rate(league, {f"P{n:02d}": float(n) for n in range(1, 9)})  # P08 the best, P01 the worst
    league = start(league)
    first = league.rounds.get(number=1)
    assert round_pairs(first) == [("P08", "P04"), ("P07", "P03"), ("P06", "P02"), ("P05", "P01")]
    play_round(first)  # the lower ids win: P01-P04 on 3 points, P05-P08 on 0
    draw_next_round(league.pk)
    # Each group in rating order, top half v bottom half (by id the winners would be P01 v P03, P02 v P04).
    pairs = {frozenset(pair) for pair in round_pairs(league.rounds.get(number=2))}
    assert pairs == {frozenset(p) for p in [("P04", "P02"), ("P03", "P01"), ("P08", "P06"), ("P07", "P05")]}


def test_the_first_round_seeds_follow_the_stored_seeds_then_player_id():
    assert formats.first_round_seeds(["P02", "P10", "P01"], {"P10": 1, "P02": 2}) == {"P10": 1, "P02": 2, "P01": 3}
    assert formats.first_round_seeds(["P10", "P02", "P01"], {}) == {"P01": 1, "P02": 2, "P10": 3}
    # Seeds stored for players of a 4-bracket are renumbered in their order: 1 v 4, 2 v 3.
    by_round = {1: [(("P04", "P02"), "P04"), (("P03", "P01"), None)]}
    bracket = formats.bracket_of(by_round, {1}, {"P04": 5, "P03": 7, "P01": 8, "P02": 9})
    assert bracket.seeds == {"P04": 1, "P03": 2, "P01": 3, "P02": 4}
    assert [match for match, _ in bracket.rounds[0]] == [("P04", "P02"), ("P03", "P01")]


def test_a_knockout_sends_the_higher_seed_through_a_draw_and_gives_top_seeds_byes():
    league = started_league("ko_six", 6, schedule_format="knockout")

    def upsets(match: Match) -> str:
        # Every match a draw but P05's first, which the lower seed wins.
        return "WIN_B" if match.player_b.player_id == "P05" and match.match_id.startswith("R1") else "DRAW"

    played = play_out(league, upsets)
    assert len(played) == 3
    assert sorted(Bye.objects.filter(league=league).values_list("player__player_id", flat=True)) == ["P01", "P02"]
    final = Match.objects.get(round=played[-1])
    # P05 beat P04, met P01 (drawn: P01 through); P02 drew with P03 (P02 through); P01 v P02 drawn.
    assert (final.player_a.player_id, final.player_b.player_id) == ("P01", "P02")
    table = standings.standings(league)
    assert table[0]["player_id"] == "P01" and table[1]["player_id"] == "P02"
    snap = snapshot(league.league_id)
    assert "knockout" in snap["tie_break_rule"]
    assert all("buchholz" not in row for row in snap["standings"])


@pytest.mark.parametrize(
    "fmt, players, problem",
    [
        ({"schedule_format": "swiss", "swiss_rounds": 4}, 4, "at most 3 rounds"),
        ({"schedule_format": "knockout", "min_players": 1}, 1, "at least 2 players"),
    ],
)
def test_a_league_that_cannot_play_its_format_does_not_start(fmt, players, problem):
    league = actions.create_league(name="x", league_id=f"bad_{players}_{len(problem)}", **fmt)
    league = actions.open_registration(league, 600)
    for n in range(1, players + 1):
        Player.objects.create(league=league, player_id=f"P{n:02d}", display_name=f"p{n}", endpoint="http://h/mcp")
    with pytest.raises(ValueError, match=problem):
        actions.start_league(league)


@pytest.mark.parametrize("rounds, problem", [(0, "number of rounds"), (10, "at most 9 rounds")])
def test_a_swiss_league_without_rounds_or_with_as_many_as_its_maximum_of_players_is_refused(rounds, problem):
    with pytest.raises(ValueError, match=problem):
        actions.create_league(name="x", league_id="x", schedule_format="swiss", swiss_rounds=rounds, max_players=10)


@pytest.mark.parametrize("fmt", [{"schedule_format": "swiss", "swiss_rounds": 4}, {"schedule_format": "knockout"}])
def test_an_export_recomputes_the_standings_the_league_serves(fmt):
    from league.export import export_league, recompute_standings

    league = started_league(f"export_{fmt['schedule_format']}", 7, **fmt)
    play_out(league, lambda m: "DRAW" if m.match_id.endswith("M1") else lower_id_wins(m))
    data = export_league(league)
    assert sum(len(r["byes"]) for r in data["schedule"]) >= 1
    assert recompute_standings(data) == standings.standings(league)


@pytest.mark.django_db(transaction=True)  # the league page is read on its own threads (page_read)
def test_the_swiss_league_page_shows_a_buchholz_column_and_the_rule(client):
    league = started_league("swiss_html", 5, schedule_format="swiss", swiss_rounds=2)
    play_out(league)
    page = client.get(f"/leagues/{league.league_id}/").content.decode()
    assert ">Bh</th>" in page and 'class="buchholz"' in page
    assert "then Buchholz (the sum of your opponents&#x27; points)" in page
    assert "round 2 of 2" in page


def test_rank_moves_in_a_swiss_league_count_the_byes_of_the_rounds_before():
    league = started_league("swiss_moves", 5, schedule_format="swiss", swiss_rounds=3)
    first = league.rounds.get()
    play_round(first, lambda m: "WIN_B")  # upsets: the bye's 3 points matter for the ranks after round 1
    draw_next_round(league.pk)
    mark_round_completed(first.pk)
    after_one = {row["player_id"]: row["rank"] for row in standings.standings(league)}
    second = league.rounds.get(number=2)
    play_round(second)
    snap = snapshot(league.league_id)
    for row in snap["standings"]:
        assert row["rank_change"] == after_one[row["player_id"]] - row["rank"], row["player_id"]


def test_a_swiss_league_standings_csv_has_the_buchholz_and_byes_the_standings_serve(client):
    league = started_league("swiss_csv", 5, schedule_format="swiss", swiss_rounds=3)
    play_out(league, lambda m: "DRAW" if m.match_id.endswith("M1") else lower_id_wins(m))
    text = client.get(f"/api/leagues/{league.league_id}/standings.csv").content.decode()
    header = next(csv.reader(io.StringIO(text)))
    assert header[header.index("points") :][:4] == ["points", "buchholz", "byes", "decided_by"]
    rows = list(csv.DictReader(io.StringIO(text)))
    served = client.get(f"/api/leagues/{league.league_id}/standings/").json()
    page = snapshot(league.league_id)["standings"]
    assert [row["player_id"] for row in rows] == [row["player_id"] for row in served] == [r["player_id"] for r in page]
    for row, api_row, page_row in zip(rows, served, page, strict=True):
        values = (int(row["rank"]), int(row["points"]), int(row["buchholz"]), int(row["byes"]), row["decided_by"])
        assert values == (*(api_row[k] for k in ("rank", "points", "buchholz", "byes")), api_row["decided_by"] or "")
        assert (page_row["buchholz"], page_row["byes"]) == (api_row["buchholz"], api_row["byes"])
    assert len({row["buchholz"] for row in rows}) > 1 and sum(int(row["byes"]) for row in rows) == 3


@pytest.mark.django_db(transaction=True)  # the league page is read on its own threads (page_read)
def test_a_knockouts_standings_and_page_show_each_players_seed(client):
    league = registered_league("ko_seeds", 4, schedule_format="knockout")
    before = client.get("/api/leagues/ko_seeds/standings/").json()
    assert [row["seed"] for row in before] == [None] * 4, "no seed before round 1 is drawn"
    rate(league, {"P03": 9.0, "P04": 4.0})
    start(league)
    seeds = {"P03": 1, "P04": 2, "P01": 3, "P02": 4}
    served = client.get("/api/leagues/ko_seeds/standings/").json()
    assert {row["player_id"]: row["seed"] for row in served} == seeds
    assert {row["player_id"]: row["seed"] for row in snapshot("ko_seeds")["standings"]} == seeds
    page = client.get("/leagues/ko_seeds/").content.decode()
    assert ">Seed</th>" in page
    for player_id, seed in seeds.items():
        row = page[page.index(f'<tr data-player="{player_id}">') :]
        assert row[: row.index("</tr>")].count(f'<td class="seed">{seed}</td>') == 1, player_id


@pytest.mark.parametrize("fmt", [{}, {"schedule_format": "swiss", "swiss_rounds": 2}])
def test_other_formats_have_no_seed(client, fmt):
    league = started_league(f"no_seed_{len(fmt)}", 4, **fmt)
    assert all("seed" not in row for row in client.get(f"/api/leagues/{league.league_id}/standings/").json())
    page = client.get(f"/leagues/{league.league_id}/").content.decode()
    assert ">Seed</th>" not in page and 'class="seed"' not in page


def test_a_knockout_standings_csv_has_no_buchholz(client):
    league = started_league("ko_csv", 4, schedule_format="knockout")
    header = client.get(f"/api/leagues/{league.league_id}/standings.csv").content.decode().splitlines()[0]
    assert "buchholz" not in header and "points,decided_by" in header
