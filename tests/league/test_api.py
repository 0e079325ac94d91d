"""The public REST API: every endpoint, filters, pagination, no secrets, a valid OpenAPI schema."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from league.models import Match
from tests.browser.league_data import make_league, play, play_round

pytestmark = pytest.mark.django_db


@pytest.fixture
def api() -> APIClient:
    return APIClient()


@pytest.fixture
def league():
    league = make_league("spring_cup", players=4)
    play_round(league, 1)  # P01-P02, P03-P04: even wins, drawn 4 → A sides win
    return league


def test_it_lists_leagues_with_counts_and_pagination(api, league):
    make_league("autumn_cup", players=2, status="REGISTERING", scheduled=False)
    body = api.get("/api/leagues/?limit=1").json()
    assert body["count"] == 2
    assert len(body["results"]) == 1
    assert body["next"]
    rows = {r["league_id"]: r for r in api.get("/api/leagues/").json()["results"]}
    assert rows["spring_cup"]["players"] == 4
    assert rows["spring_cup"]["matches_total"] == 6
    assert rows["spring_cup"]["matches_finished"] == 2
    assert rows["autumn_cup"]["registration_open"] is True
    only = api.get("/api/leagues/?status=registering").json()["results"]
    assert [r["league_id"] for r in only] == ["autumn_cup"]


def test_a_limit_or_offset_past_what_a_database_counts_is_a_page_not_an_error(api, league):
    huge = "146458347417462551893336326140275458048"  # past 64 bits: the database cannot take it
    body = api.get(f"/api/leagues/?limit={huge}").json()
    assert [r["league_id"] for r in body["results"]] == ["spring_cup"]  # as many as max_limit
    reply = api.get(f"/api/leagues/?offset={huge}")
    assert reply.status_code == 200 and reply.json()["results"] == []


def test_it_shows_one_league(api, league):
    body = api.get("/api/leagues/spring_cup/").json()
    assert body["name"] == "Spring Cup"
    assert body["status"] == "RUNNING"
    assert api.get("/api/leagues/nope/").status_code == 404


def test_it_ranks_the_standings(api, league):
    rows = api.get("/api/leagues/spring_cup/standings/").json()
    assert [(r["player_id"], r["points"], r["rank"]) for r in rows] == [
        ("P01", 3, 1),
        ("P03", 3, 2),
        ("P02", 0, 3),
        ("P04", 0, 4),
    ]
    assert rows[0]["display_name"] == "Alpha"


def test_it_returns_the_schedule_with_completion(api, league):
    rounds = api.get("/api/leagues/spring_cup/schedule/").json()
    assert [r["number"] for r in rounds] == [1, 2, 3]
    assert rounds[0]["status"] == "COMPLETED"
    assert (rounds[0]["matches_finished"], rounds[0]["matches_total"]) == (2, 2)
    assert [(m["match_id"], m["player_a"], m["player_b"]) for m in rounds[1]["matches"]] == [
        ("R2M1", "P03", "P01"),
        ("R2M2", "P04", "P02"),
    ]


def test_it_filters_matches_by_round_player_and_status(api, league):
    base = "/api/leagues/spring_cup/matches/"
    assert api.get(base).json()["count"] == 6
    assert [m["match_id"] for m in api.get(base + "?round=2").json()["results"]] == ["R2M1", "R2M2"]
    assert [m["match_id"] for m in api.get(base + "?player=P01").json()["results"]] == ["R1M1", "R2M1", "R3M1"]
    finished = api.get(base + "?status=finished").json()["results"]
    assert [m["match_id"] for m in finished] == ["R1M1", "R1M2"]
    assert finished[0]["result"]["winner"] == "P01"
    assert finished[0]["result"]["choices"] == {"P01": "even", "P02": "odd"}
    assert finished[0]["result"]["drawn_number"] == 4
    assert api.get(base + "?round=x").status_code == 400


def test_it_shows_a_match_and_its_log(api, league):
    match = Match.objects.get(match_id="R2M1")
    play(match, "odd", "odd", 3, technical="B")
    body = api.get("/api/leagues/spring_cup/matches/R2M1/").json()
    assert body["result"]["status"] == "TECHNICAL_LOSS"
    assert body["result"]["technical_loss"] == ["P01"]
    assert body["result"]["winner"] == "P03"
    with CaptureQueriesContext(connection) as queries:
        log = api.get("/api/leagues/spring_cup/matches/R2M1/log/").json()
    # The league, then the match with its result and log in one query.
    assert len(queries) == 2, [q["sql"] for q in queries]
    assert log["referee_id"] == "REF01"
    assert [e["outcome"] for e in log["entries"]].count("timeout") == 2
    assert [e["seq"] for e in log["entries"]] == sorted(e["seq"] for e in log["entries"])
    unplayed = api.get("/api/leagues/spring_cup/matches/R3M1/log/").json()
    assert unplayed["entries"] == []
    assert api.get("/api/leagues/spring_cup/matches/R9M9/").status_code == 404


def test_it_lists_players_and_shows_a_profile(api, league):
    body = api.get("/api/leagues/spring_cup/players/").json()
    assert [p["player_id"] for p in body["results"]] == ["P01", "P02", "P03", "P04"]
    profile = api.get("/api/leagues/spring_cup/players/P01/").json()
    assert profile["standing"]["points"] == 3
    assert profile["parity"] == {"even": 1, "odd": 0, "even_percent": 100}
    assert profile["opponents"][0]["player_id"] == "P02"
    assert profile["opponents"][0]["wins"] == 1
    assert len(profile["matches"]) == 3


def test_it_lists_referees_with_load(api, league):
    body = api.get("/api/leagues/spring_cup/referees/").json()
    assert body["results"][0]["referee_id"] == "REF01"
    assert body["results"][0]["matches_reported"] == 2
    detail = api.get("/api/leagues/spring_cup/referees/REF01/").json()
    assert detail["matches_reported"] == 2
    assert detail["running"] == 0


def test_it_serves_the_live_snapshot(api, league):
    body = api.get("/api/leagues/spring_cup/live/").json()
    assert body["progress"]["matches_finished"] == 2
    assert body["chart"]["rounds"] == ["R1"]
    assert {s["player_id"]: s["points"] for s in body["chart"]["series"]} == {
        "P01": [3],
        "P02": [0],
        "P03": [3],
        "P04": [0],
    }
    assert body["note"] == "Round 2 of 3 in play."


def test_it_never_exposes_tokens(api, league):
    urls = [
        "/api/leagues/",
        "/api/leagues/spring_cup/live/",
        "/api/leagues/spring_cup/players/",
        "/api/leagues/spring_cup/players/P01/",
        "/api/leagues/spring_cup/referees/",
        "/api/leagues/spring_cup/referees/REF01/",
        "/api/leagues/spring_cup/matches/",
    ]
    hashes = [p.token_hash for p in league.players.all()] + [r.token_hash for r in league.referees.all()]
    for url in urls:
        text = api.get(url).content.decode()
        assert "token" not in text, url
        assert not any(h in text for h in hashes), url


def test_it_is_read_only(api, league):
    assert api.post("/api/leagues/", {"league_id": "x", "name": "x"}).status_code == 405
    assert api.delete("/api/leagues/spring_cup/").status_code == 405


def test_it_publishes_a_valid_schema_and_swagger_ui(api, tmp_path):
    out = tmp_path / "schema.json"
    call_command("spectacular", "--validate", "--fail-on-warn", "--format", "openapi-json", "--file", str(out))
    paths = json.loads(out.read_text())["paths"]
    assert "/api/leagues/{league_id}/matches/{match_id}/log/" in paths
    assert api.get("/api/schema/").status_code == 200
    docs = api.get("/api/docs/")
    assert docs.status_code == 200
    assert b"swagger-ui" in docs.content
    assert b"cdn.jsdelivr" not in docs.content  # assets are served locally (sidecar)


def test_the_api_root_links_leagues_to_the_api_not_the_home_page(api, league):
    root = api.get("/api/").json()
    assert root["leagues"].endswith("/api/leagues/")


def test_it_serves_standings_and_results_as_csv(api, league):
    import csv
    import io

    response = api.get("/api/leagues/spring_cup/standings.csv")
    assert response["Content-Type"].startswith("text/csv")
    assert 'filename="spring_cup-standings.csv"' in response["Content-Disposition"]
    assert api.get("/api/leagues/spring_cup/standings/?format=csv").content == response.content
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [(r["rank"], r["player_id"], r["points"], r["decided_by"]) for r in rows] == [
        ("1", "P01", "3", ""),
        ("2", "P03", "3", "player_id"),
        ("3", "P02", "0", "points"),
        ("4", "P04", "0", "player_id"),
    ]
    assert api.get("/api/leagues/spring_cup/results/").json()[0]["score"] == "3–0"
    results = list(csv.DictReader(io.StringIO(api.get("/api/leagues/spring_cup/results.csv").content.decode())))
    assert [(r["match_id"], r["winner_id"], r["score"], r["choice_a"], r["drawn_number"]) for r in results] == [
        ("R1M1", "P01", "3–0", "even", "4"),
        ("R1M2", "P03", "3–0", "even", "4"),
    ]


def test_a_csv_cell_never_starts_a_spreadsheet_formula(api, league):
    league.players.filter(player_id="P01").update(display_name="=HYPERLINK(1)")
    text = api.get("/api/leagues/spring_cup/standings.csv").content.decode()
    assert "'=HYPERLINK(1)" in text


def test_it_says_why_a_league_id_is_not_found(api, league):
    assert "is not valid: use 1-64 letters" in api.get("/api/leagues/bad%20id!/").json()["detail"]
    assert api.get("/api/leagues/nope/").json()["detail"] == "no league 'nope'"
