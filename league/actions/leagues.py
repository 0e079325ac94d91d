"""A league's life cycle: created, registration opened and closed, started, paused, resumed,
cancelled and deleted; agents suspended, removed, revoked or reinstated by the admin; a match made
by hand. Each function is one transaction whose Event rows are written with it, and whose broadcast
goes out after the commit. The admin (league/admin.py), the ``league`` command and ``demo`` call
these, never the models directly."""

from __future__ import annotations

import logging
from datetime import timedelta
from functools import partial
from typing import Any

from django.db import models, transaction
from django.dispatch import Signal
from django.utils import timezone

from league.auth import new_token
from league.events import announce_leagues, broadcast, record_event
from league.models import AgentStatus, Event, League, Match, Player, Referee, Round, format_problem

log = logging.getLogger(__name__)

PAUSABLE = (League.Status.READY, League.Status.RUNNING)
FINAL = (League.Status.COMPLETED, League.Status.CANCELLED)
# A league the conductor may be working on is cancelled first: deleting rows under it would
# leave referees and players in matches that no longer exist.
IN_PLAY = (League.Status.READY, League.Status.RUNNING, League.Status.PAUSED)
# Seconds a deletion waits for the league's agents to be told before their rows go.
FAREWELL_WAIT = 10.0
# The organiser ended a league before it was over: sent after the commit of a cancellation, and
# before the rows of a deletion go (arguments: ``league``, ``league_status``, ``reason``,
# ``record``). Its receiver tells the league's agents and returns the thread that does it
# (league/conductor/farewell.py, connected in league/apps.py): the conductor imports the
# actions, so the actions reach it only through this signal.
league_ended = Signal()


def create_league(*, name: str, league_id: str, game_type: str = "even_odd", **settings: Any) -> League:
    """A new league (INITIALIZING). ValueError when its format cannot be played with its maximum
    of players (``models.format_problem``: Swiss rounds at least 1 and fewer than the players)."""
    league = League(name=name, league_id=league_id, game_type=game_type, **settings)
    problem = format_problem(league.schedule_format, league.swiss_rounds, league.max_players)
    if problem:
        raise ValueError(problem)
    with transaction.atomic():
        league.save(force_insert=True)
        record_event(league, "STATE", "league_created", payload={"game_type": game_type, "name": name})
    broadcast(league.league_id, "league_status", {"league_id": league.league_id, "status": league.status})
    return league


def _set_status(league: League, status: str, kind: str, **payload: Any) -> League:
    league.status = status
    record_event(league, "STATE", kind, payload={"status": status, **payload})
    broadcast(league.league_id, "league_status", {"league_id": league.league_id, "status": status, **payload})
    return league


def open_registration(league: League, seconds: float | None = 60.0) -> League:
    """REGISTERING from now for ``seconds`` (None: until closed by hand)."""
    with transaction.atomic():
        league = League.objects.select_for_update().get(pk=league.pk)
        if league.status not in (League.Status.INITIALIZING, League.Status.REGISTERING, League.Status.READY):
            raise ValueError(f"league {league.league_id} is {league.status}: registration cannot be opened")
        now = timezone.now()
        league.registration_opens_at = now
        league.registration_closes_at = now + timedelta(seconds=seconds) if seconds else None
        _set_status(
            league,
            League.Status.REGISTERING,
            "registration_opened",
            closes_at=league.registration_closes_at.isoformat() if league.registration_closes_at else None,
        )
        league.save(update_fields=["status", "registration_opens_at", "registration_closes_at"])
    return league


def close_registration(league: League) -> League:
    """End the registration window now (the league stays REGISTERING until started)."""
    with transaction.atomic():
        league = League.objects.select_for_update().get(pk=league.pk)
        league.registration_closes_at = timezone.now()
        league.save(update_fields=["registration_closes_at"])
        record_event(league, "STATE", "registration_closed", payload={"players": league.players.count()})
    broadcast(league.league_id, "league_status", {"league_id": league.league_id, "status": league.status})
    return league


def start_league(league: League) -> League:
    """Close registration and mark the league READY (the conductor then schedules and runs it)."""
    with transaction.atomic():
        league = League.objects.select_for_update().get(pk=league.pk)
        if league.status not in (League.Status.INITIALIZING, League.Status.REGISTERING):
            raise ValueError(f"league {league.league_id} is {league.status}: only a registering league can start")
        players = league.players.exclude(status__in=(AgentStatus.SUSPENDED, AgentStatus.REMOVED)).count()
        if players < league.min_players:
            raise ValueError(
                f"league {league.league_id} has {players} player(s); at least {league.min_players} are needed"
            )
        problem = format_problem(league.schedule_format, league.swiss_rounds, players)
        if problem:
            raise ValueError(f"league {league.league_id} cannot start: {problem}")
        now = timezone.now()
        if not league.registration_closes_at or league.registration_closes_at > now:
            league.registration_closes_at = now
        _set_status(league, League.Status.READY, "league_ready", players=players)
        league.save(update_fields=["status", "registration_closes_at"])
    return league


def pause_league(league: League) -> League:
    """Hold a READY or RUNNING league: the conductor dispatches nothing new while PAUSED
    (matches already with a referee finish and are recorded)."""
    with transaction.atomic():
        league = League.objects.select_for_update().get(pk=league.pk)
        if league.status not in PAUSABLE:
            raise ValueError(f"league {league.league_id} is {league.status}: only a ready or running league can pause")
        _set_status(league, League.Status.PAUSED, "league_paused", previous=league.status)
        league.save(update_fields=["status"])
    return league


def resume_league(league: League) -> League:
    """Back to the status the league had when it was paused."""
    with transaction.atomic():
        league = League.objects.select_for_update().get(pk=league.pk)
        if league.status != League.Status.PAUSED:
            raise ValueError(f"league {league.league_id} is {league.status}, not paused")
        paused = league.events.filter(kind="league_paused").order_by("-id").first()
        previous = (paused.payload.get("previous") if paused else None) or League.Status.RUNNING
        _set_status(league, previous, "league_resumed")
        league.save(update_fields=["status"])
    return league


def cancel_league(league: League, reason: str = "cancelled by the organiser") -> League:
    """Stop a league for good; matches not yet handed to a referee are cancelled. Once committed,
    every player and referee is told (LEAGUE_COMPLETED with ``league_status`` CANCELLED and
    ``reason``), from a thread of this process (``league_ended``)."""
    with transaction.atomic():
        league = League.objects.select_for_update().get(pk=league.pk)
        if league.status in FINAL:
            raise ValueError(f"league {league.league_id} is already {league.status}")
        cancelled = Match.objects.filter(league=league, status=Match.Status.SCHEDULED).update(
            status=Match.Status.CANCELLED
        )
        _set_status(league, League.Status.CANCELLED, "league_cancelled", matches_cancelled=cancelled)
        league.save(update_fields=["status"])
        ended = partial(league_ended.send, League, league=league, league_status=league.status, reason=reason)
        transaction.on_commit(ended)
    return league


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
    first. Returns those counts.

    The agents of a league deleted before it was over (still registering) are told first
    (LEAGUE_COMPLETED with ``league_status`` DELETED), for at most ``FAREWELL_WAIT`` seconds:
    a relay player can only be reached while its row exists. Those of a league completed or
    cancelled were told then."""
    current = League.objects.filter(pk=league.pk).first()
    if current is not None and current.status not in (*IN_PLAY, *FINAL):
        reason = "deleted by the organiser"
        for _receiver, told in league_ended.send(
            League, league=current, league_status="DELETED", reason=reason, record=False
        ):
            if told is not None:
                told.join(FAREWELL_WAIT)
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


def set_agent_status(agent: Player | Referee, status: str) -> None:
    """Suspend or remove an agent (admin); recorded and broadcast like any transition."""
    with transaction.atomic():
        type(agent).objects.filter(pk=agent.pk).update(status=status)
        League.objects.filter(pk=agent.league_id).changed()
        agent_id = agent.player_id if isinstance(agent, Player) else agent.referee_id
        record_event(agent.league, "STATE", f"agent_{status.lower()}", agent=agent_id, payload={"status": status})


def revoke_agent(agent: Player | Referee) -> None:
    """Revoke an agent's token at once (admin): the hash is replaced by one whose token no one
    holds and the agent is SUSPENDED. Its next call is E012. To let the machine back in, remove
    the agent: its endpoint may then register afresh and gets a new id and token."""
    with transaction.atomic():
        _, unusable_hash = new_token()  # the token itself is dropped unseen
        type(agent).objects.filter(pk=agent.pk).update(status=AgentStatus.SUSPENDED, token_hash=unusable_hash)
        League.objects.filter(pk=agent.league_id).changed()
        agent_id = agent.player_id if isinstance(agent, Player) else agent.referee_id
        record_event(agent.league, "STATE", "agent_revoked", agent=agent_id, payload={"status": AgentStatus.SUSPENDED})


def reinstate_agent(agent: Player | Referee) -> None:
    """Undo a suspension: the agent takes part again (REGISTERED)."""
    with transaction.atomic():
        if agent.status != AgentStatus.SUSPENDED:
            raise ValueError(f"{agent} is {agent.status}, not suspended")
        type(agent).objects.filter(pk=agent.pk).update(status=AgentStatus.REGISTERED)
        League.objects.filter(pk=agent.league_id).changed()
        agent_id = agent.player_id if isinstance(agent, Player) else agent.referee_id
        record_event(agent.league, "STATE", "agent_reinstated", agent=agent_id, payload={"status": "REGISTERED"})


def create_match(
    league: League,
    round_number: int,
    player_a: Player,
    player_b: Player,
    *,
    match_id: str | None = None,
    referee: Referee | None = None,
) -> Match:
    """One match outside the scheduler (admin, tests); with a referee it is ASSIGNED to it."""
    with transaction.atomic():
        rnd, _ = Round.objects.get_or_create(league=league, number=round_number)
        if match_id is None:
            match_id = f"R{round_number}M{rnd.matches.count() + 1}"
        now = timezone.now()
        match = Match.objects.create(
            league=league,
            round=rnd,
            match_id=match_id,
            player_a=player_a,
            player_b=player_b,
            game_type=league.game_type,
            referee=referee,
            status=Match.Status.ASSIGNED if referee else Match.Status.SCHEDULED,
            assigned_at=now if referee else None,
            deadline_at=now + timedelta(seconds=league.match_deadline) if referee else None,
            attempt=1 if referee else 0,
        )
        record_event(
            league,
            "STATE",
            "match_assigned" if referee else "match_created",
            agent=referee.referee_id if referee else "",
            match_id=match_id,
            payload={"player_A_id": player_a.player_id, "player_B_id": player_b.player_id},
        )
    return match
