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

A socket holds at most ``RELAY_MAX_IN_FLIGHT`` calls at once, and one caller (a token from one
address, endpoint.py) at most its share of them (``caller_share``): one caller cannot take all
the player's places from the others. A call whose caller hangs up gives its place back at once.

Calls from another LM process come over the channel layer, to a channel the consumer reads
itself (``read_calls``), so that a read that fails while Redis restarts is tried again instead
of ending the consumer and the agent's socket with it.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import time
from typing import Any

from channels.db import database_sync_to_async
from channels.exceptions import ChannelFull
from channels.layers import BaseChannelLayer
from django.conf import settings

from league.ratelimit import Bucket, LocalBuckets
from league.relay import hub, registration, state
from league.relay.layer import LAYER_DOWN, announce, receive_patiently, relay_layer
from league.sitechecks import head_of, host_refused
from leagueproto import jsonrpc
from leagueproto.jsonutil import dumps, loads

# Where a call's answer goes: another process's reply channel and the call's key there
# (league/relay/layer.py), or a future of this process.
ReplyTo = tuple[str, str] | asyncio.Future

# Close codes (4000-4999 are the application's): the agent's client reports them.
BAD_MESSAGE = 4400  # not JSON, or not a reply to a call in flight
UNAUTHORIZED = 4401  # no token in time, or a token the LM refuses
REPLACED = 4409  # the same player connected again elsewhere
TOO_FAST = 4429  # over the frame or connection rate
TOO_BIG = 1009  # the WebSocket code for a message too big
# One caller's share of a socket's calls in flight: this fraction of RELAY_MAX_IN_FLIGHT.
CALLER_SHARE = 4
# A reply that comes after its caller gave up is dropped quietly for this long, not an error.
LATE_GRACE = 60.0
# What the channel layer may raise when Redis times out or restarts, and when a send finds its
# channel full: the call it carried fails, not the consumer (and the agent's socket with it).
LAYER_ERRORS = (ChannelFull, *LAYER_DOWN)

logger = logging.getLogger("league.relay")

_buckets = LocalBuckets()
_socket_numbers = itertools.count(1)


def caller_share() -> int:
    """How many of a socket's calls in flight one caller may hold."""
    return max(1, settings.RELAY_MAX_IN_FLIGHT // CALLER_SHARE)


class AgentSocket:
    """One WebSocket as the ASGI server hands it over: its events to ``connect``, ``receive`` and
    ``disconnect``, one at a time, and ``accept``, ``send`` and ``close`` back.

    Not a Channels consumer: a consumer closes the thread's old database connections before every
    event, a hop to a worker thread for each frame an agent sends (each reply it relays). The
    socket reaches the database only through ``database_sync_to_async``, which does that itself."""

    def __init__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.scope = scope
        self._receive = receive
        self._send = send

    @classmethod
    def as_asgi(cls) -> Any:
        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            await cls(scope, receive, send).run()

        return app

    async def run(self) -> None:
        while True:
            event = await self._receive()
            kind = event["type"]
            if kind == "websocket.connect":
                await self.connect()
            elif kind == "websocket.receive":
                await self.receive(text_data=event.get("text"), bytes_data=event.get("bytes"))
            elif kind == "websocket.disconnect":
                await self.disconnect(event.get("code", 1000))
                return

    async def accept(self) -> None:
        await self._send({"type": "websocket.accept"})

    async def send(self, text_data: str) -> None:
        await self._send({"type": "websocket.send", "text": text_data})

    async def close(self, code: int | None = None, reason: str | None = None) -> None:
        """Close the socket (before ``accept``: refuse the handshake, a 403)."""
        message: dict[str, Any] = {"type": "websocket.close"}
        if code is not None:
            message["code"] = code
        if reason:
            message["reason"] = reason
        await self._send(message)

    async def connect(self) -> None:
        await self.accept()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        pass

    async def disconnect(self, code: int) -> None:
        pass


class RelayConsumer(AgentSocket):
    holder: state.Holder | None = None
    closing = False  # once the LM closes the socket, nothing more is sent or read on it
    layer: BaseChannelLayer | None = None
    reader: asyncio.Future[None] | None = None
    hello_timer: asyncio.TimerHandle | None = None

    async def connect(self) -> None:
        # socket id → (where the reply goes: a channel, or a future of this process; the caller's
        # id; when the caller stops waiting; who calls)
        self.pending: dict[int, tuple[ReplyTo, Any, float, str]] = {}
        self.late: dict[int, float] = {}  # ids whose caller gave up → when to forget them
        self.ids = itertools.count(1)
        self.frames = Bucket(f"relay:f:{next(_socket_numbers)}", settings.RELAY_FRAMES_PER_MINUTE, "frames")
        problem = host_refused(head_of(self.scope))
        if problem:  # a Host Django refuses is refused here too (the handshake's answer is 403)
            logging.getLogger("django.security.DisallowedHost").error(problem)
            await self.close()
            return
        address = (self.scope.get("client") or ("?",))[0]
        if _buckets.take([Bucket(f"relay:c:{address}", settings.RELAY_CONNECTS_PER_MINUTE, "address")]):
            await self.close(code=TOO_FAST)
            return
        self.layer = relay_layer()
        self.socket_channel = await self.layer.new_channel() if self.layer is not None else f"local.{id(self)}"
        if self.layer is not None:
            self.reader = asyncio.ensure_future(self.read_calls(self.layer))
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
        previous = await database_sync_to_async(state.connected)(found, self.socket_channel)
        if previous:
            older = hub.local_consumer(previous)
            try:
                if older is not None:
                    await older.relay_replaced({"type": "relay.replaced"})
                elif self.layer is not None:
                    await self.layer.send(previous, {"type": "relay.replaced"})
            except LAYER_ERRORS as exc:  # the older socket stays until it drops: calls come here now
                logger.warning("relay: could not tell %s it was replaced (%r)", previous, exc)
        hub.attach(found.league_id, found.player_id, self.socket_channel, self)
        if self.layer is not None:
            await announce(self.layer, found.league_id, found.player_id, self.socket_channel, opened=True)
        welcome = {"type": "welcome", "league_id": found.league_id, "player_id": found.player_id}
        await self.send(text_data=dumps({**welcome, "endpoint": found.endpoint}).decode())

    async def _register(self, request: dict[str, Any]) -> None:
        """Register the player on this socket: the reply goes back here, and once accepted the
        socket is the new player's relay connection (welcomed as if it had sent its token)."""
        if self.hello_timer is not None:
            self.hello_timer.cancel()
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in self.scope.get("headers") or []}
        client = (self.scope.get("client") or (None,))[0]
        port = (self.scope.get("server") or (None, None))[1]
        registered = await registration.register(request, headers, client, port)
        await self.send(text_data=registered.response.decode())
        if registered.auth_token is None:
            await self._refuse(UNAUTHORIZED, "registration refused: see the reply")
            return
        await self._authenticate(registered.auth_token)

    async def disconnect(self, code: int) -> None:
        if self.hello_timer is not None:
            self.hello_timer.cancel()
        if self.reader is not None:
            self.reader.cancel()
        if self.holder is None:
            return
        hub.detach(self.holder.league_id, self.holder.player_id, self.socket_channel)
        await self._fail_pending()
        await database_sync_to_async(state.disconnected)(self.holder, self.socket_channel)
        if self.layer is not None:
            await announce(self.layer, self.holder.league_id, self.holder.player_id, self.socket_channel, opened=False)

    async def read_calls(self, layer: BaseChannelLayer) -> None:
        """Calls from other LM processes (and the news that this socket was replaced), read from
        the consumer's channel until it closes; a failed read is tried again (receive_patiently)."""
        handlers = {
            "relay.call": self.relay_call,
            "relay.replaced": self.relay_replaced,
            "relay.cancel": self.relay_cancel,
        }
        while True:
            message = await receive_patiently(layer, self.socket_channel)
            handler = handlers.get(message.get("type"))
            if handler is None:
                logger.warning("relay: %s got a message of no known type: %r", self.socket_channel, message.get("type"))
                continue
            try:
                await handler(message)
            except Exception:  # one message's bug: the socket goes on with the next
                logger.exception("relay: handling %s on %s failed", message.get("type"), self.socket_channel)

    async def _fail_pending(self) -> None:
        """The calls waiting on this socket get their answer now: the agent is gone."""
        pending, self.pending = self.pending, {}
        for reply_to, _, _, _ in pending.values():
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
        if is_response and socket_id is None and "error" in message:
            # A JSON-RPC server answers id null to what it could not read: no call of ours to
            # answer, and no reason to drop the agent's socket (and every call on it) for it.
            logger.info("relay: %s answered an error with no id: %r", self.holder, message.get("error"))
            return
        if not is_response or isinstance(socket_id, bool) or not isinstance(socket_id, int):
            await self._refuse(BAD_MESSAGE, "expected a JSON-RPC response to a call sent on this socket")
            return
        entry = self.pending.pop(socket_id, None)
        if entry is None:
            if self.late.pop(socket_id, None) is not None:
                return  # its caller gave up: a late answer, not an unsolicited one
            await self._refuse(BAD_MESSAGE, f"no call with id {socket_id} is waiting for a reply")
            return
        reply_to, caller_id, expires, _ = entry
        if expires < time.time():  # nobody waits for it any more
            return
        message["id"] = caller_id
        await self._answer(reply_to, 200, dumps(message), json=True)

    # -- from the relay endpoint (endpoint.py) ---------------------------------------------------
    async def relay_call(self, event: dict[str, Any]) -> None:
        """A call for the agent: {"body": JSON-RPC request (bytes), "reply_to": channel or future,
        "call": its key on that channel, "expires": epoch s, "caller": who calls}. From the
        channel layer, or called directly by the endpoint in this process (``endpoint.forward``),
        which gives the request already parsed ("request") instead of "body". The endpoint
        checked its shape and its caller."""
        reply_to = _reply_to(event)
        if self.holder is None or self.closing:
            await self._answer(reply_to, 502, "the agent's socket is closing")
            return
        self._forget_expired()
        if len(self.pending) >= settings.RELAY_MAX_IN_FLIGHT:
            await self._answer(reply_to, 503, f"{settings.RELAY_MAX_IN_FLIGHT} calls already in flight")
            return
        caller = str(event.get("caller", ""))
        share = caller_share()
        if sum(1 for entry in self.pending.values() if entry[3] == caller) >= share:
            await self._answer(reply_to, 503, f"this caller already has {share} calls in flight to this player")
            return
        request = dict(event["request"]) if "request" in event else loads(event["body"])
        notification = "id" not in request
        socket_id = next(self.ids)
        caller_id = request.get("id")
        if not notification:
            request["id"] = socket_id
        try:
            text = dumps(request).decode()
        except TypeError as exc:  # e.g. nested deeper than the encoder goes: not sent, no place held
            error = jsonrpc.error_response(caller_id, jsonrpc.INVALID_REQUEST, f"Invalid Request: {exc}")
            await self._answer(reply_to, 400, dumps(error), json=True)
            return
        if not notification:
            self.pending[socket_id] = (reply_to, caller_id, float(event["expires"]), caller)
            if isinstance(reply_to, asyncio.Future):
                reply_to.add_done_callback(functools.partial(self._given_up, socket_id))
        try:
            await self.send(text_data=text)
        except OSError:  # the socket went away under us (uvicorn's ClientDisconnected)
            if notification or self.pending.pop(socket_id, None) is not None:
                await self._answer(reply_to, 502, "the agent's connection to the relay closed")
            return
        if notification:  # delivered, nothing to wait for
            await self._answer(reply_to, 202, b"")

    def _given_up(self, socket_id: int, answered: asyncio.Future) -> None:
        """The caller of a call in this process stopped waiting (it hung up): its place is free,
        and its id stays known a while, for the agent's late answer."""
        if answered.cancelled() and self.pending.pop(socket_id, None) is not None:
            self.late[socket_id] = time.time() + LATE_GRACE

    async def relay_cancel(self, event: dict[str, Any]) -> None:
        """The caller of a call from another process hung up: its place is free (its id stays
        known a while, for the agent's late answer)."""
        gone = _reply_to(event)
        for socket_id, entry in list(self.pending.items()):
            if entry[0] == gone:
                del self.pending[socket_id]
                self.late[socket_id] = time.time() + LATE_GRACE

    async def relay_replaced(self, event: dict[str, Any]) -> None:
        await self._refuse(REPLACED, "the same player connected again")

    def _forget_expired(self) -> None:
        """Calls whose callers have given up: their ids stay known a while, for late answers."""
        now = time.time()
        for socket_id in [k for k, entry in self.pending.items() if entry[2] < now]:
            del self.pending[socket_id]
            self.late[socket_id] = now + LATE_GRACE
        for socket_id in [k for k, until in self.late.items() if until < now]:
            del self.late[socket_id]

    async def _answer(self, reply_to: ReplyTo, status: int, body: bytes | str, *, json: bool = False) -> None:
        body = body.encode() if isinstance(body, str) else body
        reply = {"status": status, "body": body, "json": json}
        if isinstance(reply_to, asyncio.Future):
            if not reply_to.done():  # (a caller that hung up cancelled it)
                reply_to.set_result(reply)
            return
        try:
            if self.layer is None:
                raise ChannelFull()  # (no layer: no other process could have sent the call)
            channel, key = reply_to
            await self.layer.send(channel, {"type": "relay.reply", "call": key, **reply})
        except LAYER_ERRORS as exc:
            # That one call fails: its caller waits to its deadline, as for an agent that does not
            # answer. The socket and the other calls on it go on.
            logger.warning("relay: the reply (%d) to %s could not be sent (%r)", status, reply_to[0], exc)


def _reply_to(event: dict[str, Any]) -> ReplyTo:
    reply_to = event["reply_to"]
    return reply_to if isinstance(reply_to, asyncio.Future) else (reply_to, str(event.get("call", "")))


def _bearer(headers: list[tuple[bytes, bytes]]) -> str | None:
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    return None
