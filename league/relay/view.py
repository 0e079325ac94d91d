"""``POST /relay/<league_id>/<player_id>/mcp``: the endpoint the LM assigns to a relay player.

Referees and the conductor call it like any player's endpoint. An ordinary Django async view
(league/urls.py): ALLOWED_HOSTS, the middleware and its security headers apply as to every
request. The call goes to the consumer holding the player's socket (straight to it in this
process, or, with Redis, through the channel layer to any LM process) and its reply comes back the
same way. The caller's deadline holds: the view waits at most ``X-Relay-Timeout`` seconds (else
``RELAY_CALL_TIMEOUT``), and stops waiting when the caller hangs up (Django cancels the view).
A call to an agent that is not connected waits for it to reconnect (``RELAY_RECONNECT_WAIT``, by
default the whole call: to its caller the agent is as a host that does not answer, so the
caller's own timeout, retries, technical losses and unreachable marking apply); one whose socket
drops before the reply is sent again on the socket that replaces it. When the wait is shorter
than the call the answer is 502, a 5xx without a JSON-RPC body (a failed call).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from league.relay import hub, state
from leagueproto.jsonutil import dumps, loads

# The status a consumer answers a call with when its socket closes before the reply.
DROPPED = 502
# How often a call waiting for an agent to reconnect looks again.
RECONNECT_POLL = 0.1


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"


def _rpc_error(code: int, message: str) -> Answer:
    body = dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}})
    return Answer(400, body, "application/json")


def call_timeout(value: str | None) -> float:
    """The seconds a caller gives its call: its ``X-Relay-Timeout`` header, else the setting."""
    try:
        seconds = float(value) if value else 0.0
    except ValueError:
        seconds = 0.0
    return min(seconds, 600.0) if seconds > 0 else float(settings.RELAY_CALL_TIMEOUT)


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
            return Answer(504, f"player {player_id} did not answer within {timeout:g} s".encode())
        if reply is None or reply["status"] != DROPPED or loop.time() >= deadline:
            break
        # The socket dropped with the call in flight: send it again on the socket that replaces it
        # (what a caller's retry would do, within the same deadline), once that one is there.
        await asyncio.sleep(RECONNECT_POLL)
    if reply is None:
        return Answer(503, f"player {player_id} has too many calls waiting".encode())
    if reply["status"] == 200:
        return Answer(200, reply["body"], "application/json")
    return Answer(reply["status"], reply["body"])


async def _through_layer(channel: str, body: bytes, expires: float) -> dict[str, Any] | None:
    """Send the call to the consumer of ``channel`` (any LM process) and wait for its reply; None
    when the consumer's queue is full (it is that far behind: as busy as too many calls)."""
    layer = get_channel_layer()
    reply_to = await layer.new_channel("relay")
    try:
        await layer.send(channel, {"type": "relay.call", "body": body, "reply_to": reply_to, "expires": expires})
    except ChannelFull:
        return None
    return await layer.receive(reply_to)


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
        if shared or not known:
            target = await state.target(league_id, player_id)
            if target is None or not target.relay:
                return None
            known = True
            if shared and target.channel:
                return target.channel
        if loop.time() >= wait_until:
            return ""
        await asyncio.sleep(RECONNECT_POLL)


@csrf_exempt
async def relay_view(request: HttpRequest, league_id: str, player_id: str) -> HttpResponse:
    if request.method != "POST":
        response = HttpResponse("the relay endpoint takes POST (JSON-RPC)", status=405)
        response["Allow"] = "POST"
        return response
    declared = request.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > settings.RELAY_MAX_MESSAGE_BYTES:
        return HttpResponse(f"request body larger than {settings.RELAY_MAX_MESSAGE_BYTES} bytes", status=413)
    answer = await forward(league_id, player_id, request.body, call_timeout(request.headers.get("X-Relay-Timeout")))
    return HttpResponse(answer.body, status=answer.status, content_type=answer.content_type)
