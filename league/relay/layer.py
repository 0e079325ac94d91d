"""The channel layer relayed calls cross LM processes on, and this process's channel for the
replies to the calls it sends there.

With Redis the relay has a layer of its own, ``CHANNEL_LAYERS["relay"]``: channels_redis's
``RedisPubSubChannelLayer``, which carries a message with one PUBLISH that Redis pushes to the
process subscribed to its channel. (channels_redis's list-based layer, the site's default,
takes four round trips to Redis to send a message and four to receive it, and a process
receives its messages one at a time: with two LM processes, a fifth of each one's time in a
relayed league.) Without the alias (one process: the in-memory layer) the relay uses the
default layer.

Where a socket is, other processes hear: a consumer says so to the group ``SOCKETS`` when its
socket opens and when it closes (after the database records it), and each process's replies
channel is in that group. So a process sends calls to another's socket on what it read or heard
last, reads the database again only ``REMOTE_CHANNEL_LIFE`` after (in case a word was lost), and
stops sending to a socket the moment it hears it closed.

A pub/sub message that no process is subscribed to when it is published is gone: a call sent
while its socket's process is reconnecting to Redis is not answered, and its caller's timeout
applies (as for an agent that does not answer); the subscriptions come back with Redis
(redis-py subscribes again). Nothing waits in Redis, so the messages bound
for a process are at most the calls in flight to it, each an HTTP request another LM process
holds open; the consumer refuses what is over its socket's places (``RELAY_MAX_IN_FLIGHT``) at once.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

from channels.layers import BaseChannelLayer, get_channel_layer
from django.conf import settings
from redis.exceptions import RedisError

from league.relay import hub

RELAY_LAYER = "relay"
# The group every process's replies channel is in: where sockets open and close.
SOCKETS = "relay.sockets"
# How long a process trusts what it read or heard of another process's socket without a word
# since: a backstop for a word lost while Redis restarted (a call sent to a socket that has gone
# waits to its deadline). Read every second for every player, it was 6–15 % of an LM process's
# time in a relayed league on two processes (docs/benchmarks.md).
REMOTE_CHANNEL_LIFE = 5.0

# What the layer may raise when Redis times out or restarts: the one message it carried fails.
LAYER_DOWN = (RedisError, OSError)
# A read of a channel that failed is tried again after this long, doubling up to the maximum.
RETRY_FIRST = 0.05
RETRY_MAX = 2.0

logger = logging.getLogger("league.relay")


def relay_layer() -> BaseChannelLayer | None:
    """The layer relayed calls and replies cross processes on: the relay's own, else the default."""
    alias = RELAY_LAYER if RELAY_LAYER in settings.CHANNEL_LAYERS else "default"
    return get_channel_layer(alias)


async def receive_patiently(layer: BaseChannelLayer, channel: str) -> dict[str, Any]:
    """The next message of ``channel``. A read that fails because Redis timed out or is restarting
    is tried again (on the list layer the message waits in Redis meanwhile); logged once for each
    run of failures."""
    pause = RETRY_FIRST
    while True:
        try:
            return await layer.receive(channel)
        except LAYER_DOWN as exc:
            if pause == RETRY_FIRST:
                logger.warning("relay: reading channel %s failed (%r); trying again", channel, exc)
            await asyncio.sleep(pause)
            pause = min(pause * 2, RETRY_MAX)


class Replies:
    """This process's one channel for the replies to its calls on other processes' sockets, read
    by one task that hands each reply to the call waiting for it (by the key the call carried).

    One channel for them all, not one per call: on the pub/sub layer a channel is a subscription
    (a round trip to open, one to close, and kept until its reader is cancelled); on the list
    layer every channel of a process is read from one list anyway."""

    def __init__(self, layer: BaseChannelLayer) -> None:
        self.layer = layer
        self.loop = asyncio.get_running_loop()
        self.channel = ""
        self._opening: asyncio.Future[None] | None = None
        self._reader: asyncio.Future[None] | None = None
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        # Keys are unique to the process's channel, which is new with each process.
        self._keys = (f"{n:x}" for n in itertools.count(1))

    async def open(self) -> str:
        """The channel, subscribed and read from (once per process)."""
        if not self.channel:
            opening = self._opening
            if opening is None or (opening.done() and (opening.cancelled() or opening.exception())):
                opening = self._opening = asyncio.ensure_future(self._open())
            # Shielded: a caller that hangs up does not cancel the opening the others wait for.
            await asyncio.shield(opening)
        return self.channel

    async def _open(self) -> None:
        # Named as the layer names the consumers' channels: channels_redis's list layer reads all
        # the channels of a process that share a prefix from one list, one list at a time, so
        # replies on a list of their own would wait while the process reads its sockets' list,
        # and calls for its sockets while it reads replies.
        channel = await self.layer.new_channel()
        self._reader = asyncio.ensure_future(self._read(channel))
        try:
            # Before this process keeps any channel read of the database (endpoint.py): a socket
            # that moves after the read is heard of.
            await self.layer.group_add(SOCKETS, channel)
        except LAYER_DOWN as exc:
            logger.warning("relay: this process hears of no socket elsewhere (%r)", exc)
        self.channel = channel

    def expect(self) -> tuple[str, asyncio.Future[dict[str, Any]]]:
        """A key for one call's reply, and the future its reply will be set on."""
        key = next(self._keys)
        future = self.loop.create_future()
        self._waiting[key] = future
        return key, future

    def forget(self, key: str) -> None:
        """The call of ``key`` no longer waits (answered, timed out, hung up)."""
        self._waiting.pop(key, None)

    async def _read(self, channel: str) -> None:
        while True:
            message = await receive_patiently(self.layer, channel)
            try:
                if message.get("type") == "relay.socket":
                    until = self.loop.time() + REMOTE_CHANNEL_LIFE
                    hub.heard(message["league_id"], message["player_id"], message["channel"], message["opened"], until)
                    continue
                future = self._waiting.pop(str(message.get("call", "")), None)
                if future is not None and not future.done():
                    future.set_result(message)
            except Exception:  # one message's bug: every other call's reply still comes through
                logger.exception("relay: a message on %s could not be handled: %r", channel, message.get("type"))

    def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()


_replies: Replies | None = None


def replies(layer: BaseChannelLayer) -> Replies:
    """This process's replies on ``layer``; made anew for another layer or event loop (tests)."""
    global _replies
    loop = asyncio.get_running_loop()
    if _replies is None or _replies.layer is not layer or _replies.loop is not loop:
        if _replies is not None and _replies.loop is loop:
            _replies.close()
        _replies = Replies(layer)
    return _replies


async def announce(layer: BaseChannelLayer, league_id: str, player_id: str, channel: str, *, opened: bool) -> None:
    """Tell every process that ``channel`` now serves the player, or that it has closed. A word the
    layer fails to carry is left: the others find out from the database (after a failed call, or
    ``REMOTE_CHANNEL_LIFE``)."""
    word = {"type": "relay.socket", "league_id": league_id, "player_id": player_id, "channel": channel}
    try:
        await layer.group_send(SOCKETS, {**word, "opened": opened})
    except LAYER_DOWN as exc:
        logger.warning(
            "relay: could not tell the other processes that %s %s (%r)", channel, "opened" if opened else "closed", exc
        )
