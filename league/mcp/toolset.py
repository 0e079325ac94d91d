"""The LM's toolset: what every ``/mcp`` tool call passes before its handler (league/mcp/tools.py).

Transport (both dialects, JSON-RPC errors, MCP) is leagueproto's. Here: the rate limit (on every
item of a request, tool call or not), the checks no tool may skip, a database outage answered as
a retryable error, and the refusal of a message that fails its model, logged like any call but
a read's.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from django.db import InterfaceError, OperationalError

from league.mcp.database import database_job
from league.mcp.exchange import READ_TOOLS, has_nul, log_exchange
from league.ratelimit import limiter
from leagueproto.errors import ErrorCode, LeagueError
from leagueproto.jsonrpc import JsonRpcError
from leagueproto.tools import CallContext, Tool, Toolset

log = logging.getLogger("league.mcp")

# JSON-RPC's range for server errors: the call could not be served now and may be sent again as is.
SERVER_UNAVAILABLE = -32000
RETRY_AFTER_SECONDS = 1.0
# A registration answered to a JSON-RPC notification would lose the new token with the reply.
REGISTRATION_TOOLS = frozenset({"register_player", "register_referee"})


class DatabaseOutage:
    """The LM's view of a database outage: logged once when it begins and once when it ends,
    not once per call refused meanwhile. Reads may work while writes fail (a locked SQLite
    file), so the outage ends only after ``QUIET`` seconds without a refusal."""

    QUIET = 5.0
    since: float | None = None
    last: float = 0.0  # when a call was last refused

    @classmethod
    def refused(cls, exc: Exception) -> JsonRpcError:
        """The retryable JSON-RPC error a call gets while the database is unavailable."""
        cls.last = time.monotonic()
        if cls.since is None:
            cls.since = cls.last
            log.warning("database unavailable (%s: %s); calls are refused as retryable", type(exc).__name__, exc)
        return JsonRpcError(
            SERVER_UNAVAILABLE,
            "Database unavailable; nothing was recorded: send the same message again",
            {
                "retryable": True,
                "retry_after_seconds": RETRY_AFTER_SECONDS,
                "error_code": ErrorCode.INTERNAL_SERVER_ERROR.value,
                "reason": f"{type(exc).__name__}: {exc}"[:200],
            },
        )

    @classmethod
    def over(cls) -> None:
        """A call went through: the outage is over if none was refused for ``QUIET`` seconds."""
        now = time.monotonic()
        if cls.since is not None and now - cls.last >= cls.QUIET:
            log.warning("database available again after %.1f s", cls.last - cls.since)
            cls.since = None


@dataclass
class ToolCall(CallContext):
    """A call as an LM handler gets it: the context, the tool and the arguments as received
    (what the Event log stores)."""

    tool: Tool | None = None
    arguments: dict[str, Any] = field(default_factory=dict)


def rate_limited(err: LeagueError) -> JsonRpcError:
    """The JSON-RPC error (HTTP 429 when it is the whole request) of a request over the rate
    limit that is no tool call: MCP's methods have no LEAGUE_ERROR reply to carry E017."""
    return JsonRpcError(
        SERVER_UNAVAILABLE,
        err.description,
        {"error_code": err.code, "retryable": True, **err.context},
        http_status=err.http_status,
    )


class LeagueManagerToolset(Toolset):
    """Runs each call through its one handler. A handler authenticates the caller, acts and
    writes the exchange to the Event log, and returns the reply; a refusal is a LEAGUE_ERROR
    reply, logged the same way (a read's is not: see ``READ_TOOLS``)."""

    async def admit(self, method: str, ctx: CallContext) -> None:
        """Every request that is no tool call (``initialize``, ``tools/list``, ``resources/read``,
        an unknown method …) takes one call from the caller's rate limits, as a tool call does:
        the limits count the items of a batch, not the requests."""
        try:
            await limiter.check({}, ctx.bearer_token, ctx.client_host, method)
        except LeagueError as err:
            raise rate_limited(err) from None

    async def call(self, tool: Tool, arguments: dict[str, Any], ctx: CallContext) -> tuple[dict[str, Any], bool]:
        """A database that is down or locked (OperationalError, InterfaceError) is not a bug: the
        call is refused with a retryable JSON-RPC error (``DatabaseOutage``), nothing recorded,
        so that the agent sends it again (a referee re-sends its report until it is recorded)."""
        try:
            reply = await self._call(tool, arguments, ctx)
        except (OperationalError, InterfaceError) as exc:
            raise DatabaseOutage.refused(exc) from exc
        if DatabaseOutage.since is not None:
            DatabaseOutage.over()
        return reply, reply.get("message_type") == self.error_message_type

    async def _call(self, tool: Tool, arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        # Refusals raised here are answered by leagueproto's server and not logged: over the rate
        # limit (E017 + HTTP 429, league/ratelimit.py) nothing is worth a database write.
        await limiter.check(arguments, ctx.bearer_token, ctx.client_host, tool.name)
        if has_nul(arguments, ctx):
            # PostgreSQL cannot store NUL in text or JSON: refuse it up front, for every database.
            raise LeagueError(ErrorCode.INVALID_MESSAGE_FORMAT, "text may not contain NUL (\\u0000) characters")
        if ctx.request_id is None and tool.name in REGISTRATION_TOOLS:
            raise LeagueError(
                ErrorCode.INVALID_MESSAGE_FORMAT,
                f"{tool.name} needs a JSON-RPC id: the reply carries your auth_token",
                context={"field": "id"},
            )
        try:
            message = self.checked(tool, arguments, from_json=ctx.from_json)
        except LeagueError as err:
            reply = self.error_reply(err, arguments, tool)
            if tool.name not in READ_TOOLS:  # no caller is proven yet: a read refused writes nothing
                await database_job(log_exchange, tool, arguments, reply, None)
            return reply
        call = ToolCall(**vars(ctx), tool=tool, arguments=arguments)
        return await tool.handler(message, call)


toolset = LeagueManagerToolset(
    name="league-manager",
    version="2.0.0",
    sender="league_manager",
    error_message_type="LEAGUE_ERROR",
    instructions=(
        "Even/Odd League Manager (league.v2). Register with register_player or register_referee, keep the "
        "auth_token you get (it is shown once) and send it in every later message."
    ),
)
