"""``POST /relay/<league_id>/<player_id>/mcp``: the endpoint the LM assigns to a relay player.

Referees and the conductor call it like any player's endpoint. An ASGI application
(``RelayEndpoint``), routed in leaguesite/asgi.py beside Django (the route says why it is not a
Django view). Django judges what Django would
(league/sitechecks.py): a Host it refuses is 400, and every answer carries the headers of Django's security
middleware. Besides: a browser's Origin not of this site is 403, a method other than POST 405,
a body over ``largest_call()`` 413, all before the body is read.

Then the call: what is not one JSON-RPC 2.0 request object is answered a JSON-RPC error; a call
without the League Manager's or the match's token for that player (callers.py) is 403. Neither
reaches the player's socket. The rest goes to the consumer holding the socket (straight to it in
this process, or, with Redis, through the channel layer to any LM process) and its reply comes
back the same way.

The caller's deadline holds: the endpoint waits at most ``X-Relay-Timeout`` seconds (else
``RELAY_CALL_TIMEOUT``), and stops waiting, freeing the call's place, when the caller hangs up.
A call to an agent that is not connected waits for it to reconnect (``RELAY_RECONNECT_WAIT``, by
default the whole call: to its caller the agent is as a host that does not answer, so the
caller's own timeout, retries, technical losses and unreachable marking apply); one whose socket
drops before the reply is sent again on the socket that replaces it. When the wait is shorter
than the call the answer is 502, a 5xx without a JSON-RPC body (a failed call).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from dataclasses import dataclass
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import BaseChannelLayer, InMemoryChannelLayer
from django.conf import settings

from league.mcp.database import page_read
from league.relay import callers, hub, state
from league.relay.layer import LAYER_DOWN, REMOTE_CHANNEL_LIFE, relay_layer
from league.relay.layer import replies as layer_replies
from league.sitechecks import TEXT, Head, head_of, host_answer, origin_refused, send_response
from leagueproto import jsonrpc
from leagueproto.jsonutil import dumps, loads
from leagueproto.server import DEFAULT_MAX_BODY

# The status a consumer answers a call with when its socket closes before the reply.
DROPPED = 502
# How often a call waiting for an agent to reconnect looks again.
RECONNECT_POLL = 0.1

JSON = "application/json"

logger = logging.getLogger("league.relay")


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    content_type: str = TEXT


def rpc_error(status: int, code: int, message: str, rid: Any = None) -> Answer:
    return Answer(status, dumps(jsonrpc.error_response(rid, code, message)), JSON)


def call_timeout(value: str | None) -> float:
    """The seconds a caller gives its call: its ``X-Relay-Timeout`` header, else the setting."""
    try:
        seconds = float(value) if value else 0.0
    except ValueError:
        seconds = 0.0
    return min(seconds, 600.0) if seconds > 0 else float(settings.RELAY_CALL_TIMEOUT)


def request_problem(call: Any) -> str | None:
    """Why ``call`` is not one JSON-RPC 2.0 request the relay passes on, or None."""
    if not isinstance(call, dict):
        return "Invalid Request: one JSON-RPC request object (batches are not relayed)"
    if call.get("jsonrpc") != "2.0":
        return 'Invalid Request: "jsonrpc" must be "2.0"'
    method = call.get("method")
    if not isinstance(method, str) or not method:
        return 'Invalid Request: "method" must be a non-empty string'
    rid = call.get("id")
    if isinstance(rid, bool) or not isinstance(rid, str | int | None):
        return 'Invalid Request: "id" must be a string, an integer or null'
    if "params" in call and not isinstance(call["params"], dict | list):
        return 'Invalid Request: "params" must be an object or an array'
    return None


async def relayed(league_id: str, player_id: str, body: bytes, head: Head) -> Answer:
    """One call to a relay endpoint, its body read: checked (shape, caller), then forwarded."""
    try:
        call = loads(body)
    except ValueError:
        return rpc_error(400, jsonrpc.PARSE_ERROR, "Parse error: the body is not JSON")
    problem = request_problem(call)
    if problem:
        return rpc_error(400, jsonrpc.INVALID_REQUEST, problem)
    scheme, _, bearer = (head.header("Authorization") or "").partition(" ")
    token = callers.presented_token(call, bearer.strip() if scheme.lower() == "bearer" else None)
    caller = await callers.caller_of(league_id, player_id, token)
    if caller is None:
        return Answer(404, f"no relay player {player_id} in league {league_id}".encode())
    if not caller:
        refusal = "the relay passes on calls of the League Manager and of the player's referees only (auth_token)"
        return rpc_error(403, jsonrpc.INVALID_REQUEST, refusal, call.get("id"))
    # A caller's share of the player's calls in flight is counted per token and address.
    who = f"{caller}@{head.meta.get('REMOTE_ADDR', '')}"
    return await forward(league_id, player_id, call, body, call_timeout(head.header("X-Relay-Timeout")), who)


async def forward(
    league_id: str, player_id: str, call: dict[str, Any], body: bytes, timeout: float, caller: str
) -> Answer:
    """Relay one checked JSON-RPC request to the player's socket; its reply, or why there is none."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    dropped = ""  # the channel of a socket that dropped under this call
    while True:
        wait_until = min(deadline, loop.time() + settings.RELAY_RECONNECT_WAIT)
        channel = await _socket_of(league_id, player_id, wait_until, dropped)
        if channel is None:
            return Answer(404, f"no relay player {player_id} in league {league_id}".encode())
        if not channel:
            return Answer(502, f"player {player_id} is not connected to the relay".encode())
        expires = time.time() + (deadline - loop.time())
        consumer = hub.local_consumer(channel)
        event = {"type": "relay.call", "expires": expires, "caller": caller}
        try:
            async with asyncio.timeout_at(deadline):
                if consumer is not None:
                    # The socket is this process's: straight to its consumer with the request as
                    # parsed here, no channel-layer trip and no second parse.
                    answered = loop.create_future()
                    await consumer.relay_call({**event, "request": call, "reply_to": answered})
                    reply = await answered
                else:
                    reply = await _through_layer(channel, {**event, "body": body})
        except TimeoutError:
            hub.forget_remote(league_id, player_id)
            return Answer(504, f"player {player_id} did not answer within {timeout:g} s".encode())
        if reply is None or reply["status"] != DROPPED or loop.time() >= deadline:
            break
        # The socket dropped with the call in flight: send it again on the socket that replaces it
        # (what a caller's retry would do, within the same deadline), once that one is there.
        hub.forget_remote(league_id, player_id)
        dropped = channel
        await asyncio.sleep(RECONNECT_POLL)
    if reply is None:
        return Answer(503, f"player {player_id} has too many calls waiting".encode())
    return Answer(reply["status"], reply["body"], JSON if reply.get("json") else TEXT)


async def _through_layer(channel: str, event: dict[str, Any]) -> dict[str, Any] | None:
    """Send the call to the consumer of ``channel`` (any LM process) and wait for its reply; None
    when the consumer's queue is full (a layer with a capacity, as channels_redis's list layer:
    that far behind, it is as busy as too many calls)."""
    layer = relay_layer()
    try:
        replies = layer_replies(layer)
        reply_to = await replies.open()
    except LAYER_DOWN as exc:
        return {"status": 503, "body": f"the relay could not open its reply channel: {exc!r}".encode()}
    key, reply = replies.expect()
    try:
        try:
            await layer.send(channel, {**event, "reply_to": reply_to, "call": key})
        except ChannelFull:
            return None
        except LAYER_DOWN as exc:
            return {"status": 503, "body": f"the relay could not reach the agent's socket: {exc!r}".encode()}
        try:
            return await reply
        except asyncio.CancelledError:
            # The caller hung up: the consumer gives the call's place back (best effort: a layer
            # that fails now leaves it taken until the call's deadline, within its caller's share).
            try:
                await layer.send(channel, {"type": "relay.cancel", "reply_to": reply_to, "call": key})
            except (ChannelFull, *LAYER_DOWN):
                pass
            raise
    finally:
        replies.forget(key)


async def _target(league_id: str, player_id: str) -> state.Target | None:
    # On the LM's reading threads, which keep their connections: with several LM processes a call
    # to another process's socket looks its channel up (every REMOTE_CHANNEL_LIFE per player),
    # and a thread of Django's own per look-up opened a connection to PostgreSQL each time.
    return await page_read(state.target, league_id, player_id)


async def _hearing_sockets(layer: BaseChannelLayer) -> None:
    """This process hears where other processes' sockets open and close (league/relay/layer.py)
    before it keeps a channel read of the database; a layer that is down leaves it to
    ``REMOTE_CHANNEL_LIFE``."""
    try:
        await layer_replies(layer).open()
    except LAYER_DOWN:
        pass  # the call's own send opens it again, and answers 503 with the reason if it fails


async def _socket_of(league_id: str, player_id: str, wait_until: float, dropped: str = "") -> str | None:
    """The channel of the player's socket; "" when it is not connected (after waiting until
    ``wait_until`` for it to come back); None when there is no such relay player."""
    loop = asyncio.get_running_loop()
    # With the in-memory layer only this process's sockets can be reached; with a shared layer
    # (Redis) the database names the socket of any LM process.
    layer = relay_layer()
    shared = not isinstance(layer, InMemoryChannelLayer)
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
            if shared:
                await _hearing_sockets(layer)
            target = await _target(league_id, player_id)
            if target is None or not target.relay:
                return None
            known = True
            # A socket that dropped (under this call, or here) may still be named until its
            # closing is recorded: no one reads its channel, so the call waits for the socket
            # that replaces it.
            stale = target.channel == dropped or hub.closed_here(target.channel)
            if shared and target.channel and not stale:
                hub.remember_remote(league_id, player_id, target.channel, loop.time() + REMOTE_CHANNEL_LIFE)
                return target.channel
        if loop.time() >= wait_until:
            return ""
        await asyncio.sleep(RECONNECT_POLL)


def refusal(head: Head) -> Answer | None:
    """What is refused from the request's head alone (after its Host), before its body is read."""
    problem = origin_refused(head)
    if problem:
        return rpc_error(403, jsonrpc.INVALID_REQUEST, problem)
    if head.method != "POST":
        return Answer(405, b"the relay endpoint takes POST (JSON-RPC)")
    declared = head.meta.get("CONTENT_LENGTH", "")
    if declared.isdigit() and int(declared) > largest_call():
        return too_large()
    return None


def largest_call() -> int:
    """The largest call relayed: ``RELAY_MAX_MESSAGE_BYTES``, and no more than an agent's server
    takes (leagueproto/server.py): a player refusing a larger body answers without the call's id,
    so its refusal could never be matched to the call, whose caller would wait out its timeout."""
    return min(settings.RELAY_MAX_MESSAGE_BYTES, DEFAULT_MAX_BODY)


def too_large() -> Answer:
    limit = largest_call()
    return rpc_error(413, jsonrpc.INVALID_REQUEST, f"Request body larger than {limit} bytes")


class RelayEndpoint:
    """The relay endpoint as an ASGI application (the interface Channels' ``URLRouter`` routes to,
    with ``url_route`` in the scope): its head checked before the body is read, its body relayed
    in a task of its own once whole, while the ``http.disconnect`` of a caller that hangs up is
    read meanwhile and stops it.

    Not a Channels consumer: a consumer closes the thread's old database connections before each
    event it dispatches, a hop to a worker thread three times per relayed call, and this endpoint
    touches the database only on threads that manage their connections themselves (the LM's
    reading threads; ``database_sync_to_async`` for the callers' tokens)."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        head = head_of(scope)
        if host := host_answer(head):
            await send_response(send, head, *host)
            return
        refused = refusal(head)
        if refused is not None:
            await respond(send, head, refused)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the caller hung up before its call was whole
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > largest_call():
                await respond(send, head, too_large())
                return
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        route = scope["url_route"]["kwargs"]
        call = asyncio.ensure_future(answer(route["league_id"], route["player_id"], b"".join(chunks), head))
        # The request is whole: the next event is the caller hanging up, which stops its call (its
        # place is given back). A done callback rather than ``asyncio.wait``: the relay's calls wait
        # on the agent in the thousands, and what each holds while it waits is what the garbage
        # collector walks.
        hangup = asyncio.ensure_future(receive())
        hangup.add_done_callback(functools.partial(_stop_on_hangup, call))
        try:
            reply = await call
        except asyncio.CancelledError:
            if call.cancelled() and hangup.done() and not hangup.cancelled():
                return  # the caller hung up: there is nobody to answer
            call.cancel()  # this request was cancelled (the server stops): so is its call
            raise
        finally:
            hangup.cancel()
        await respond(send, head, reply)


def _stop_on_hangup(call: asyncio.Future[Answer], hangup: asyncio.Future[Any]) -> None:
    if not hangup.cancelled():
        call.cancel()


async def answer(league_id: str, player_id: str, body: bytes, head: Head) -> Answer:
    try:
        return await relayed(league_id, player_id, body, head)
    except Exception:  # a bug: the caller gets a 500 at once rather than waiting to its deadline
        logger.exception("relay: the call to %s/%s failed", league_id, player_id)
        return rpc_error(500, jsonrpc.INTERNAL_ERROR, "Internal error")


async def respond(send: Any, head: Head, answer: Answer) -> None:
    headers = [("Content-Type", answer.content_type)]
    if answer.status == 405:
        headers.append(("Allow", "POST"))
    await send_response(send, head, answer.status, answer.body, headers)
