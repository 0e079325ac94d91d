"""The public pages: thin views over :mod:`league.api.readmodel` (the same data the API serves)."""

from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from league.api import readmodel
from league.api.views import leagues_with_counts
from league.models import League, MatchResult, Player, Referee


def league_list(request: HttpRequest) -> HttpResponse:
    leagues = list(leagues_with_counts())
    for league in leagues:
        league.percent = round(100 * league.matches_finished / league.matches_total) if league.matches_total else 0
    return render(request, "league/league_list.html", {"leagues": leagues})


def league_detail(request: HttpRequest, league_id: str) -> HttpResponse:
    snapshot = readmodel.snapshot(league_id)
    if snapshot is None:
        get_object_or_404(League, league_id=league_id)
    return render(request, "league/league_detail.html", {"s": snapshot, "league_id": league_id})


def match_detail(request: HttpRequest, league_id: str, match_id: str) -> HttpResponse:
    league = get_object_or_404(League, league_id=league_id)
    match = get_object_or_404(readmodel.matches_queryset(league), match_id=match_id)
    try:
        log = match.result.log or []
    except MatchResult.DoesNotExist:
        log = []
    return render(
        request,
        "league/match_detail.html",
        {"league": league, "m": readmodel.match_summary(match), "log": _log_rows(log)},
    )


def _log_rows(log: list) -> list[dict]:
    """Log entries with a few display helpers; entries are whatever the referee reported."""
    rows = []
    for entry in log:
        if not isinstance(entry, dict):
            continue
        message = entry.get("message")
        rows.append(
            {
                **entry,
                "failed": entry.get("outcome") not in (None, "ok"),
                "retry": (entry.get("attempt") or 1) > 1,
                "message_json": json.dumps(message, indent=2, ensure_ascii=False, default=str),
            }
        )
    return rows


def player_detail(request: HttpRequest, league_id: str, player_id: str) -> HttpResponse:
    player = get_object_or_404(
        Player.objects.select_related("league"), league__league_id=league_id, player_id=player_id
    )
    return render(
        request, "league/player_detail.html", {"league": player.league, "p": readmodel.player_profile(player)}
    )


def referee_detail(request: HttpRequest, league_id: str, referee_id: str) -> HttpResponse:
    referee = get_object_or_404(
        Referee.objects.select_related("league"), league__league_id=league_id, referee_id=referee_id
    )
    return render(
        request, "league/referee_detail.html", {"league": referee.league, "r": readmodel.referee_profile(referee)}
    )
