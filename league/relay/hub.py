"""The relay sockets held by this process: which channel serves which player, and its consumer;
and where other processes' sockets are, as read from the database or heard from those processes
(league/relay/layer.py). The database knows the sockets of every process (``state.py``); this
knows its own without a query, which is every socket when the channel layer is the in-memory one
(one LM process), and lets a call reach a consumer of this process without going through the
channel layer (unless ``RELAY_LOCAL_SHORTCUT`` is off)."""

from __future__ import annotations

from typing import Any

from django.conf import settings

_channels: dict[tuple[str, str], str] = {}
_consumers: dict[str, Any] = {}  # channel → its RelayConsumer
# Sockets of other LM processes as read from the database: (league, player) → (channel, trusted
# until, in the event loop's time).
_remote: dict[tuple[str, str], tuple[str, float]] = {}
# Channels of this process's sockets that have closed, the latest CLOSED_KEPT (a channel is never
# reused): the database may name one until its closing is recorded, and a call sent to it would
# wait for a reader that is gone.
_closed: dict[str, None] = {}
CLOSED_KEPT = 10_000


def attach(league_id: str, player_id: str, channel: str, consumer: Any) -> None:
    """``channel`` (``consumer``, of this process) now serves the player."""
    _channels[(league_id, player_id)] = channel
    _consumers[channel] = consumer
    _remote.pop((league_id, player_id), None)


def detach(league_id: str, player_id: str, channel: str) -> None:
    """``channel`` closed; a newer socket of the same player stays. What was read of the player's
    socket elsewhere is forgotten too: the socket seen closing here may be the one it named."""
    key = (league_id, player_id)
    if _channels.get(key) == channel:
        del _channels[key]
    _consumers.pop(channel, None)
    _remote.pop(key, None)
    _closed[channel] = None
    if len(_closed) > CLOSED_KEPT:
        del _closed[next(iter(_closed))]


def closed_here(channel: str) -> bool:
    """Whether ``channel`` was a socket of this process that has closed."""
    return channel in _closed


def remember_remote(league_id: str, player_id: str, channel: str, until: float) -> None:
    _remote[(league_id, player_id)] = (channel, until)


def remote_channel(league_id: str, player_id: str, now: float) -> str:
    """The player's socket in another process, as read of the database until ``now``, or ""."""
    channel, until = _remote.get((league_id, player_id), ("", 0.0))
    return channel if until > now else ""


def forget_remote(league_id: str, player_id: str) -> None:
    _remote.pop((league_id, player_id), None)


def heard(league_id: str, player_id: str, channel: str, opened: bool, until: float) -> None:
    """Another process (or this one) said that ``channel`` now serves the player (``opened``), or
    that it closed: what this process trusts of the player's socket elsewhere follows."""
    key = (league_id, player_id)
    if channel in _consumers or channel in _closed:
        return  # this process's own socket: attach and detach said it already (a word may come late)
    if opened:
        _remote[key] = (channel, until)
    elif _remote.get(key, ("",))[0] == channel:
        del _remote[key]


def local_channel(league_id: str, player_id: str) -> str | None:
    return _channels.get((league_id, player_id))


def local_consumer(channel: str) -> Any | None:
    """The consumer of ``channel`` when this process holds it and ``RELAY_LOCAL_SHORTCUT`` is on;
    None sends what is meant for it through the channel layer."""
    return _consumers.get(channel) if settings.RELAY_LOCAL_SHORTCUT else None
