"""The admin's run-the-league workflow beyond open/close/start: pause, resume, cancel, reinstate,
and deleting a league with all its records.

Each state change is a named function in one transaction that leaves an Event and broadcasts
``league_status`` after commit, like those in league/actions/. ``install()`` adds the matching
admin actions to league/admin.py's LeagueAdmin / PlayerAdmin / RefereeAdmin through the hook
that module documents (``LeagueAdmin.actions += [...]``).
"""

from __future__ import annotations

import logging

from django.contrib import admin
from django.db import models, transaction

from league.consumers import announce_leagues
from league.events import broadcast, record_event
from league.models import AgentStatus, Event, League, Match, Player, Referee

log = logging.getLogger(__name__)

PAUSABLE = (League.Status.READY, League.Status.RUNNING)
FINAL = (League.Status.COMPLETED, League.Status.CANCELLED)
# A league the conductor may be working on is cancelled first: deleting rows under it would
# leave referees and players in matches that no longer exist.
IN_PLAY = (League.Status.READY, League.Status.RUNNING, League.Status.PAUSED)


def _transition(league: League, status: str, kind: str, **payload) -> League:
    league.status = status
    league.save(update_fields=["status"])
    record_event(league, "STATE", kind, payload={"status": status, **payload})
    broadcast(league.league_id, "league_status", {"league_id": league.league_id, "status": status, **payload})
    return league


def pause_league(league: League) -> League:
    """Hold a READY or RUNNING league: the conductor dispatches nothing new while PAUSED
    (matches already with a referee finish and are recorded)."""
    with transaction.atomic():
        league = League.objects.select_for_update().get(pk=league.pk)
        if league.status not in PAUSABLE:
            raise ValueError(f"league {league.league_id} is {league.status}: only a ready or running league can pause")
        return _transition(league, League.Status.PAUSED, "league_paused", previous=league.status)


def resume_league(league: League) -> League:
    """Back to the status the league had when it was paused."""
    with transaction.atomic():
        league = League.objects.select_for_update().get(pk=league.pk)
        if league.status != League.Status.PAUSED:
            raise ValueError(f"league {league.league_id} is {league.status}, not paused")
        paused = league.events.filter(kind="league_paused").order_by("-id").first()
        previous = (paused.payload.get("previous") if paused else None) or League.Status.RUNNING
        return _transition(league, previous, "league_resumed")


def cancel_league(league: League) -> League:
    """Stop a league for good; matches not yet handed to a referee are cancelled."""
    with transaction.atomic():
        league = League.objects.select_for_update().get(pk=league.pk)
        if league.status in FINAL:
            raise ValueError(f"league {league.league_id} is already {league.status}")
        cancelled = Match.objects.filter(league=league, status=Match.Status.SCHEDULED).update(
            status=Match.Status.CANCELLED
        )
        return _transition(league, League.Status.CANCELLED, "league_cancelled", matches_cancelled=cancelled)


def league_records(league: League) -> dict[str, int]:
    """How many rows of each kind a league owns (what deleting it removes)."""
    return {
        "players": league.players.count(),
        "referees": league.referees.count(),
        "rounds": league.rounds.count(),
        "matches": league.matches.count(),
        "results": league.results.count(),
        "events": Event.objects.filter(league=league).count(),
    }


def delete_league(league: League, by: str = "") -> dict[str, int]:
    """Delete a league and every record of it (agents, rounds, matches, results, events).

    The Event log is append-only, and this is the one path allowed to remove a league's events:
    it leaves in their place one ``league_deleted`` Event (with no league) that says which league
    went, who deleted it and how many rows of each kind. A league in play is refused: cancel it
    first. Returns those counts."""
    with transaction.atomic():
        league = League.objects.select_for_update().get(pk=league.pk)
        if league.status in IN_PLAY:
            raise ValueError(f"league {league.league_id} is {league.status}: cancel it first, then delete it")
        counts = league_records(league)
        league_id, name, status = league.league_id, league.name, league.status
        # QuerySet.delete itself: EventQuerySet refuses deletes everywhere else.
        models.QuerySet.delete(Event.objects.filter(league=league))
        league.delete()
        record_event(
            None,
            "STATE",
            "league_deleted",
            agent=by,
            payload={"league_id": league_id, "name": name, "status": status, "by": by, **counts},
        )
        broadcast(league_id, "league_deleted", {"league_id": league_id})
        announce_leagues("league_deleted", league_id)
    log.warning("league %r (%s) deleted by %s: %s", league_id, status, by or "?", counts)
    return counts


def reinstate_agent(agent: Player | Referee) -> None:
    """Undo a suspension: the agent takes part again (REGISTERED)."""
    with transaction.atomic():
        if agent.status != AgentStatus.SUSPENDED:
            raise ValueError(f"{agent} is {agent.status}, not suspended")
        type(agent).objects.filter(pk=agent.pk).update(status=AgentStatus.REGISTERED)
        agent_id = agent.player_id if isinstance(agent, Player) else agent.referee_id
        record_event(agent.league, "STATE", "agent_reinstated", agent=agent_id, payload={"status": "REGISTERED"})


def _run(modeladmin, request, queryset, action, done: str) -> None:
    from league.admin import _each

    _each(modeladmin, request, queryset, action, done)


@admin.action(description="Pause")
def pause(modeladmin, request, queryset):
    _run(modeladmin, request, queryset, pause_league, "Paused")


@admin.action(description="Resume")
def resume(modeladmin, request, queryset):
    _run(modeladmin, request, queryset, resume_league, "Resumed")


@admin.action(description="Cancel the league")
def cancel(modeladmin, request, queryset):
    _run(modeladmin, request, queryset, cancel_league, "Cancelled")


@admin.action(description="Reinstate (undo suspension)")
def reinstate(modeladmin, request, queryset):
    _run(modeladmin, request, queryset, reinstate_agent, "Reinstated")


LEAGUE_ACTIONS = [pause, resume, cancel]
AGENT_ACTIONS = [reinstate]


def install() -> None:
    """Add the actions to the registered admins (idempotent)."""
    from league.admin import LeagueAdmin, PlayerAdmin, RefereeAdmin

    for model_admin, extra in (
        (LeagueAdmin, LEAGUE_ACTIONS),
        (PlayerAdmin, AGENT_ACTIONS),
        (RefereeAdmin, AGENT_ACTIONS),
    ):
        current = list(model_admin.actions or [])
        model_admin.actions = current + [a for a in extra if a not in current]
