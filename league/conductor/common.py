"""What every part of the conductor shares: its limits, its statuses, and the messages it sends.

A ``Delivery`` is one message to one agent; a ``Dispatch`` is a claimed match with the
START_MATCH its referee gets. The rest are small helpers every module needs.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError

from league.auth import lm_token_for
from league.models import AgentStatus, League, Match, Player, Referee
from league.senders import DEFAULT as DEFAULT_SENDER
from league.senders import sender_for
from leagueproto.client import RetryPolicy
from leagueproto.envelope import make_message
from leagueproto.scoring import id_sort_key

SENDER = DEFAULT_SENDER  # a player may have learned another spelling (league/senders.py)
# Consecutive failures before a referee is SUSPENDED. After each failure the referee gets no match
# for a cooldown that doubles (``referee_cooldown``), so it takes a few seconds of failing to be
# suspended, not one failed batch; a suspended referee is probed until it answers again.
SUSPEND_AFTER = 4
COOLDOWN_MAX = 30.0  # seconds: the longest a failing referee is left alone (and probe backoff cap)
# Consecutive calls to a player that fail at the transport level (no reply in time, refused
# connection, a reply over the size limit) before it is marked unreachable.
UNREACHABLE_AFTER = 2
PROBE_FIRST = 1.0  # seconds before the first probe of an unreachable agent; then doubling
PROBE_MAX = 5.0  # seconds between probes at most: an agent back is back in play within this
# What a lost database connection or a locked SQLite file raises: an outage to ride out, not a bug.
DB_OUTAGE = (OperationalError, InterfaceError)
LIVE = (AgentStatus.REGISTERED, AgentStatus.ACTIVE)
IN_PLAY = (Match.Status.ASSIGNED, Match.Status.RUNNING)
DONE = (Match.Status.FINISHED, Match.Status.CANCELLED)
WORKING = (League.Status.REGISTERING, League.Status.READY, League.Status.RUNNING)
EMBEDDED_REFEREE = "EMBEDDED"  # the LM's built-in referee, used when none is registered
EMBEDDED_CAPACITY = 8  # matches the built-in referee runs at once per conductor


@dataclass(frozen=True)
class Delivery:
    """One message to one agent."""

    agent_id: str
    endpoint: str
    method: str
    message: dict[str, Any]


@dataclass(frozen=True)
class Dispatch:
    """A claimed match and the start_match message for its referee."""

    match_pk: int
    match_id: str
    referee_pk: int
    referee_id: str
    attempt: int
    delivery: Delivery
    # Sent again (``stale_assignments``): an earlier start_match of this assignment may have
    # reached the referee, so a failure to reach it now does not give the match away.
    sent_before: bool = False


# The outcome of one call: the delivery, "ok" / "error" / the transport's error code, the reply.
Outcome = tuple[Delivery, str, dict[str, Any] | None]


def retry_policy(league: League) -> RetryPolicy:
    return RetryPolicy(retries=league.retries, delay=league.retry_delay)


def match_token(league_id: str, match_id: str, attempt: int) -> str:
    """The per-match bearer a referee shows the players: derived, so a resent
    start_match carries the same token, and new for each attempt."""
    key = settings.SECRET_KEY.encode()
    return hmac.new(key, f"match:{league_id}:{match_id}:{attempt}".encode(), hashlib.sha256).hexdigest()


def timeouts_of(league: League) -> dict[str, float]:
    """The league's timeouts as START_MATCH carries them."""
    return {
        "join": league.join_timeout,
        "move": league.move_timeout,
        "game_over": league.game_over_timeout,
        "report": league.report_timeout,
        "default": league.default_timeout,
    }


def players_of(league: League) -> list[Player]:
    players = list(league.players.exclude(status=AgentStatus.REMOVED).select_related("league"))
    return sorted(players, key=lambda p: id_sort_key(p.player_id))


def message_to(agent: Player | Referee, message_type: str, **fields: Any) -> dict[str, Any]:
    sender = sender_for(agent.lm_sender) if isinstance(agent, Player) else SENDER  # league/senders.py
    return make_message(message_type, sender, auth_token=lm_token_for(agent), **fields)
