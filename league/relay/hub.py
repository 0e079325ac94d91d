"""The relay sockets held by this process: which channel serves which player. The database knows
the sockets of every process (``state.py``); this knows its own without a query, which is every
socket when the channel layer is the in-memory one (one LM process)."""

from __future__ import annotations

_channels: dict[tuple[str, str], str] = {}


def attach(league_id: str, player_id: str, channel: str) -> None:
    """``channel`` (a consumer of this process) now serves the player."""
    _channels[(league_id, player_id)] = channel


def detach(league_id: str, player_id: str, channel: str) -> None:
    """``channel`` closed; a newer socket of the same player stays."""
    key = (league_id, player_id)
    if _channels.get(key) == channel:
        del _channels[key]


def local_channel(league_id: str, player_id: str) -> str | None:
    return _channels.get((league_id, player_id))
