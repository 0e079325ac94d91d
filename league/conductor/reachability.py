"""Agents that stopped answering: players marked unreachable (their matches decided at once, a
technical loss each) and referees suspended by the conductor, both probed until they answer.

A decision goes through ``actions.record_results`` like any referee's report: the LM reports as
a referee that has no row (``Referee`` unsaved, pk None), which is exactly what the undispatched
match records as its referee (none), so the usual assignment check holds.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from league import actions
from league.conductor.common import SENDER
from league.events import append_events, broadcast, record_event
from league.models import AgentStatus, League, Match, Player, Referee
from leagueproto.client import CallFailed
from leagueproto.errors import ErrorCode, LeagueError
from leagueproto.scoring import WIN_POINTS

log = logging.getLogger("league.conductor")


def unreachable_failure(exc: CallFailed) -> bool:
    """Whether a failed call says the agent is not there: no reply in time, no connection, or a
    reply over the size limit. Any JSON-RPC answer (even an error) comes from a live agent."""
    if exc.rpc_error is not None:
        return False
    return exc.code in (ErrorCode.TIMEOUT_ERROR, ErrorCode.CONNECTION_ERROR) or "too large" in exc.detail


def technical_decision(match: Match) -> actions.Report:
    """The LM's report of a match with a player marked unreachable: a technical loss for each
    unreachable player (both: both lose). Its log has one failure entry per such player, which
    is what ``log_problem`` asks of a technical loss."""
    a, b = match.player_a, match.player_b
    gone = [p for p in (a, b) if p.unreachable_since is not None]
    lost = [p.player_id for p in gone]
    winner = next((p.player_id for p in (a, b) if p.player_id not in lost), None)
    why = "; ".join(
        f"{p.player_id} unreachable since {p.unreachable_since.isoformat(timespec='seconds')}"
        f" ({p.unreachable_reason or 'no answer'})"
        for p in gone
    )
    result = {
        "status": "TECHNICAL_LOSS",
        "winner": winner,
        "score": {p.player_id: WIN_POINTS if p.player_id == winner else 0 for p in (a, b)},
        "technical_loss": lost,
        "details": {"reason": f"technical loss: {why}", "decided_by": SENDER},
    }
    match_log = [
        {
            "seq": n,
            "direction": "EVENT",
            "message_type": "DECIDED_UNREACHABLE",
            "peer": p.player_id,
            "outcome": "connection_error",
            "message": {"reason": why},
        }
        for n, p in enumerate(gone, start=1)
    ]
    return actions.Report(Referee(league=match.league, referee_id=SENDER), match.match_id, result, match_log)


def decide_unreachable(round_pk: int, match_pks: list[int] | None = None) -> list[str]:
    """Decide the round's SCHEDULED matches that have a player marked unreachable (of
    ``match_pks`` only, when given) instead of a referee waiting out its timeouts again: each
    recorded as a technical loss (``technical_decision``). The match ids decided."""
    matches = (
        Match.objects.filter(round_id=round_pk, status=Match.Status.SCHEDULED)
        .filter(Q(player_a__unreachable_since__isnull=False) | Q(player_b__unreachable_since__isnull=False))
        .select_related("league", "player_a", "player_b")
        .order_by("id")
    )
    if match_pks is not None:
        matches = matches.filter(pk__in=match_pks)
    with transaction.atomic():
        reports = [technical_decision(match) for match in matches.select_for_update(of=("self",))]
        if not reports:
            return []
        outcomes, rows = actions.record_results(reports)
        append_events(rows)
    for report, outcome in zip(reports, outcomes, strict=True):
        if isinstance(outcome, LeagueError):
            log.warning("match %s not decided: %s", report.match_id, outcome)
    return [o.match_id for o in outcomes if isinstance(o, actions.Recorded)]


def mark_unreachable(league_pk: int, player_id: str, reason: str) -> bool:
    """Mark a player unreachable (once: False if it already is, or is not a player)."""
    with transaction.atomic():
        done = Player.objects.filter(league_id=league_pk, player_id=player_id, unreachable_since__isnull=True).update(
            unreachable_since=timezone.now(), unreachable_reason=reason[:300]
        )
        if done:
            league = League.objects.get(pk=league_pk)
            record_event(league, "STATE", "player_unreachable", agent=player_id, payload={"reason": reason})
            broadcast(league.league_id, "player_unreachable", {"player_id": player_id, "reason": reason})
    return bool(done)


def unreachable_agents(league_pk: int) -> list[Player | Referee]:
    """The league's players marked unreachable and the referees the conductor suspended: the
    agents to probe."""
    players: list[Player | Referee] = list(
        Player.objects.filter(league_id=league_pk, unreachable_since__isnull=False)
        .exclude(status=AgentStatus.REMOVED)
        .select_related("league")
    )
    referees = Referee.objects.filter(
        league_id=league_pk, status=AgentStatus.SUSPENDED, unreachable_since__isnull=False
    ).select_related("league")
    return players + list(referees)


def restore_agent(agent: Player | Referee) -> bool:
    """An unreachable agent answered a probe: no longer unreachable, its failures forgotten, and a
    referee the conductor suspended ACTIVE again. False if someone else changed it meanwhile."""
    model = type(agent)
    with transaction.atomic():
        row = model.objects.select_for_update().select_related("league").filter(pk=agent.pk).first()
        if row is None or row.unreachable_since is None:
            return False
        is_referee = isinstance(row, Referee)
        if is_referee and row.status != AgentStatus.SUSPENDED:
            return False
        since, reason = row.unreachable_since, row.unreachable_reason
        row.unreachable_since, row.unreachable_reason, row.failures = None, "", 0
        row.answered_at = timezone.now()
        fields = ["unreachable_since", "unreachable_reason", "failures", "answered_at"]
        if is_referee:
            row.status = AgentStatus.ACTIVE
            fields.append("status")
        row.save(update_fields=fields)
        agent_id = row.referee_id if is_referee else row.player_id
        record_event(
            row.league,
            "STATE",
            "referee_restored" if is_referee else "player_reachable",
            agent=agent_id,
            payload={"unreachable_since": since.isoformat(), "reason": reason},
        )
    return True


# -- seats that have never answered ------------------------------------------------------------
# An agent's ``answered_at`` is refreshed at most this often: the panel shows whether it answers,
# not when to the second, and a write per probe would be a write per agent every few seconds.
ANSWER_REFRESH = timedelta(seconds=60)
WITHDRAWN = "never answered before the schedule was drawn"


def record_answer(agent: Player | Referee) -> bool:
    """The agent answered a probe: ``answered_at`` set (or refreshed when older than
    ``ANSWER_REFRESH``). Its first answer is recorded in the Event log (``agent_answered``: the
    registration panel shows it live). True if this was its first answer."""
    model = type(agent)
    now = timezone.now()
    with transaction.atomic():
        first = bool(model.objects.filter(pk=agent.pk, answered_at__isnull=True).update(answered_at=now))
        if not first:
            model.objects.filter(pk=agent.pk, answered_at__lt=now - ANSWER_REFRESH).update(answered_at=now)
            return False
        league = League.objects.get(pk=agent.league_id)
        agent_id = agent.referee_id if isinstance(agent, Referee) else agent.player_id
        record_event(league, "STATE", "agent_answered", agent=agent_id, payload={"endpoint": agent.endpoint})
        broadcast(league.league_id, "agent_answered", {"agent_id": agent_id})
    return True


def seats_to_probe(league_pk: int) -> list[Player | Referee]:
    """The agents of a registering league the conductor probes (``Prober.probe_seats``):
    players with their own endpoint and referees, neither removed nor marked unreachable (those
    are ``unreachable_agents``'). A relay player is not probed: its socket being connected is
    its answer (``relay_answered``)."""
    players: list[Player | Referee] = list(
        Player.objects.filter(league_id=league_pk, connection=Player.Connection.DIRECT, unreachable_since__isnull=True)
        .exclude(status=AgentStatus.REMOVED)
        .select_related("league")
    )
    referees = Referee.objects.filter(league_id=league_pk, unreachable_since__isnull=True).exclude(
        status__in=(AgentStatus.REMOVED, AgentStatus.SUSPENDED)
    )
    return players + list(referees.select_related("league"))


def never_answered(league_pk: int) -> list[Player]:
    """The league's players with their own endpoint that have never answered (what the conductor
    probes once more right before drawing the schedule)."""
    return list(
        Player.objects.filter(league_id=league_pk, connection=Player.Connection.DIRECT, answered_at__isnull=True)
        .exclude(status__in=(AgentStatus.REMOVED, AgentStatus.SUSPENDED))
        .select_related("league")
    )


def relay_answered(league_pk: int) -> int:
    """Relay players whose socket is connected count as answered: ``answered_at`` set for those
    that have none. How many."""
    now = timezone.now()
    return (
        Player.objects.filter(league_id=league_pk, connection=Player.Connection.RELAY, answered_at__isnull=True)
        .exclude(relay_channel="")
        .update(answered_at=now)
    )


def withdraw_silent_players(league_pk: int) -> list[str]:
    """A READY league, before its schedule is drawn: each player that has never answered (its own
    endpoint never answered a probe; a relay player never connected) is withdrawn (REMOVED, its
    reason kept, one ``player_withdrawn`` Event each) so that it is in no match: a seat that
    never answered would only hand its opponents free wins. The ids withdrawn."""
    with transaction.atomic():
        league = League.objects.select_for_update().get(pk=league_pk)
        if league.status != League.Status.READY:
            return []
        silent = (
            Player.objects.filter(league=league, answered_at__isnull=True)
            .exclude(status__in=(AgentStatus.REMOVED, AgentStatus.SUSPENDED))
            .filter(Q(connection=Player.Connection.DIRECT) | Q(relay_channel="", relay_changed_at__isnull=True))
            .order_by("id")
        )
        withdrawn = []
        for player in silent:
            why = player.unreachable_reason or "no probe reached it"
            reason = f"{WITHDRAWN} ({why})"
            player.status = AgentStatus.REMOVED
            player.unreachable_since = player.unreachable_since or timezone.now()
            player.unreachable_reason = reason[:300]
            player.save(update_fields=["status", "unreachable_since", "unreachable_reason"])
            record_event(
                league,
                "STATE",
                "player_withdrawn",
                agent=player.player_id,
                payload={"reason": reason, "endpoint": player.endpoint},
            )
            withdrawn.append(player.player_id)
        if withdrawn:
            League.objects.filter(pk=league.pk).changed()
            log.warning("league %s: withdrawn before the schedule, never answered: %s", league.league_id, withdrawn)
            broadcast(league.league_id, "players_withdrawn", {"player_ids": withdrawn, "reason": WITHDRAWN})
    return withdrawn
