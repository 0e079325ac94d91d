"""A league's life cycle: created, registration opened and closed, started; agents suspended,
removed or revoked by the admin; a match made by hand. Each function is one transaction whose
Event rows are written with it, and whose broadcast goes out after the commit."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from league.auth import new_token
from league.events import broadcast, record_event
from league.models import AgentStatus, League, Match, Player, Referee, Round


def create_league(*, name: str, league_id: str, game_type: str = "even_odd", **settings: Any) -> League:
    with transaction.atomic():
        league = League.objects.create(name=name, league_id=league_id, game_type=game_type, **settings)
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
        now = timezone.now()
        if not league.registration_closes_at or league.registration_closes_at > now:
            league.registration_closes_at = now
        _set_status(league, League.Status.READY, "league_ready", players=players)
        league.save(update_fields=["status", "registration_closes_at"])
    return league


def set_agent_status(agent: Player | Referee, status: str) -> None:
    """Suspend or remove an agent (admin); recorded and broadcast like any transition."""
    with transaction.atomic():
        type(agent).objects.filter(pk=agent.pk).update(status=status)
        agent_id = agent.player_id if isinstance(agent, Player) else agent.referee_id
        record_event(agent.league, "STATE", f"agent_{status.lower()}", agent=agent_id, payload={"status": status})


def revoke_agent(agent: Player | Referee) -> None:
    """Revoke an agent's token at once (admin): the hash is replaced by one whose token no one
    holds and the agent is SUSPENDED. Its next call is E012. To let the machine back in, remove
    the agent: its endpoint may then register afresh and gets a new id and token."""
    with transaction.atomic():
        _, unusable_hash = new_token()  # the token itself is dropped unseen
        type(agent).objects.filter(pk=agent.pk).update(status=AgentStatus.SUSPENDED, token_hash=unusable_hash)
        agent_id = agent.player_id if isinstance(agent, Player) else agent.referee_id
        record_event(agent.league, "STATE", "agent_revoked", agent=agent_id, payload={"status": AgentStatus.SUSPENDED})


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
