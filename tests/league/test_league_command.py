"""``manage.py league``: create, open, close, start, pause, resume, cancel, key, status, match, delete."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

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
def test_it_creates_a_swiss_league_with_its_rounds_and_a_knockout():
    run("create", "--name", "Swiss", "--league-id", "swiss", "--schedule", "swiss", "--rounds", "5")
    run("create", "--name", "Cup", "--league-id", "cup", "--schedule", "knockout")
    assert League.objects.get(league_id="swiss").swiss_rounds == 5
    assert League.objects.get(league_id="cup").schedule_format == "knockout"


@pytest.mark.django_db
def test_it_refuses_a_swiss_league_without_rounds_or_with_too_many():
    with pytest.raises(CommandError, match="number of rounds"):
        run("create", "--name", "Swiss", "--league-id", "swiss", "--schedule", "swiss")
    with pytest.raises(CommandError, match="at most 7 rounds"):
        run(
            "create",
            "--name",
            "Swiss",
            "--league-id",
            "swiss",
            "--schedule",
            "swiss",
            "--rounds",
            "8",
            "--max-players",
            "8",
        )
    assert not League.objects.filter(league_id="swiss").exists()


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
    League.objects.filter(pk=league.pk).update(status=League.Status.RUNNING)
    assert run("match", "cup", "--players", "P01", "P02", "--referee", "REF01") == "match R1M1 ASSIGNED\n"
    match = Match.objects.get(match_id="R1M1")
    assert match.referee.referee_id == "REF01" and match.deadline_at is not None
    assert run("match", "cup", "--players", "P02", "P01") == "match R1M2 SCHEDULED\n"
    with pytest.raises(CommandError, match="no player P09"):
        run("match", "cup", "--players", "P01", "P09")


@pytest.mark.django_db
@pytest.mark.parametrize("status", ["REGISTERING", "READY", "PAUSED", "COMPLETED", "CANCELLED"])
def test_it_adds_no_match_to_a_league_that_is_not_running(status):
    run("create", "--name", "Cup", "--league-id", "cup", "--open")
    league = League.objects.get(league_id="cup")
    _player(league, "P01", "alpha")
    _player(league, "P02", "beta")
    League.objects.filter(pk=league.pk).update(status=status)
    with pytest.raises(CommandError, match=f"league cup is {status}: matches are added to a running league only"):
        run("match", "cup", "--players", "P01", "P02")
    assert not Match.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("league_id", ["bad id!", "ünï", "a/b", "x" * 65, ""])
def test_it_refuses_a_league_id_that_breaks_the_rule_with_the_one_message(league_id):
    with pytest.raises(CommandError, match=r"is not valid: use 1-64 letters \(a-z, A-Z\), digits, underscores"):
        run("create", "--name", "Cup", "--league-id", league_id)
    assert not League.objects.exists()


@pytest.mark.django_db
def test_it_says_when_the_name_gives_no_id():
    with pytest.raises(CommandError, match=r"made from --name: give --league-id"):
        run("create", "--name", "日本")


@pytest.mark.django_db
def test_status_warns_when_a_league_in_play_has_no_live_referee():
    league = League.objects.create(name="Cup", league_id="cup", status=League.Status.RUNNING)
    out = run("status", "cup")
    assert "WARNING: No live referee: none has registered with it" in out
    assert "runreferee --league-id cup" in out
    referee = Referee.objects.create(
        league=league, referee_id="REF01", display_name="r", endpoint="http://127.0.0.1:9001/mcp", status="SUSPENDED"
    )
    assert "its 1 referee is suspended or gone" in run("status", "cup")
    Referee.objects.filter(pk=referee.pk).update(status="REGISTERED")
    assert "WARNING" not in run("status", "cup")
    League.objects.filter(pk=league.pk).update(embedded_referee=True)
    Referee.objects.filter(pk=referee.pk).delete()
    assert "WARNING" not in run("status", "cup")  # the LM's built-in referee plays


@pytest.mark.django_db
def test_status_says_a_closed_window_is_closed():
    run("create", "--name", "Cup", "--league-id", "cup", "--open", "--registration-seconds", "60")
    League.objects.filter(league_id="cup").update(registration_closes_at=timezone.now() - timedelta(minutes=1))
    assert "registration closed (closed " in run("status", "cup")


@pytest.mark.django_db
def test_it_deletes_a_league_with_all_its_records_and_logs_it():
    from tests.browser.league_data import make_league, play_round

    league = make_league("old_cup", players=4, status=League.Status.COMPLETED)
    play_round(league, 1)
    Event.objects.create(league=league, direction="STATE", kind="x")
    keep = make_league("new_cup", players=2)
    out = run("delete", "old_cup")
    assert "would delete old_cup (COMPLETED) with 4 players, 1 referees, 3 rounds, 6 matches, 2 results" in out
    assert League.objects.filter(league_id="old_cup").exists()
    assert "deleted old_cup" in run("delete", "old_cup", "--yes")
    assert list(League.objects.values_list("league_id", flat=True)) == ["new_cup"]
    assert not Player.objects.exclude(league=keep).exists() and not Match.objects.exclude(league=keep).exists()
    gone = Event.objects.get(kind="league_deleted")
    assert gone.league is None and gone.payload["league_id"] == "old_cup" and gone.payload["matches"] == 6
    assert not Event.objects.filter(kind="x").exists()


@pytest.mark.django_db
def test_it_refuses_to_delete_a_league_in_play():
    League.objects.create(name="Cup", league_id="cup", status=League.Status.RUNNING)
    with pytest.raises(CommandError, match="cancel it first"):
        run("delete", "cup", "--yes")


@pytest.mark.django_db
def test_it_pauses_resumes_and_cancels_a_league_only_when_told_yes():
    league = League.objects.create(name="Cup", league_id="cup", status=League.Status.RUNNING)
    assert "cup is PAUSED" in run("pause", "cup")
    with pytest.raises(CommandError, match="only a ready or running league can pause"):
        run("pause", "cup")
    assert "cup is RUNNING again" in run("resume", "cup")
    assert "would cancel cup (RUNNING) for good" in run("cancel", "cup")
    league.refresh_from_db()
    assert league.status == League.Status.RUNNING
    assert "cup is CANCELLED" in run("cancel", "cup", "--yes")
    kinds = list(Event.objects.filter(league=league).values_list("kind", flat=True))
    assert kinds == ["league_paused", "league_resumed", "league_cancelled"]


@pytest.mark.django_db
def test_start_warns_when_no_referee_can_play_and_key_prints_the_command(settings):
    from league.actions import check_referee_key

    settings.REFEREE_KEY = ""
    league = League.objects.create(name="Cup", league_id="cup", status=League.Status.REGISTERING, min_players=1)
    _player(league, "P01", "a")
    out = run("start", "cup")
    assert "WARNING: No live referee: none has registered with it" in out
    assert "manage.py league key cup" in out  # no key anywhere: generating one comes first
    out = run("key", "cup")
    key = out.splitlines()[1]
    league.refresh_from_db()
    check_referee_key(league, key)
    assert f"REFEREE_KEY={key} python manage.py runreferee --port 8001 --league-id cup" in out
    assert "Generate the league's referee key first" not in run("status", "cup")
