"""Registering over the relay socket: a player that opens ``/agents/connect`` without a token may
send its ``register_player`` JSON-RPC request there instead of POSTing it to ``/mcp`` first.

The request goes through the same ``/mcp`` server (validation, the registration, its Event rows)
with ``contact_endpoint`` "connect", so the LM assigns the relay endpoint; the JSON-RPC response
goes back on the socket, and an accepted player's socket is from then on its relay connection
(docs/protocol.md, "Playing from behind NAT").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from channels.db import aclose_old_connections

from league.mcp.endpoint import get_server
from league.relayaddress import CONNECT
from leagueproto import jsonrpc
from leagueproto.jsonutil import dumps

METHOD = "register_player"


@dataclass(frozen=True)
class Registered:
    """What the socket sends back (a JSON-RPC response) and, when accepted, the new player's token."""

    response: bytes
    auth_token: str | None


def is_registration(message: Any) -> bool:
    """Whether a socket's first message is a JSON-RPC ``register_player`` request."""
    return isinstance(message, dict) and message.get("method") == METHOD and "jsonrpc" in message


async def register(
    request: dict[str, Any], headers: dict[str, str], client_host: str | None, server_port: int | None
) -> Registered:
    """Run one ``register_player`` request from a socket (``headers``: the socket's, lower-case;
    its Host was checked when it opened; ``server_port``: the port the LM serves on, which the
    relay endpoint is given when LM_BASE_URL is not set: league/relayaddress.py)."""
    rid = request.get("id")
    if rid is None:
        return _refused(
            None, jsonrpc.INVALID_REQUEST, "register_player needs an id: its reply comes back on the socket"
        )
    params = request.get("params")
    meta = params.get("player_meta") if isinstance(params, dict) else None
    if isinstance(meta, dict):
        endpoint = meta.setdefault("contact_endpoint", CONNECT)
        if endpoint != CONNECT:
            return _refused(
                rid, jsonrpc.INVALID_PARAMS, f"over the socket, contact_endpoint is '{CONNECT}' (or leave it out)"
            )
    reply = await get_server().handle_http(
        "POST", dumps(request), headers, client_host=client_host, local_port=server_port
    )
    # Outside a request, Django's request-finished signal does not close the connection it used.
    await aclose_old_connections()
    answer = reply.json if reply.body else None
    result = answer.get("result") if isinstance(answer, dict) else None
    token = result.get("auth_token") if isinstance(result, dict) and result.get("status") == "ACCEPTED" else None
    return Registered(reply.body, token if isinstance(token, str) and token else None)


def _refused(rid: Any, code: int, message: str) -> Registered:
    return Registered(dumps(jsonrpc.error_response(rid, code, message)), None)
