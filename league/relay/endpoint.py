"""``POST /relay/<league_id>/<player_id>/mcp``: the endpoint the LM assigns to a relay player.

Referees and the conductor call it like any player's endpoint. A Channels HTTP consumer
(``RelayHttpConsumer``, routed in leaguesite/asgi.py beside Django; the route says why it is not
a Django view). It refuses what Django would: a Host not in ALLOWED_HOSTS (400), a method other
than POST (405), a body over ``RELAY_MAX_MESSAGE_BYTES`` (413), and answers with the security
headers Django's middleware adds (``security_headers``).

The call goes to the consumer holding the player's socket (straight to it in this process, or,
with Redis, through the channel layer to any LM process) and its reply comes back the same way.
The caller's deadline holds: the endpoint waits at most ``X-Relay-Timeout`` seconds (else
``RELAY_CALL_TIMEOUT``), and stops waiting when the caller hangs up.
A call to an agent that is not connected waits for it to reconnect (``RELAY_RECONNECT_WAIT``, by
default the whole call: to its caller the agent is as a host that does not answer, so the
caller's own timeout, retries, technical losses and unreachable marking apply); one whose socket
drops before the reply is sent again on the socket that replaces it. When the wait is shorter
than the call the answer is 502, a 5xx without a JSON-RPC body (a failed call).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from channels.exceptions import ChannelFull, StopConsumer
from channels.generic.http import AsyncHttpConsumer
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings

from league.relay import host_allowed, hub, state
from league.relay.consumer import LAYER_DOWN, WithoutConnectionHop, receive_patiently
from leagueproto.jsonutil import dumps, loads

# The status a consumer answers a call with when its socket closes before the reply.
DROPPED = 502
# How often a call waiting for an agent to reconnect looks again.
RECONNECT_POLL = 0.1
# How long this process trusts the database's word on which channel holds a socket of another
# LM process (Redis). A call to such a player would otherwise cost a query; a channel gone stale
# in that second (the socket moved) costs its call one retry, and a socket that drops is looked
# up afresh at once.
REMOTE_CHANNEL_LIFE = 1.0

TEXT = b"text/plain; charset=utf-8"
JSON = b"application/json"

logger = logging.getLogger("django.security.DisallowedHost")


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    content_type: bytes = TEXT


def _rpc_error(code: int, message: str) -> Answer:
    body = dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}})
    return Answer(400, body, JSON)


def call_timeout(value: str | None) -> float:
    """The seconds a caller gives its call: its ``X-Relay-Timeout`` header, else the setting."""
    try:
        seconds = float(value) if value else 0.0
    except ValueError:
        seconds = 0.0
    return min(seconds, 600.0) if seconds > 0 else float(settings.RELAY_CALL_TIMEOUT)


def security_headers() -> list[tuple[bytes, bytes]]:
    """The headers Django's SecurityMiddleware and XFrameOptionsMiddleware put on every response
    of the site, from the same settings: the relay endpoint is served beside Django, not through
    it, and must not answer with less. (Django's Content-Security-Policy and HSTS are left out:
    they govern what a browser loads into a page and over which scheme it comes back, and this
    endpoint answers programs with JSON or a line of text.)"""
    headers = []
    if settings.SECURE_CONTENT_TYPE_NOSNIFF:
        headers.append((b"x-content-type-options", b"nosniff"))
    if settings.X_FRAME_OPTIONS:
        headers.append((b"x-frame-options", settings.X_FRAME_OPTIONS.upper().encode()))
    policy = settings.SECURE_REFERRER_POLICY
    if policy:
        value = policy if isinstance(policy, str) else ",".join(policy)
        headers.append((b"referrer-policy", value.encode()))
    if settings.SECURE_CROSS_ORIGIN_OPENER_POLICY:
        headers.append((b"cross-origin-opener-policy", settings.SECURE_CROSS_ORIGIN_OPENER_POLICY.encode()))
    return headers


async def forward(league_id: str, player_id: str, body: bytes, timeout: float) -> Answer:
    """Relay one JSON-RPC request to the player's socket; its reply, or why there is none."""
    if len(body) > settings.RELAY_MAX_MESSAGE_BYTES:
        return Answer(413, f"request body larger than {settings.RELAY_MAX_MESSAGE_BYTES} bytes".encode())
    try:
        request = loads(body)
    except ValueError:
        return _rpc_error(-32700, "Parse error: the body is not JSON")
    if not isinstance(request, dict) or not isinstance(request.get("method"), str):
        return _rpc_error(-32600, "Invalid Request: one JSON-RPC request object (batches are not relayed)")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        wait_until = min(deadline, loop.time() + settings.RELAY_RECONNECT_WAIT)
        channel = await _socket_of(league_id, player_id, wait_until)
        if channel is None:
            return Answer(404, f"no relay player {player_id} in league {league_id}".encode())
        if not channel:
            return Answer(502, f"player {player_id} is not connected to the relay".encode())
        expires = time.time() + (deadline - loop.time())
        consumer = hub.local_consumer(channel)
        try:
            async with asyncio.timeout_at(deadline):
                if consumer is not None:
                    # The socket is this process's: straight to its consumer with the request as
                    # parsed here, no channel-layer trip and no second parse.
                    answered = loop.create_future()
                    await consumer.relay_call({"request": request, "reply_to": answered, "expires": expires})
                    reply = await answered
                else:
                    reply = await _through_layer(channel, body, expires)
        except TimeoutError:
            hub.forget_remote(league_id, player_id)
            return Answer(504, f"player {player_id} did not answer within {timeout:g} s".encode())
        if reply is None or reply["status"] != DROPPED or loop.time() >= deadline:
            break
        # The socket dropped with the call in flight: send it again on the socket that replaces it
        # (what a caller's retry would do, within the same deadline), once that one is there.
        hub.forget_remote(league_id, player_id)
        await asyncio.sleep(RECONNECT_POLL)
    if reply is None:
        return Answer(503, f"player {player_id} has too many calls waiting".encode())
    if reply["status"] == 200:
        return Answer(200, reply["body"], JSON)
    return Answer(reply["status"], reply["body"])


async def _through_layer(channel: str, body: bytes, expires: float) -> dict[str, Any] | None:
    """Send the call to the consumer of ``channel`` (any LM process) and wait for its reply; None
    when the consumer's queue is full (it is that far behind: as busy as too many calls)."""
    layer = get_channel_layer()
    # Named as Channels names the consumers' own channels (no prefix of the relay's): channels_redis
    # reads all the channels of a process that share a prefix from one Redis list, one list at a
    # time, so a reply on a list of its own would wait while the process reads its sockets' list
    # (until the next call for them), and a call for its sockets while it waits for a reply.
    reply_to = await layer.new_channel()
    try:
        await layer.send(channel, {"type": "relay.call", "body": body, "reply_to": reply_to, "expires": expires})
    except ChannelFull:
        return None
    except LAYER_DOWN as exc:
        return {"status": 503, "body": f"the relay could not reach the agent's socket: {exc!r}".encode()}
    return await receive_patiently(layer, reply_to)


_target = database_sync_to_async(state.target)


async def _socket_of(league_id: str, player_id: str, wait_until: float) -> str | None:
    """The channel of the player's socket; "" when it is not connected (after waiting until
    ``wait_until`` for it to come back); None when there is no such relay player."""
    loop = asyncio.get_running_loop()
    # With the in-memory layer only this process's sockets can be reached; with a shared layer
    # (Redis) the database names the socket of any LM process.
    shared = not isinstance(get_channel_layer(), InMemoryChannelLayer)
    known = False
    while True:
        channel = hub.local_channel(league_id, player_id)
        if channel:
            return channel
        if shared:
            remote = hub.remote_channel(league_id, player_id, loop.time())
            if remote:
                return remote
        if shared or not known:
            target = await _target(league_id, player_id)
            if target is None or not target.relay:
                return None
            known = True
            if shared and target.channel:
                hub.remember_remote(league_id, player_id, target.channel, loop.time() + REMOTE_CHANNEL_LIFE)
                return target.channel
        if loop.time() >= wait_until:
            return ""
        await asyncio.sleep(RECONNECT_POLL)


class RelayHttpConsumer(WithoutConnectionHop, AsyncHttpConsumer):
    """One call to a relay endpoint: refused as Django would refuse it, else forwarded (above)."""

    # No channel-layer channel of its own: AsyncConsumer would make one and a task reading it for
    # every request (0.64-0.69 against 0.76-0.85 ms of LM CPU a call, measured on a shared, loaded
    # machine). A call to another process's socket uses get_channel_layer() (_through_layer).
    channel_layer_alias = None

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[Any]], send: Any) -> None:
        # Channels reads the next client event only once a handler returns; while ``handle``
        # waits for the agent, it reads it itself to learn that the caller hung up.
        self.client_events = receive
        await super().__call__(scope, receive, send)

    async def http_request(self, message: dict[str, Any]) -> None:
        if not self.body:  # the request's head: refused before its body is read, as Django would
            refused = self.refusal()
            if refused is not None:
                await self.reply(refused)
                raise StopConsumer()
        await super().http_request(message)

    def header(self, name: bytes) -> str | None:
        for key, value in self.scope["headers"]:
            if key == name:  # (ASGI gives header names in lower case)
                return value.decode("latin-1")
        return None

    def host(self) -> str | None:
        """The request's host as Django's ``HttpRequest.get_host`` reads it (before checking it)."""
        forwarded = self.header(b"x-forwarded-host") if settings.USE_X_FORWARDED_HOST else None
        if forwarded is not None:
            return forwarded
        host = self.header(b"host")
        if host is None and self.scope.get("server"):  # no Host header: the server's name and port
            name, port = self.scope["server"]
            default = 443 if self.scope.get("scheme") == "https" else 80
            host = name if port == default else f"{name}:{port}"
        return host

    def refusal(self) -> Answer | None:
        host = self.host()
        if not host_allowed(host):
            logger.error("Invalid HTTP_HOST header: %r. You may need to add it to ALLOWED_HOSTS.", host)
            return Answer(400, b"Bad Request (400)")
        if self.scope["method"] != "POST":
            return Answer(405, b"the relay endpoint takes POST (JSON-RPC)")
        declared = self.header(b"content-length") or ""
        if declared.isdigit() and int(declared) > settings.RELAY_MAX_MESSAGE_BYTES:
            return Answer(413, f"request body larger than {settings.RELAY_MAX_MESSAGE_BYTES} bytes".encode())
        return None

    async def handle(self, body: bytes) -> None:
        route = self.scope["url_route"]["kwargs"]
        timeout = call_timeout(self.header(b"x-relay-timeout"))
        call = asyncio.ensure_future(forward(route["league_id"], route["player_id"], body, timeout))
        hangup = asyncio.ensure_future(self.client_events())  # http.disconnect: the caller is gone
        try:
            await asyncio.wait((call, hangup), return_when=asyncio.FIRST_COMPLETED)
        finally:
            hangup.cancel()
            hung_up = not call.done()
            if hung_up:
                call.cancel()  # its call waits for the agent no more
        if not hung_up:
            await self.reply(call.result())

    async def reply(self, answer: Answer) -> None:
        headers = [(b"content-type", answer.content_type), (b"content-length", b"%d" % len(answer.body))]
        if answer.status == 405:
            headers.append((b"allow", b"POST"))
        await self.send_response(answer.status, answer.body, headers=headers + security_headers())
