"""The live state (league/api/live.py): one snapshot per league version, shared by every reader,
and the patches between versions."""

from __future__ import annotations

import logging
import random
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from league.api import live, readmodel
from league.models import Match, MatchResult, Player, Referee, Round
from tests.browser.league_data import make_league, play, start

BUILT = "built the snapshot of"


def builds(caplog) -> int:
    return sum(BUILT in r.getMessage() for r in caplog.records if r.name == "league.api.live")


def read_in_threads(league_id: str, readers: int) -> set[str]:
    def read(_: int) -> str:
        try:
            return live.current(league_id).version
        finally:
            connection.close()  # each reader thread has its own connection

    with ThreadPoolExecutor(max_workers=8) as pool:
        return set(pool.map(read, range(readers)))


@pytest.mark.django_db(transaction=True)
def test_a_snapshot_is_built_once_per_version_however_many_readers_ask(caplog, client):
    caplog.set_level(logging.DEBUG, logger="league.api.live")
    league = make_league("spring_cup", players=6)
    assert len(read_in_threads("spring_cup", 40)) == 1
    for _ in range(10):
        assert client.get("/api/leagues/spring_cup/live/").status_code == 200
        assert client.get("/leagues/spring_cup/").status_code == 200
    assert builds(caplog) == 1

    play(Match.objects.get(league=league, match_id="R1M1"), "odd", "even", 3)
    versions = read_in_threads("spring_cup", 40)
    assert len(versions) == 1
    assert builds(caplog) == 2
    body = client.get("/api/leagues/spring_cup/live/").json()
    assert body["progress"]["matches_finished"] == 1
    assert builds(caplog) == 2


@pytest.mark.django_db(transaction=True)
def test_a_snapshot_another_process_is_building_is_waited_for_not_built_again(caplog):
    caplog.set_level(logging.DEBUG, logger="league.api.live")
    make_league("spring_cup", players=4)
    key = live._key(live.version("spring_cup"))
    assert cache.add(f"{key}:building", True, live.BUILD_CLAIM)  # another LM process claims the build
    threading.Timer(0.2, cache.set, (key, b'{"built": "elsewhere"}', live.SNAPSHOT_TTL)).start()
    assert live.current_data("spring_cup") == {"built": "elsewhere"}
    assert builds(caplog) == 0


@pytest.mark.django_db(transaction=True)
def test_a_build_claimed_by_a_process_that_died_is_made_once_the_claim_runs_out(caplog, monkeypatch):
    caplog.set_level(logging.DEBUG, logger="league.api.live")
    monkeypatch.setattr(live, "BUILD_CLAIM", 0.2)
    make_league("spring_cup", players=4)
    key = live._key(live.version("spring_cup"))
    assert cache.add(f"{key}:building", True, 60)  # claimed, and never built
    assert live.current_data("spring_cup")["league"]["league_id"] == "spring_cup"
    assert builds(caplog) == 1
    assert cache.get(f"{key}:building") is None  # the build that landed lets go of the claim


@pytest.mark.django_db(transaction=True)
def test_a_wait_for_one_leagues_build_does_not_hold_up_another_leagues_readers(monkeypatch):
    make_league("spring_cup", players=4)
    make_league("autumn_cup", players=4)
    key = live._key(live.version("spring_cup"))
    assert cache.add(f"{key}:building", True, live.BUILD_CLAIM)  # another LM process builds it
    waiting = threading.Event()
    wait = live._built_elsewhere

    def noted_wait(at: str) -> bytes | None:
        waiting.set()
        return wait(at)

    monkeypatch.setattr(live, "_built_elsewhere", noted_wait)
    spring = ThreadPoolExecutor(max_workers=1)
    read = spring.submit(lambda: (live.current_data("spring_cup"), connection.close())[0])
    assert waiting.wait(5)
    # The other league is read and built while spring_cup's reader still waits for its build.
    assert live.current_data("autumn_cup")["league"]["league_id"] == "autumn_cup"
    assert not read.done()
    cache.set(key, b'{"built": "elsewhere"}', live.SNAPSHOT_TTL)
    assert read.result(5) == {"built": "elsewhere"}
    spring.shutdown()


@pytest.mark.django_db
def test_the_version_moves_with_what_the_page_shows():
    league = make_league("spring_cup", players=4)
    seen = {live.version("spring_cup")}
    start(Match.objects.get(league=league, match_id="R1M1"))
    seen.add(live.version("spring_cup"))
    play(Match.objects.get(league=league, match_id="R1M1"), "odd", "even", 3)
    seen.add(live.version("spring_cup"))
    Player.objects.filter(league=league, player_id="P02").update(status="SUSPENDED")
    seen.add(live.version("spring_cup"))
    league.status = "PAUSED"
    league.save()
    seen.add(live.version("spring_cup"))
    assert len(seen) == 5
    # Each count the version digests moves it: a round's status, a referee's, a player added or
    # removed, a match given a referee, a result gone.
    Round.objects.filter(league=league, number=1).update(status=Round.Status.PLAYED)
    seen.add(live.version("spring_cup"))
    Round.objects.filter(league=league, number=1).update(status=Round.Status.COMPLETED)
    seen.add(live.version("spring_cup"))
    Referee.objects.filter(league=league).update(status="SUSPENDED")
    seen.add(live.version("spring_cup"))
    Player.objects.create(league=league, player_id="P05", display_name="Late", endpoint="http://127.0.0.1:9/mcp")
    seen.add(live.version("spring_cup"))
    Player.objects.filter(league=league, player_id="P05").update(status="REMOVED")
    seen.add(live.version("spring_cup"))
    Match.objects.filter(league=league, match_id="R1M2").update(referee=Referee.objects.filter(league=league).first())
    seen.add(live.version("spring_cup"))
    MatchResult.objects.filter(league=league).delete()
    seen.add(live.version("spring_cup"))
    assert len(seen) == 12
    assert live.version("spring_cup") == live.version("spring_cup")
    assert live.version("nope") is None
    assert live.current("nope") is None


@pytest.mark.django_db
def test_a_cached_read_is_a_few_indexed_queries(client, django_assert_max_num_queries):
    make_league("spring_cup", players=8)
    client.get("/api/leagues/spring_cup/live/")
    with django_assert_max_num_queries(8):
        body = client.get("/api/leagues/spring_cup/live/").json()
    assert len(body["standings"]) == 8
    assert body == readmodel.snapshot("spring_cup")


@pytest.mark.django_db
def test_a_patch_takes_a_page_from_one_version_to_the_next():
    league = make_league("spring_cup", players=6)
    before = live.current_data("spring_cup")
    for match_id in ("R1M1", "R1M2"):
        play(Match.objects.get(league=league, match_id=match_id), "odd", "even", 3)
    start(Match.objects.get(league=league, match_id="R1M3"))
    after = live.current_data("spring_cup")
    patch = live.diff(before, after)
    assert live.apply(before, patch) == after
    # Rows are patched by id: the schedule's untouched rounds and the rule text do not travel.
    changed = patch["$d"]
    assert "tie_break_rule" not in changed
    assert set(changed["rounds"]["i"]) == {"1"}
    assert set(changed["rounds"]["i"]["1"]["$d"]["matches"]["i"]) == {"R1M1", "R1M2", "R1M3"}
    assert live.diff(after, after) is None


RENDERED = "rendered the page of"


def renders(caplog) -> int:
    return sum(RENDERED in r.getMessage() for r in caplog.records if r.name == "league.pages.views")


# Pairs of values that a patch must take from one to the other (also checked against the page's
# applyPatch in Chromium, tests/browser/test_live_push.py).
PATCH_CASES = [
    (
        {"rows": [{"player_id": "P1", "n": 1}, {"player_id": "P2", "n": 2}], "x": [1, 2]},
        {"rows": [{"player_id": "P3", "n": 0}, {"player_id": "P2", "n": 5}], "x": [2]},
    ),
    ({"a": 1}, {"b": 2}),
    ({"a": 1, "b": "x", "c": None, "d": {"e": 1}}, {"a": None, "b": "y", "c": [1], "d": {"e": 2}}),
    ({"a": {"b": 1}}, {"a": {"c": 1}}),
    ({"a": 1}, {"a": {"b": 1}}),
    ({"points": [0, 3, 4]}, {"points": [0, 3, 4, 4, 7]}),
    ({"form": ["W", "L", "D", "W", "W"]}, {"form": ["D", "W", "W", "L", "L"]}),
    (
        {"form": [{"match_id": "M1", "mark": "W"}, {"match_id": "M2", "mark": "L"}]},
        {"form": [{"match_id": "M2", "mark": "L"}, {"match_id": "M3", "mark": "D"}]},
    ),
    ({"zeros": [0, 0, 0]}, {"zeros": [0, 0, 0, 0]}),
    ({"points": [0, 3, 4]}, {"points": [0, 3, 7]}),
    ({"points": [0, 3, 4]}, {"points": [0, 3, 7, 7]}),
    ({"l": [1, 2, 3]}, {"l": [1]}),
    ({"l": [1, 2, 3]}, {"l": [3, 2, 1]}),
    ({"l": [1, 2]}, {"l": []}),
    ({"l": []}, {"l": [1]}),
    ([{"number": 1, "m": [1]}, {"number": 2, "m": []}], [{"number": 2, "m": []}, {"number": 1, "m": [1, 2]}]),
]


@pytest.mark.parametrize(("old", "new"), PATCH_CASES)
def test_a_patch_takes_a_value_to_the_other(old, new):
    assert live.apply(old, live.diff(old, new)) == new
    assert live.diff(new, new) is None


def test_a_patch_sends_changed_numbers_as_themselves_and_a_growing_list_as_its_tail():
    old = {
        "row": {"points": 3, "rank": 2, "name": "Alpha"},
        "chart": [0, 3],
        "form": ["W", "L", "D", "W", "W"],
        "series": [0, 3, 3, 6],
    }
    new = {
        "row": {"points": 4, "rank": 1, "name": "Alpha"},
        "chart": [0, 3, 4],
        "form": ["D", "W", "W", "L", "D"],
        "series": [0, 3, 3, 7],  # a round under way: its point changes, the earlier ones stay
    }
    assert live.diff(old, new) == {
        "$d": {
            "row": {"$d": {"points": 4, "rank": 1}},
            "chart": {"$a": [4], "x": 0},
            "form": {"$a": ["L", "D"], "x": 2},
            "series": {"$t": [7], "n": 3},
        }
    }


def counted_versions(monkeypatch) -> list[str]:
    """The leagues whose version is asked from now on, in order (``live.version`` counted)."""
    asked: list[str] = []
    version = live.version

    def counted(league_id: str) -> str | None:
        asked.append(league_id)
        return version(league_id)

    monkeypatch.setattr(live, "version", counted)
    return asked


@pytest.mark.django_db(transaction=True)  # the page is read on the pages' own threads (page_read)
def test_a_page_rendered_a_moment_ago_is_served_without_asking_the_version(client, settings, monkeypatch):
    """500 viewers opening the page within seconds are served the page kept for them without
    asking the version (its aggregate queries) while it is younger than LIVE_PAGE_FRESH."""
    settings.LIVE_PAGE_FRESH = 60.0
    make_league("spring_cup", players=8)
    asked = counted_versions(monkeypatch)
    first = client.get("/leagues/spring_cup/")
    assert first.status_code == 200 and asked  # rendered, at the version asked
    rendered = len(asked)
    for _ in range(3):
        assert client.get("/leagues/spring_cup/").content == first.content
    assert len(asked) == rendered
    assert client.get("/leagues/nope/").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_a_page_past_its_freshness_is_rendered_again_only_when_the_league_moved(caplog, client, settings):
    caplog.set_level(logging.DEBUG, logger="league.pages.views")
    league = make_league("spring_cup", players=6)
    settings.LIVE_PAGE_FRESH = 0.0  # every read checks the version
    first = client.get("/leagues/spring_cup/").content
    for _ in range(3):
        assert client.get("/leagues/spring_cup/").content == first
    assert renders(caplog) == 1
    play(Match.objects.get(league=league, match_id="R1M1"), "odd", "even", 3)
    assert client.get("/leagues/spring_cup/").content != first
    assert renders(caplog) == 2


@pytest.mark.django_db(transaction=True)
def test_viewers_are_served_the_page_there_is_while_one_brings_it_up_to_date(client, settings, monkeypatch):
    """A class arriving at a busy league: one request checks the version and renders; the others
    are not held behind it, nor do they each ask the version."""
    league = make_league("spring_cup", players=6)
    first = client.get("/leagues/spring_cup/").content
    play(Match.objects.get(league=league, match_id="R1M1"), "odd", "even", 3)
    settings.LIVE_PAGE_FRESH = 0.0
    checking, go_on = threading.Event(), threading.Event()
    version = live.version
    asked: list[str] = []

    def held_version(league_id: str) -> str | None:
        asked.append(league_id)
        checking.set()
        assert go_on.wait(30)
        return version(league_id)

    monkeypatch.setattr(live, "version", held_version)

    def bring_up_to_date() -> bytes:
        try:
            return Client().get("/leagues/spring_cup/").content
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        updating = pool.submit(bring_up_to_date)
        assert checking.wait(30)
        assert client.get("/leagues/spring_cup/").content == first  # not held, not asking the version
        assert asked == ["spring_cup"]
        go_on.set()
        assert updating.result(30) != first
    monkeypatch.setattr(live, "version", version)
    settings.LIVE_PAGE_FRESH = 60.0
    assert client.get("/leagues/spring_cup/").content != first


@pytest.mark.django_db
def test_a_big_leagues_page_lists_the_matches_of_the_rounds_in_play_only(client, settings):
    """Past LIVE_SCHEDULE_LISTED_MAX matches the snapshot lists the matches of the rounds in play,
    the last completed and the next; the others keep their counts, and the schedule API gives any
    round's matches (``?round=N``), as the page fetches them."""
    from league.models import Round

    league = make_league("spring_cup", players=6)  # 15 matches in 5 rounds
    for number in (1, 2):
        for match in Match.objects.filter(league=league, round__number=number):
            play(match, "odd", "even", 3)
    Round.objects.filter(league=league, number__in=(1, 2)).update(status=Round.Status.COMPLETED)
    Round.objects.filter(league=league, number=3).update(status=Round.Status.ANNOUNCED)

    full = readmodel.snapshot("spring_cup")["rounds"]
    assert [len(r["matches"]) for r in full] == [3, 3, 3, 3, 3]
    settings.LIVE_SCHEDULE_LISTED_MAX = 14
    shown = readmodel.snapshot("spring_cup")["rounds"]
    # Round 1: completed before the last; 2: the last completed; 3: in play; 4: next; 5: later.
    assert [None if r["matches"] is None else len(r["matches"]) for r in shown] == [None, 3, 3, 3, None]
    assert [(r["matches_total"], r["matches_finished"]) for r in shown] == [(3, 3), (3, 3), (3, 0), (3, 0), (3, 0)]
    assert shown[1:4] == full[1:4]

    (one,) = client.get("/api/leagues/spring_cup/schedule/?round=1").json()
    assert one == full[0]
    assert len(client.get("/api/leagues/spring_cup/schedule/").json()) == 5
    assert client.get("/api/leagues/spring_cup/schedule/?round=one").status_code == 400
    assert client.get("/api/leagues/spring_cup/schedule/?round=9").json() == []
    assert client.get("/api/leagues/spring_cup/schedule/?round=-6").json() == []
    assert client.get(f"/api/leagues/spring_cup/schedule/?round={2**70}").json() == []


@pytest.mark.django_db
def test_the_feed_lists_the_running_matches_then_the_latest_finished_newest_first():
    league = make_league("spring_cup", players=10)  # 45 matches
    matches = list(Match.objects.filter(league=league).order_by("-id"))
    finished = matches[:36]
    random.Random(7).shuffle(finished)  # played in an order neither the ids' nor the rounds'
    for match in finished:
        play(match, "odd", "even", 3)
    start(matches[40])
    feed = [row["match_id"] for row in readmodel.recent_matches(league)]
    assert feed == [matches[40].match_id] + [m.match_id for m in reversed(finished)][: readmodel.RECENT_MATCHES - 1]


@pytest.mark.django_db
def test_the_feed_has_each_matchs_summary_and_counts_its_log_without_reading_it():
    league = make_league("spring_cup", players=4)
    one, two, three = Match.objects.filter(league=league).order_by("id")[:3]
    for match in (one, two):
        play(match, "odd", "even", 3)
    MatchResult.objects.filter(match=one).update(log=[{"seq": i} for i in range(7)])
    MatchResult.objects.filter(match=two).update(log={"not": "a list"})  # a hand edit
    start(three)
    feed = {row["match_id"]: row for row in readmodel.recent_matches(league)}
    full = {m.match_id: readmodel.match_summary(m) for m in readmodel.matches_queryset(league)}
    assert feed == {match_id: full[match_id] for match_id in feed}
    assert [feed[m.match_id]["result"]["log_entries"] for m in (one, two)] == [7, 0]
    assert feed[three.match_id]["result"] is None
    read = readmodel.summaries_queryset(league).get(pk=one.pk)
    assert "log" in read.result.get_deferred_fields()


@pytest.mark.django_db
def test_the_results_read_for_the_tables_follow_the_results_recorded(settings):
    """``readmodel.played`` keeps what it read and reads only the results added since; a result
    removed, or edited by hand once STANDINGS_CACHE_TTL has passed, is read afresh."""
    from league.models import MatchResult

    def fresh(league) -> list[tuple[str, int, int]]:
        return list(league.results.order_by("id").values_list("match__match_id", "points_a", "points_b"))

    def played(league) -> list[tuple[str, int, int]]:
        return [(p.match_id, p.points_a, p.points_b) for p in readmodel.played(league)]

    league = make_league("spring_cup", players=6)
    matches = list(Match.objects.filter(league=league).order_by("id"))
    assert played(league) == []
    for match in matches[:3]:
        play(match, "odd", "even", 3)
        assert played(league) == fresh(league)
    assert [p[0] for p in played(league)] == [m.match_id for m in matches[:3]]
    MatchResult.objects.filter(match=matches[1]).delete()
    assert played(league) == fresh(league)
    assert len(fresh(league)) == 2

    # Two transactions that commit out of order: a result under a lower id than one already read.
    play(matches[3], "odd", "even", 3)
    play(matches[4], "odd", "even", 3)
    late = MatchResult.objects.filter(match=matches[3])
    row = late.values().get()
    late.delete()
    assert played(league) == fresh(league)
    MatchResult.objects.create(**row)
    play(matches[5], "odd", "even", 3)
    assert played(league) == fresh(league)
    assert len(fresh(league)) == 5

    settings.STANDINGS_CACHE_TTL = 0.0
    MatchResult.objects.filter(match=matches[0]).update(points_a=0, points_b=3)
    first = readmodel.played(league)[0]
    assert (first.points_a, first.points_b) == (0, 3)


@pytest.mark.django_db
def test_a_snapshot_reads_the_leagues_players_once_for_the_table_the_ratings_and_the_chart():
    league = make_league("spring_cup", players=6)
    play(Match.objects.get(league=league, match_id="R1M1"), "odd", "even", 3)
    with CaptureQueriesContext(connection) as queries:
        data = readmodel.snapshot("spring_cup")
    assert len(data["standings"]) == len(data["chart"]["series"]) == 6
    assert data["standings"][0]["arena_rating"] is None  # never rated in an arena
    reads = [q["sql"] for q in queries.captured_queries if q["sql"].startswith('SELECT "league_player"."id"')]
    assert len(reads) == 1, reads


@pytest.mark.django_db
def test_a_snapshot_reads_its_players_in_one_query_whatever_their_number():
    """The page reads a few columns of each player (``readmodel.PAGE_PLAYER_FIELDS``); one it did
    not read would cost a query per player."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from league.models import Rating

    counts = []
    for league_id, players in (("small_cup", 4), ("big_cup", 12)):
        league = make_league(league_id, players=players)
        play(Match.objects.get(league=league, match_id="R1M1"), "odd", "even", 3)
        first = league.players.order_by("id").first()
        seat = f"seat:{first.canonical_endpoint}"  # the leagues' first players share their seat
        Rating.objects.get_or_create(identity=seat, game_type=league.game_type, mu=30, sigma=5, ordinal=15)
        with CaptureQueriesContext(connection) as queries:
            data = readmodel.snapshot(league_id)
        counts.append(len(queries))
        assert len(data["standings"]) == players and len(data["chart"]["series"]) == players
        assert any(row["arena_rating"] is not None for row in data["standings"])
    assert counts[0] == counts[1]


@pytest.mark.django_db(transaction=True)
async def test_league_pages_are_read_on_threads_that_keep_their_connections(settings):
    """Under ASGI a Django view runs on a thread of its own per request, which opens a database
    connection each time; the league page is read on the pages' own threads (not /mcp's database
    thread), whose connections last from one viewer to the next."""
    from asgiref.sync import sync_to_async
    from django.core.asgi import get_asgi_application
    from django.db.backends.signals import connection_created

    from league.mcp.database import PAGE_READERS

    settings.LIVE_PAGE_FRESH = 0.0  # each request asks the version too
    await sync_to_async(make_league)("spring_cup", players=4)
    opened: list[str] = []

    def note(sender, connection, **kwargs) -> None:
        opened.append(threading.current_thread().name)

    connection_created.connect(note)
    try:
        # Django's own ASGI handler (the test client's skips its thread per request).
        transport = httpx.ASGITransport(app=get_asgi_application())
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            for _ in range(6):
                assert (await client.get("/leagues/spring_cup/")).status_code == 200
    finally:
        connection_created.disconnect(note)
    assert len(opened) <= PAGE_READERS and all(name.startswith("page-reads") for name in opened), opened
