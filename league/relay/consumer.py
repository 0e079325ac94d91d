"""``/agents/connect``: the WebSocket a relay player keeps open to the LM.

The agent authenticates with its auth_token (an ``Authorization: Bearer`` header, or a first
message ``{"auth_token": "…"}``), or registers on the socket itself (a first message that is its
``register_player`` JSON-RPC request, answered there: ``registration.py``), and is welcomed with
``{"type": "welcome", …}``. From then on the LM sends it, one per message, the JSON-RPC requests
referees and the LM make to its relay endpoint, each with an id of the socket's own; the agent
answers each with the JSON-RPC response of that id, as it would over HTTP. The consumer gives
the reply its caller's id back and hands it to the waiting HTTP consumer (``endpoint.py``):
directly in this process, through the channel layer from another.

A socket that sends what it was not asked for (a request, a reply to an id it was not sent,
something not JSON), too much or too fast is closed; a newer socket of the same player replaces
an older one. When the socket drops, the calls waiting on it are answered 502 at once.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.exceptions import ChannelFull
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import BaseChannelLayer
from django.conf import settings
from redis.exceptions import RedisError

from league.ratelimit import Bucket, LocalBuckets
from league.relay import hub, registration, state
from leagueproto.jsonutil import dumps, loads

# Where a call's answer goes: a reply channel (another process), or a future of this process.
ReplyTo = str | asyncio.Future

# Close codes (4000-4999 are the application's): the agent's client reports them.
BAD_MESSAGE = 4400  # not JSON, or not a reply to a call in flight
UNAUTHORIZED = 4401  # no token in time, or a token the LM refuses
REPLACED = 4409  # the same player connected again elsewhere
TOO_FAST = 4429  # over the frame or connection rate
TOO_BIG = 1009  # the WebSocket code for a message too big
# A reply that comes after its caller gave up is dropped quietly for this long, not an error.
LATE_GRACE = 60.0
# What the channel layer may raise when Redis times out or restarts, and when a send finds its
# channel full: the call it carried fails, not the consumer (and the agent's socket with it).
LAYER_DOWN = (RedisError, OSError)
LAYER_ERRORS = (ChannelFull, *LAYER_DOWN)
# A read of a channel that failed is tried again after this long, doubling up to the maximum.
RETRY_FIRST = 0.05
RETRY_MAX = 2.0

logger = logging.getLogger("league.relay")

_buckets = LocalBuckets()
_socket_numbers = itertools.count(1)


class WithoutConnectionHop:
    """A consumer mixin: dispatch each message to its handler without Channels' hop to a worker
    thread (and back) to close stale database connections first, a hop for every relayed call
    and every reply. The relay's messages mostly touch no database; the few that do go through
    database_sync_to_async, which closes them itself."""

    async def dispatch(self, message: dict[str, Any]) -> None:
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)


async def receive_patiently(layer: BaseChannelLayer, channel: str) -> dict[str, Any]:
    """The next message of ``channel``. A read that fails because Redis timed out or is restarting
    is tried again (the message waits in Redis meanwhile); logged once for each run of failures."""
    pause = RETRY_FIRST
    while True:
        try:
            return await layer.receive(channel)
        except LAYER_DOWN as exc:
            if pause == RETRY_FIRST:
                logger.warning("relay: reading channel %s failed (%r); trying again", channel, exc)
            await asyncio.sleep(pause)
            pause = min(pause * 2, RETRY_MAX)


class RelayConsumer(WithoutConnectionHop, AsyncWebsocketConsumer):
    holder: state.Holder | None = None
    closing = False  # once the LM closes the socket, nothing more is sent or read on it

    # Channels' AsyncConsumer sets ``channel_receive`` to the layer's receive of the consumer's
    # channel and reads it until the consumer stops: an exception there would end the consumer and
    # close the agent's socket. The consumer reads it through receive_patiently instead.
    @property
    def channel_receive(self) -> Callable[[], Awaitable[dict[str, Any]]]:
        return self._channel_receive

    @channel_receive.setter
    def channel_receive(self, _receive: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        self._channel_receive = functools.partial(receive_patiently, self.channel_layer, self.channel_name)

    async def connect(self) -> None:
        # socket id → (where the reply goes: a channel, or a future of this process; the caller's
        # id; when the caller stops waiting)
        self.pending: dict[int, tuple[ReplyTo, Any, float]] = {}
        self.late: dict[int, float] = {}  # ids whose caller gave up → when to forget them
        self.ids = itertools.count(1)
        self.frames = Bucket(f"relay:f:{next(_socket_numbers)}", settings.RELAY_FRAMES_PER_MINUTE, "frames")
        self.hello_timer: asyncio.TimerHandle | None = None
        address = (self.scope.get("client") or ("?",))[0]
        if _buckets.take([Bucket(f"relay:c:{address}", settings.RELAY_CONNECTS_PER_MINUTE, "address")]):
            await self.close(code=TOO_FAST)
            return
        await self.accept()
        token = _bearer(self.scope.get("headers") or [])
        if token:
            await self._authenticate(token)
        else:
            loop = asyncio.get_running_loop()
            self.hello_timer = loop.call_later(settings.RELAY_HELLO_TIMEOUT, self._hello_expired)

    def _hello_expired(self) -> None:
        if self.holder is None:
            asyncio.ensure_future(self._refuse(UNAUTHORIZED, "no auth_token received"))

    async def _refuse(self, code: int, reason: str) -> None:
        if self.closing:
            return
        self.closing = True
        await self._fail_pending()
        await self.send(text_data=dumps({"type": "error", "code": code, "reason": reason}).decode())
        await self.close(code=code, reason=reason[:120])

    async def _authenticate(self, token: str) -> None:
        if self.hello_timer is not None:
            self.hello_timer.cancel()
        found = await database_sync_to_async(state.authenticate)(token)
        if isinstance(found, str):
            await self._refuse(UNAUTHORIZED, found)
            return
        self.holder = found
        previous = await database_sync_to_async(state.connected)(found, self.channel_name)
        if previous:
            try:
                await self.channel_layer.send(previous, {"type": "relay.replaced"})
            except LAYER_ERRORS as exc:  # the older socket stays until it drops: calls come here now
                logger.warning("relay: could not tell %s it was replaced (%r)", previous, exc)
        hub.attach(found.league_id, found.player_id, self.channel_name, self)
        welcome = {"type": "welcome", "league_id": found.league_id, "player_id": found.player_id}
        await self.send(text_data=dumps({**welcome, "endpoint": found.endpoint}).decode())

    async def _register(self, request: dict[str, Any]) -> None:
        """Register the player on this socket: the reply goes back here, and once accepted the
        socket is the new player's relay connection (welcomed as if it had sent its token)."""
        if self.hello_timer is not None:
            self.hello_timer.cancel()
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in self.scope.get("headers") or []}
        client = (self.scope.get("client") or (None,))[0]
        registered = await registration.register(request, headers, client)
        await self.send(text_data=registered.response.decode())
        if registered.auth_token is None:
            await self._refuse(UNAUTHORIZED, "registration refused: see the reply")
            return
        await self._authenticate(registered.auth_token)

    async def disconnect(self, code: int) -> None:
        if self.hello_timer is not None:
            self.hello_timer.cancel()
        if self.holder is None:
            return
        hub.detach(self.holder.league_id, self.holder.player_id, self.channel_name)
        await self._fail_pending()
        await database_sync_to_async(state.disconnected)(self.holder, self.channel_name)

    async def _fail_pending(self) -> None:
        """The calls waiting on this socket get their answer now: the agent is gone."""
        pending, self.pending = self.pending, {}
        for reply_to, _, _ in pending.values():
            await self._answer(reply_to, 502, "the agent's connection to the relay closed")

    # -- from the agent -----------------------------------------------------------------------
    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.closing:
            return
        data = text_data if text_data is not None else bytes_data or b""
        if len(data) > settings.RELAY_MAX_MESSAGE_BYTES:
            await self._refuse(TOO_BIG, f"message larger than {settings.RELAY_MAX_MESSAGE_BYTES} bytes")
            return
        if _buckets.take([self.frames]):
            await self._refuse(TOO_FAST, f"more than {settings.RELAY_FRAMES_PER_MINUTE} messages a minute")
            return
        try:
            message = loads(data)
        except ValueError:
            await self._refuse(BAD_MESSAGE, "message is not JSON")
            return
        if self.holder is None:
            if registration.is_registration(message):
                await self._register(message)
                return
            token = message.get("auth_token") if isinstance(message, dict) else None
            if not isinstance(token, str) or not token:
                await self._refuse(
                    UNAUTHORIZED,
                    'first message must be {"auth_token": "<your auth_token>"} or a register_player request',
                )
                return
            await self._authenticate(token)
            return
        await self._reply(message)

    async def _reply(self, message: Any) -> None:
        """A JSON-RPC response from the agent: to the caller waiting for it, or the socket closes."""
        socket_id = message.get("id") if isinstance(message, dict) else None
        is_response = (
            isinstance(message, dict) and "method" not in message and ("result" in message or "error" in message)
        )
        if not is_response or isinstance(socket_id, bool) or not isinstance(socket_id, int):
            await self._refuse(BAD_MESSAGE, "expected a JSON-RPC response to a call sent on this socket")
            return
        entry = self.pending.pop(socket_id, None)
        if entry is None:
            if self.late.pop(socket_id, None) is not None:
                return  # its caller gave up: a late answer, not an unsolicited one
            await self._refuse(BAD_MESSAGE, f"no call with id {socket_id} is waiting for a reply")
            return
        reply_to, caller_id, expires = entry
        if expires < time.time():  # nobody waits for it any more
            return
        message["id"] = caller_id
        await self._answer(reply_to, 200, dumps(message))

    # -- from the relay endpoint (endpoint.py) ---------------------------------------------------
    async def relay_call(self, event: dict[str, Any]) -> None:
        """A call for the agent: {"body": JSON-RPC request (bytes), "reply_to": channel or future,
        "expires": epoch s}. From the channel layer, or called directly by the endpoint in this
        process (``endpoint.forward``), which gives the request already parsed ("request") instead
        of "body"."""
        if self.holder is None or self.closing:
            await self._answer(event["reply_to"], 502, "the agent's socket is closing")
            return
        self._forget_expired()
        if len(self.pending) >= settings.RELAY_MAX_IN_FLIGHT:
            await self._answer(event["reply_to"], 503, f"{settings.RELAY_MAX_IN_FLIGHT} calls already in flight")
            return
        request = dict(event["request"]) if "request" in event else loads(event["body"])
        if "id" not in request:  # a notification: delivered, nothing to wait for
            try:
                await self.send(text_data=dumps(request).decode())
            except OSError:
                await self._answer(event["reply_to"], 502, "the agent's connection to the relay closed")
                return
            await self._answer(event["reply_to"], 202, b"")
            return
        socket_id = next(self.ids)
        self.pending[socket_id] = (event["reply_to"], request["id"], float(event["expires"]))
        request["id"] = socket_id
        try:
            await self.send(text_data=dumps(request).decode())
        except OSError:  # the socket went away under us (uvicorn's ClientDisconnected)
            if self.pending.pop(socket_id, None) is not None:
                await self._answer(event["reply_to"], 502, "the agent's connection to the relay closed")

    async def relay_replaced(self, event: dict[str, Any]) -> None:
        await self._refuse(REPLACED, "the same player connected again")

    def _forget_expired(self) -> None:
        """Calls whose callers have given up: their ids stay known a while, for late answers."""
        now = time.time()
        for socket_id in [k for k, (_, _, expires) in self.pending.items() if expires < now]:
            del self.pending[socket_id]
            self.late[socket_id] = now + LATE_GRACE
        for socket_id in [k for k, until in self.late.items() if until < now]:
            del self.late[socket_id]

    async def _answer(self, reply_to: ReplyTo, status: int, body: bytes | str) -> None:
        body = body.encode() if isinstance(body, str) else body
        if isinstance(reply_to, asyncio.Future):
            if not reply_to.done():  # (a caller that hung up cancelled it)
                reply_to.set_result({"status": status, "body": body})
            return
        try:
            await self.channel_layer.send(reply_to, {"type": "relay.reply", "status": status, "body": body})
        except LAYER_ERRORS as exc:
            # That one call fails: its caller waits to its deadline, as for an agent that does not
            # answer. The socket and the other calls on it go on.
            logger.warning("relay: the reply (%d) to %s could not be sent (%r)", status, reply_to, exc)


def _bearer(headers: list[tuple[bytes, bytes]]) -> str | None:
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    return None
