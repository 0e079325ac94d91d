"""Where a relay player's socket is, in the database: named state changes (one transaction each,
broadcast to the dashboard after commit) and the look-ups the consumers make."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from league.auth import find_by_token
from league.events import broadcast, record_event
from league.models import AgentStatus, League, Player

# Players whose socket is refused: the admin took them out of the league.
SHUT_OUT = (AgentStatus.SUSPENDED, AgentStatus.REMOVED)


@dataclass(frozen=True)
class Holder:
    """A relay player as the consumer knows it once authenticated."""

    pk: int
    league_pk: int
    league_id: str
    player_id: str
    endpoint: str


def authenticate(token: str) -> Holder | str:
    """The relay player whose token this is, or why the socket is refused (one sentence)."""
    player = find_by_token(token, "player")
    if player is None:
        return "unknown auth_token: register first (docs/protocol.md, 'Playing from behind NAT')"
    if player.status in SHUT_OUT:
        return f"player {player.player_id} is {player.status.lower()}"
    if player.connection != Player.Connection.RELAY:
        return f"player {player.player_id} registered an endpoint: register with contact_endpoint 'connect'"
    return Holder(player.pk, player.league_id, player.league.league_id, player.player_id, player.endpoint)


def connected(holder: Holder, channel: str) -> str:
    """Record that ``channel`` now serves the player; the channel it replaces ("" if none)."""
    with transaction.atomic():
        # One UPDATE: a league's players all connecting at once queue for SQLite's write lock.
        previous = Player.objects.filter(pk=holder.pk).values_list("relay_channel", flat=True).first() or ""
        Player.objects.filter(pk=holder.pk).update(relay_channel=channel, relay_changed_at=timezone.now())
        record_event(
            League(pk=holder.league_pk),
            "STATE",
            "relay_connected",
            agent=holder.player_id,
            payload={"replaced": bool(previous)},
        )
        broadcast(holder.league_id, "player_connection", {"player_id": holder.player_id, "connected": True})
    return previous if previous != channel else ""


def disconnected(holder: Holder, channel: str) -> bool:
    """Record that ``channel`` no longer serves the player, unless another socket took over since."""
    with transaction.atomic():
        changed = Player.objects.filter(pk=holder.pk, relay_channel=channel).update(
            relay_channel="", relay_changed_at=timezone.now()
        )
        if changed:
            record_event(League(pk=holder.league_pk), "STATE", "relay_disconnected", agent=holder.player_id)
            broadcast(holder.league_id, "player_connection", {"player_id": holder.player_id, "connected": False})
    return bool(changed)


@dataclass(frozen=True)
class Target:
    """What the relay endpoint needs to reach a player: whether it uses the relay, and its socket's channel."""

    relay: bool
    channel: str


def target(league_id: str, player_id: str) -> Target | None:
    """The relay player ``player_id`` of ``league_id`` (None: no such player)."""
    row = (
        Player.objects.filter(league__league_id=league_id, player_id=player_id)
        .exclude(status=AgentStatus.REMOVED)
        .values_list("connection", "relay_channel")
        .first()
    )
    if row is None:
        return None
    return Target(row[0] == Player.Connection.RELAY, row[1])
