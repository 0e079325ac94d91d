"""``manage.py league``: create, open, close, start, status, match."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from league.models import Event, League, Match, Player, Referee


def run(*args: str) -> str:
    out = StringIO()
    call_command("league", *args, stdout=out)
    return out.getvalue()


def _player(league: League, player_id: str, name: str) -> Player:
    return Player.objects.create(
        league=league, player_id=player_id, display_name=name, endpoint=f"http://127.0.0.1:9{player_id[1:]}/mcp"
    )


@pytest.mark.django_db
def test_it_creates_a_league_with_its_settings_and_opens_it():
    out = run(
        "create", "--name", "Spring Cup", "--league-id", "spring", "--game", "even_odd_bo5", "--registration-seconds",
        "90", "--open", "--min-players", "4", "--max-players", "8", "--move-timeout", "0.5", "--retry-delay", "0.05",
        "--schedule", "double",
    )  # fmt: skip
    assert "created league spring" in out and "registration open" in out
    league = League.objects.get(league_id="spring")
    assert (league.game_type, league.min_players, league.max_players) == ("even_odd_bo5", 4, 8)
    assert (league.move_timeout, league.retry_delay, league.schedule_format) == (0.5, 0.05, "double")
    assert league.status == "REGISTERING" and league.registration_open()
    closes = (league.registration_closes_at - league.registration_opens_at).total_seconds()
    assert closes == pytest.approx(90)
    assert run("create", "--name", "Autumn Cup").startswith("created league autumn_cup")
    assert League.objects.get(league_id="autumn_cup").status == "INITIALIZING"
    with pytest.raises(CommandError, match="already exists"):
        run("create", "--name", "again", "--league-id", "spring")


@pytest.mark.django_db
def test_it_opens_closes_and_starts_a_league():
    run("create", "--name", "Cup", "--league-id", "cup", "--min-players", "2")
    run("open", "cup", "--registration-seconds", "60")
    league = League.objects.get(league_id="cup")
    assert league.registration_open()
    run("close", "cup")
    league.refresh_from_db()
    assert not league.registration_open() and league.status == "REGISTERING"
    with pytest.raises(CommandError, match="at least 2 are needed"):
        run("start", "cup")
    _player(league, "P01", "alpha")
    _player(league, "P02", "beta")
    assert "READY" in run("start", "cup")
    league.refresh_from_db()
    assert league.status == "READY"
    with pytest.raises(CommandError, match="only a registering league can start"):
        run("start", "cup")
    kinds = list(Event.objects.filter(league=league, direction="STATE").values_list("kind", flat=True))
    assert kinds == ["league_created", "registration_opened", "registration_closed", "league_ready"]
    with pytest.raises(CommandError, match="no league 'nope'"):
        run("status", "nope")


@pytest.mark.django_db
def test_it_prints_players_referees_and_standings():
    run("create", "--name", "Cup", "--league-id", "cup", "--open")
    league = League.objects.get(league_id="cup")
    _player(league, "P01", "alpha")
    _player(league, "P02", "beta")
    Referee.objects.create(league=league, referee_id="REF01", display_name="ref", endpoint="http://127.0.0.1:8001/mcp")
    out = run("status", "cup")
    assert "REGISTERING, registration open" in out
    assert "Players (2)" in out and "alpha" in out and "Referees (1)" in out and "REF01" in out
    standings = out.split("Standings", 1)[1].splitlines()
    assert standings[1].split() == ["rank", "player", "name", "played", "W", "D", "L", "tech", "points"]
    assert standings[3].split() == ["1", "P01", "alpha", "0", "0", "0", "0", "0", "0"]


@pytest.mark.django_db
def test_it_creates_a_match_assigned_to_a_referee():
    run("create", "--name", "Cup", "--league-id", "cup", "--open")
    league = League.objects.get(league_id="cup")
    _player(league, "P01", "alpha")
    _player(league, "P02", "beta")
    Referee.objects.create(league=league, referee_id="REF01", display_name="ref", endpoint="http://127.0.0.1:8001/mcp")
    assert run("match", "cup", "--players", "P01", "P02", "--referee", "REF01") == "match R1M1 ASSIGNED\n"
    match = Match.objects.get(match_id="R1M1")
    assert match.referee.referee_id == "REF01" and match.deadline_at is not None
    assert run("match", "cup", "--players", "P02", "P01") == "match R1M2 SCHEDULED\n"
    with pytest.raises(CommandError, match="no player P09"):
        run("match", "cup", "--players", "P01", "P09")
