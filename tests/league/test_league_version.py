"""``League.version``: every write the standings depend on moves it on (``LeagueQuerySet.changed``),
so that a cached table is read again exactly when something it shows changed."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib import admin

from league import actions, standings
from league.admin import LeagueAdmin, MatchResultAdmin, PlayerAdmin
from league.conductor import reachability, transitions
from league.models import AgentStatus, League, MatchResult, Player, Referee, Round
from tests.league.lm_support import assigned_match, log_for, make_league, player_meta, referee_meta, site_referee_key

pytestmark = pytest.mark.django_db

FIRST = "http://127.0.0.1:30201/mcp"


def _player(league: League, player_id: str = "P01") -> Player:
    return Player.objects.select_related("league").get(league=league, player_id=player_id)


def _record_a_result(league: League) -> None:
    referee = Referee.objects.select_related("league").get(league=league)
    won = {
        "status": "WIN",
        "winner": "P01",
        "score": {"P01": 3, "P02": 0},
        "technical_loss": [],
        "details": {"drawn_number": 8, "number_parity": "even", "choices": {"P01": "even", "P02": "odd"}},
    }
    assert actions.record_result(referee, "R1M1", won, log_for("P01", "P02", won)).status == "RECORDED"


def _a_result(league: League) -> None:
    assigned_match(league)
    _record_a_result(league)


def _result_turned_round_in_the_admin(league: League) -> None:
    result = MatchResult.objects.get(league=league)
    result.outcome, result.points_a, result.points_b, result.winner = MatchResult.Outcome.DRAW, 1, 1, None
    MatchResultAdmin(MatchResult, admin.site).save_model(None, result, None, True)  # type: ignore[arg-type]


def _result_deleted_in_the_admin(league: League) -> None:
    MatchResultAdmin(MatchResult, admin.site).delete_queryset(None, MatchResult.objects.filter(league=league))  # type: ignore[arg-type]


def _renamed_in_the_admin(league: League) -> None:
    player = _player(league)
    player.display_name = "Renamed in the admin"
    PlayerAdmin(Player, admin.site).save_model(None, player, None, True)  # type: ignore[arg-type]


def _league_edited_in_the_admin(league: League) -> None:
    league = League.objects.get(pk=league.pk)
    league.name = "Renamed league"
    LeagueAdmin(League, admin.site).save_model(None, league, None, True)  # type: ignore[arg-type]


def _ready(league: League) -> None:
    League.objects.filter(pk=league.pk).update(status=League.Status.READY)


def _played_swiss_round(league: League) -> None:
    League.objects.filter(pk=league.pk).update(
        status=League.Status.RUNNING, schedule_format=League.ScheduleFormat.SWISS
    )
    Round.objects.create(league=league, number=1, status=Round.Status.PLAYED)


def _nothing(league: League) -> None:
    return None


# name: (what comes first, the write). Each write changes what the standings (or their
# format) read; the ones a reader can see change the table, which must show at once.
WRITES: dict[str, tuple[Callable[[League], None], Callable[[League], object]]] = {
    "result recorded": (lambda league: assigned_match(league), _record_a_result),
    "result edited in the admin": (_a_result, _result_turned_round_in_the_admin),
    "result deleted in the admin": (_a_result, _result_deleted_in_the_admin),
    "player registered": (_nothing, lambda league: actions.register_player(league.league_id, player_meta(), None)),
    "player registered again under a new name": (
        _nothing,
        lambda league: actions.register_player(
            league.league_id, player_meta(FIRST, display_name="Back again"), None, client_host="127.0.0.1"
        ),
    ),
    "player removed": (_nothing, lambda league: actions.set_agent_status(_player(league), AgentStatus.REMOVED)),
    "player suspended": (_nothing, lambda league: actions.set_agent_status(_player(league), AgentStatus.SUSPENDED)),
    "token revoked": (_nothing, lambda league: actions.revoke_agent(_player(league))),
    "player reinstated": (
        lambda league: actions.set_agent_status(_player(league), AgentStatus.SUSPENDED),
        lambda league: actions.reinstate_agent(_player(league)),
    ),
    "player edited in the admin": (_nothing, _renamed_in_the_admin),
    "league edited in the admin": (_nothing, _league_edited_in_the_admin),
    "silent players withdrawn": (_ready, lambda league: reachability.withdraw_silent_players(league.pk)),
    "Swiss round completed": (
        _played_swiss_round,
        lambda league: transitions.mark_round_completed(league.rounds.get().pk),
    ),
}


@pytest.mark.parametrize("write", sorted(WRITES))
def test_every_write_moves_the_version_on_and_the_next_read_is_fresh(settings, write):
    settings.STANDINGS_CACHE_TTL = 3600  # only the version can tell the cache that something changed
    league = make_league("versioned", max_players=10)
    actions.register_player(league.league_id, player_meta(FIRST, display_name="First"), None)
    actions.register_player(league.league_id, player_meta(display_name="Second"), None)
    actions.register_referee(league.league_id, referee_meta(), None, referee_key=site_referee_key())
    prepare, act = WRITES[write]
    prepare(league)
    before = League.objects.get(pk=league.pk).version
    standings.standings(league)  # cached at this version

    act(league)

    assert League.objects.get(pk=league.pk).version > before
    assert standings.standings(league) == standings.compute(league)
