"""JSON-RPC 2.0 + MCP dispatch over a :class:`~leagueproto.tools.Toolset`.

Pure request → response logic, shared by the LM's Django view and the referee/player ASGI
apps. Both dialects of docs/protocol.md ("Wire format") are accepted on the same endpoint:

* direct: ``{"method": "choose_parity", "params": {<message>}}`` → ``{"result": {<reply>}}``
* MCP: ``tools/call`` → ``{"content": [...], "structuredContent": {...}, "isError": ...}``

MCP's own rules are kept to the letter, so that official clients work unchanged: ``ping``
answers ``{}``, an unsupported ``MCP-Protocol-Version`` header is a 400, and every tool declares
an ``outputSchema`` that its ``structuredContent`` matches.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import orjson

from leagueproto import jsonrpc
from leagueproto.errors import SEE_COMPATIBILITY, SEE_LIMITS, SEE_WIRE, LeagueError
from leagueproto.jsonrpc import JsonRpcError
from leagueproto.jsonutil import body_depth_exceeds, dumps, dumps_str, loads
from leagueproto.tools import CallContext, Tool, Toolset

log = logging.getLogger(__name__)

SUPPORTED_MCP_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_MCP_VERSION = SUPPORTED_MCP_VERSIONS[-1]
# Methods some students use to wrap any league message; routed by its message_type.
GENERIC_METHODS = frozenset({"mcp_message", "handle_message", "protocol/message", "message"})
# The methods MCP defines that this server answers itself (``notifications/*`` besides).
MCP_METHODS = frozenset(
    {"initialize", "ping", "tools/list", "resources/list", "resources/templates/list", "resources/read", "prompts/list"}
)
DEFAULT_MAX_BODY = 64 * 1024
DEFAULT_MAX_DEPTH = 32
# Items of one JSON-RPC batch: a referee's batch of reports (50, referee/agent.py) fits twice over.
DEFAULT_MAX_BATCH_ITEMS = 100
_NO_ID = object()


@dataclass
class HttpResponse:
    status: int
    body: bytes = b""
    headers: list[tuple[str, str]] = field(default_factory=list)

    @property
    def json(self) -> Any:
        return loads(self.body) if self.body else None


def _json_response(status: int, payload: Any, extra_headers: Iterable[tuple[str, str]] = ()) -> HttpResponse:
    return HttpResponse(status, dumps(payload), [("content-type", "application/json"), *extra_headers])


class McpServer:
    """Serves one :class:`Toolset` over JSON-RPC (both dialects). Stateless: no sessions."""

    def __init__(
        self,
        toolset: Toolset,
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY,
        max_json_depth: int = DEFAULT_MAX_DEPTH,
        allowed_origins: Iterable[str] = (),
        allowed_hosts: Iterable[str] | None = None,
        max_batch_items: int = DEFAULT_MAX_BATCH_ITEMS,
        max_reply_bytes: int | None = None,
    ) -> None:
        self.toolset = toolset
        self.max_body_bytes = max_body_bytes
        self.max_json_depth = max_json_depth
        self.max_batch_items = max_batch_items
        # The bound on a reply body (one response, or a batch's together); None: no bound.
        self.max_reply_bytes = max_reply_bytes
        self.allowed_origins = {o.rstrip("/").lower() for o in allowed_origins}
        self.allowed_hosts: frozenset[str] | None = None
        if allowed_hosts is not None:
            self.set_allowed_hosts(allowed_hosts)

    def set_allowed_hosts(self, hosts: Iterable[str]) -> None:
        """Answer only requests whose Host header names one of ``hosts`` (any port; ``*``: any
        host). The referee and the player set it; the LM leaves it None, as Django checks
        ALLOWED_HOSTS before its view runs."""
        self.allowed_hosts = frozenset(normal_host(h) for h in hosts if h.strip())

    # -- HTTP -----------------------------------------------------------------------------
    def host_allowed(self, host: str | None) -> bool:
        """DNS rebinding: a page on evil.example whose name now resolves to us still says
        ``Host: evil.example``. Like the LM (ALLOWED_HOSTS), refuse hosts that are not ours."""
        allowed = self.allowed_hosts
        if allowed is None or "*" in allowed:
            return True
        return bool(host) and host_of(host) in allowed

    def origin_allowed(self, origin: str | None, host: str | None) -> bool:
        """MCP servers must check Origin (DNS rebinding): same host, loopback, or configured.

        With allowed hosts set (an agent), a browser's Origin must name one of them."""
        if not origin:
            return True
        origin = origin.rstrip("/").lower()
        if origin in self.allowed_origins or "*" in self.allowed_origins:
            return True
        parts = urlsplit(origin)
        if self.allowed_hosts is not None:
            return "*" in self.allowed_hosts or normal_host(parts.hostname or "") in self.allowed_hosts
        if parts.hostname in ("localhost", "127.0.0.1", "::1"):
            return True
        return bool(host) and parts.netloc == host.lower()

    async def handle_http(
        self,
        http_method: str,
        body: bytes,
        headers: Mapping[str, str],
        *,
        client_host: str | None = None,
        local_port: int | None = None,
    ) -> HttpResponse:
        """One HTTP exchange on ``/mcp``; ``headers`` must have lower-case names."""
        if http_method != "POST":
            return _json_response(
                405,
                jsonrpc.error_response(None, jsonrpc.INVALID_REQUEST, "Only POST is supported on /mcp"),
                [("allow", "POST")],
            )
        if not self.host_allowed(headers.get("host")):
            return host_not_allowed(headers.get("host"), self.allowed_hosts or frozenset())
        if not self.origin_allowed(headers.get("origin"), headers.get("host")):
            return _json_response(403, jsonrpc.error_response(None, jsonrpc.INVALID_REQUEST, "Origin not allowed"))
        if len(body) > self.max_body_bytes:
            return body_too_large(self.max_body_bytes)
        version = headers.get("mcp-protocol-version")
        if version is not None and version not in SUPPORTED_MCP_VERSIONS:
            return _json_response(400, unsupported_mcp_version(version))
        try:
            payload = loads(body)
        except ValueError as exc:
            return _json_response(400, _parse_error(exc, headers.get("content-type")))
        if body_depth_exceeds(body, self.max_json_depth):
            return _json_response(
                400,
                jsonrpc.error_response(
                    None, jsonrpc.INVALID_REQUEST, f"JSON nests deeper than {self.max_json_depth} levels"
                ),
            )
        base = CallContext(
            method="",
            dialect="direct",
            headers=headers,
            client_host=client_host,
            local_port=local_port,
            body=body,
            body_has_nul=b"\\u0000" in body,
        )
        status, response, extra = await self.handle_payload(payload, base)
        if response is None:
            return HttpResponse(status, b"", list(extra))
        return _json_response(status, response, extra)

    async def handle_payload(self, payload: Any, base: CallContext) -> tuple[int, Any, list[tuple[str, str]]]:
        """Returns (HTTP status, response or None, extra headers). A response is already encoded
        (``orjson.Fragment``, a batch's a list of them): its size counted against ``max_reply_bytes``."""
        budget = ReplyBudget(self.max_reply_bytes)
        if isinstance(payload, list):
            if not payload:
                return 400, jsonrpc.error_response(None, jsonrpc.INVALID_REQUEST, "Empty batch"), []
            if len(payload) > self.max_batch_items:
                # Refused before any item is looked at: a batch costs at most this many calls.
                return 400, batch_too_large(len(payload), self.max_batch_items), []
            # Items run concurrently (JSON-RPC 2.0 lets a server process a batch in any order):
            # the LM's ReportQueue then records a referee's batch of reports in one transaction.
            # gather keeps the responses in the order of the requests.
            outcomes = await asyncio.gather(*(self._handle_bounded(item, base, budget) for item in payload))
            responses = [response for _, response, _ in outcomes if response is not None]
            return (200, responses, []) if responses else (202, None, [])
        return await self._handle_bounded(payload, base, budget)

    async def _handle_bounded(
        self, msg: Any, base: CallContext, budget: ReplyBudget
    ) -> tuple[int, orjson.Fragment | None, list[tuple[str, str]]]:
        """``_handle_one``, its response encoded as soon as it is ready and counted against the
        request's reply budget: past the budget it becomes a -32003 error, so that a batch's
        replies never add up past the bound (each reply object is dropped once encoded)."""
        status, response, extra = await self._handle_one(msg, base)
        if response is None:
            return status, None, extra
        encoded = dumps(response)
        if budget.take(len(encoded)):
            return status, orjson.Fragment(encoded), extra
        too_large = reply_too_large(response.get("id"), len(encoded), budget)
        return 200, orjson.Fragment(dumps(too_large)), []

    # -- one JSON-RPC message -------------------------------------------------------------
    async def _handle_one(self, msg: Any, base: CallContext) -> tuple[int, dict | None, list[tuple[str, str]]]:
        if not isinstance(msg, dict):
            return 400, jsonrpc.error_response(None, jsonrpc.INVALID_REQUEST, "Request must be a JSON object"), []
        request_id = msg.get("id", _NO_ID)
        rid = None if request_id is _NO_ID else request_id
        if msg.get("jsonrpc") != "2.0":
            return 400, jsonrpc.error_response(rid, jsonrpc.INVALID_REQUEST, "jsonrpc must be exactly '2.0'"), []
        if rid is not None and not isinstance(rid, (str, int, float)) or isinstance(rid, bool):
            return 400, jsonrpc.error_response(None, jsonrpc.INVALID_REQUEST, "id must be a string, number or null"), []
        method = msg.get("method")
        if not isinstance(method, str) or not method:
            if "result" in msg or "error" in msg:
                return 202, None, []  # a response sent to us (e.g. to a server ping): nothing to answer
            return 400, jsonrpc.error_response(rid, jsonrpc.INVALID_REQUEST, "method must be a non-empty string"), []
        params = msg.get("params", {})
        if params is None:
            params = {}
        if not isinstance(params, (dict, list)):
            return 400, jsonrpc.error_response(rid, jsonrpc.INVALID_REQUEST, "params must be an object or array"), []
        is_notification = request_id is _NO_ID
        ctx = CallContext(
            method=method,
            dialect="direct",
            headers=base.headers,
            client_host=base.client_host,
            local_port=base.local_port,
            request_id=rid,
            body=base.body,
            body_has_nul=base.body_has_nul,
        )
        extra: list[tuple[str, str]] = []
        try:
            result, status = await self._dispatch(method, params, ctx, is_notification)
        except JsonRpcError as exc:
            if is_notification:
                return 202, None, []
            return exc.http_status, jsonrpc.error_response(rid, exc.code, exc.message, exc.data), []
        except Exception:  # a bug of ours: answer it, never a 500
            log.exception("internal error in %s", method)
            if is_notification:
                return 202, None, []
            return 200, jsonrpc.error_response(rid, jsonrpc.INTERNAL_ERROR, "Internal error"), []
        if is_notification:
            return 202, None, []
        return status, jsonrpc.result_response(rid, result), extra

    async def _dispatch(
        self, method: str, params: dict | list, ctx: CallContext, is_notification: bool
    ) -> tuple[Any, int]:
        if method in MCP_METHODS or method.startswith("notifications/") or not self._routed_to_tool(method):
            # Not a tool call (those are admitted by the toolset's ``call``): MCP's own methods,
            # resources, unknown methods. Each item of a batch is admitted on its own.
            await self.toolset.admit(method, ctx)
        if method.startswith("notifications/"):
            # Sent with an id it is a request after all: it gets an (empty) result, with 200.
            return (None, 202) if is_notification else ({}, 200)
        if method == "initialize":
            return self._initialize(_object_params(params)), 200
        if method == "ping":
            return {}, 200  # MCP's ping: an empty result (the league-level ping is the tool "ping")
        if method == "tools/list":
            return {"tools": self.toolset.tools_list()}, 200
        if method == "tools/call":
            return await self._tools_call(_object_params(params), ctx)
        if method == "resources/list":
            return {"resources": [_resource_entry(r) for r in self.toolset.resources if not r.is_template]}, 200
        if method == "resources/templates/list":
            return {"resourceTemplates": [_template_entry(r) for r in self.toolset.resources if r.is_template]}, 200
        if method == "resources/read":
            return await self._resources_read(_object_params(params)), 200
        if method in ("prompts/list",):
            return {"prompts": []}, 200
        return await self._direct(method, params, ctx)

    def _routed_to_tool(self, method: str) -> bool:
        return method == "tools/call" or method in GENERIC_METHODS or self.toolset.find_tool(method) is not None

    def _initialize(self, params: dict) -> dict:
        requested = params.get("protocolVersion")
        version = requested if requested in SUPPORTED_MCP_VERSIONS else LATEST_MCP_VERSION
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": {
                "tools": {"listChanged": False},
                "resources": {"subscribe": False, "listChanged": False},
            },
            "serverInfo": {"name": self.toolset.name, "version": self.toolset.version},
        }
        if self.toolset.instructions:
            result["instructions"] = self.toolset.instructions
        return result

    async def _tools_call(self, params: dict, ctx: CallContext) -> tuple[dict, int]:
        name = params.get("name")
        if not isinstance(name, str):
            raise JsonRpcError(jsonrpc.INVALID_PARAMS, "tools/call needs params.name")
        tool = self.toolset.tools.get(name) or self.toolset.find_tool(name)
        if tool is None:
            raise JsonRpcError(jsonrpc.INVALID_PARAMS, f"Unknown tool: {name}")
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise JsonRpcError(jsonrpc.INVALID_PARAMS, "tools/call arguments must be an object")
        inner = arguments.get("message")
        if isinstance(inner, dict) and "message_type" in inner and "message_type" not in arguments:
            arguments = inner  # {"message": {…}}, as some agents wrap a league message
        ctx.dialect = "mcp"
        reply, is_error, status = await self._call(tool, arguments, ctx)
        return {
            "content": [{"type": "text", "text": dumps_str(reply)}],
            "structuredContent": reply,
            "isError": is_error,
        }, status

    async def _direct(self, method: str, params: dict | list, ctx: CallContext) -> tuple[dict, int]:
        message: Any = params
        tool: Tool | None = self.toolset.find_tool(method)
        if isinstance(params, list):
            if tool is None and method not in GENERIC_METHODS:
                raise self._method_not_found(method)
            raise JsonRpcError(jsonrpc.INVALID_PARAMS, "params must be an object (the league message)")
        # Liberal input: {"message": {...}} wrappers and generic methods routed by message_type.
        inner = params.get("message")
        if isinstance(inner, dict) and ("message_type" in inner or tool is None):
            message = inner
        if tool is None:
            if method not in GENERIC_METHODS:
                raise self._method_not_found(method)
            message_type = message.get("message_type")
            tool = self.toolset.find_tool(message_type) if isinstance(message_type, str) else None
            if tool is None:
                raise JsonRpcError(
                    jsonrpc.INVALID_PARAMS,
                    f"{method} needs a message whose message_type this agent handles",
                    {"message_type": message_type},
                )
        reply, _, status = await self._call(tool, message, ctx)
        return reply, status

    def _method_not_found(self, method: str) -> JsonRpcError:
        """-32601, naming what this agent does serve (its tools, or their message types)."""
        return JsonRpcError(
            jsonrpc.METHOD_NOT_FOUND,
            f"Method not found: {method}",
            {
                "field": "method",
                "expected": "a tool of this agent, its message type, tools/call or an MCP method",
                "got": method,
                "tools": sorted(self.toolset.tools),
                "see": SEE_WIRE,
            },
        )

    async def _call(self, tool: Tool, arguments: dict, ctx: CallContext) -> tuple[dict, bool, int]:
        try:
            reply, is_error = await self.toolset.call(tool, arguments, ctx)
        except LeagueError as err:  # raised outside the handler (e.g. by a rate limiter)
            return self.toolset.error_reply(err, arguments, tool), True, err.http_status
        status = 200
        if is_error and reply.get("error_code") == "E017":
            status = 429
        return reply, is_error, status

    async def _resources_read(self, params: dict) -> dict:
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise JsonRpcError(jsonrpc.INVALID_PARAMS, "resources/read needs params.uri")
        found = self.toolset.find_resource(uri)
        if found is None:
            raise JsonRpcError(jsonrpc.RESOURCE_NOT_FOUND, f"Resource not found: {uri}", {"uri": uri})
        resource, args = found
        try:
            data = await resource.reader(uri, args)
        except LookupError as exc:
            raise JsonRpcError(jsonrpc.RESOURCE_NOT_FOUND, f"Resource not found: {uri}", {"uri": uri}) from exc
        return {"contents": [{"uri": uri, "mimeType": resource.mime_type, "text": dumps_str(data)}]}


def unsupported_mcp_version(version: str) -> dict:
    """The JSON-RPC error of a request whose MCP-Protocol-Version header we do not speak (HTTP 400)."""
    return jsonrpc.error_response(
        None,
        jsonrpc.INVALID_REQUEST,
        f"Unsupported MCP-Protocol-Version: {version} (supported: {', '.join(SUPPORTED_MCP_VERSIONS)})",
        {
            "field": "MCP-Protocol-Version",
            "expected": f"one of {', '.join(SUPPORTED_MCP_VERSIONS)} (or no such header)",
            "got": version,
            "supported": list(SUPPORTED_MCP_VERSIONS),
            "see": SEE_WIRE,
        },
    )


def _parse_error(exc: ValueError, content_type: str | None) -> dict:
    """-32700 for a body that is not JSON; a body sent as a form (or any type but JSON) says so."""
    media = (content_type or "").split(";")[0].strip().lower()
    if media and media != "application/json" and not media.endswith("+json"):
        message = (
            f"Parse error: the body is not JSON (it was sent as {media}); send the JSON-RPC request itself "
            "as the body, with Content-Type: application/json"
        )
    else:
        message = f"Parse error: the body is not JSON ({exc})"
    data = {"field": "body", "expected": "a JSON-RPC 2.0 request as JSON", "got": media or None, "see": SEE_WIRE}
    if media.startswith("multipart/") or media == "application/x-www-form-urlencoded":
        data["see"] = SEE_COMPATIBILITY
    return jsonrpc.error_response(None, jsonrpc.PARSE_ERROR, message, data)


LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")


def agent_hosts(*hosts: str | None, extra: Iterable[str] = ()) -> list[str]:
    """The hosts an agent answers for: those it binds and advertises (a wildcard address is
    no host name), the loopback names, and ``extra`` (``--allowed-hosts``)."""
    named = [h for h in hosts if h and normal_host(h) not in ("0.0.0.0", "::", "")]
    return [*LOOPBACK_HOSTS, *named, *extra]


def split_hosts(text: str | None) -> tuple[str, ...]:
    """``--allowed-hosts a.example,b.example`` as a tuple."""
    return tuple(h.strip() for h in (text or "").split(",") if h.strip())


def normal_host(host: str) -> str:
    """A host name as compared: lower case, no trailing dot, IPv6 without brackets."""
    return host.strip().lower().rstrip(".").removeprefix("[").removesuffix("]")


def host_of(header: str) -> str:
    """The host of a Host header value (``127.0.0.1:8101``, ``[::1]:8101``, ``example.org``)."""
    header = header.strip()
    if header.startswith("["):
        return normal_host(header.partition("]")[0])
    return normal_host(header.rpartition(":")[0] if header.count(":") == 1 else header)


def host_not_allowed(host: str | None, allowed: frozenset[str]) -> HttpResponse:
    """HTTP 400 for a Host that is not this agent's, as the LM answers (Django's DisallowedHost)."""
    return _json_response(
        400,
        jsonrpc.error_response(
            None,
            jsonrpc.INVALID_REQUEST,
            f"Host not allowed: {host!r} (this agent answers for {', '.join(sorted(allowed)) or 'no host'})",
            {
                "field": "Host",
                "expected": "one of this agent's hosts (runplayer / runreferee --allowed-hosts)",
                "got": host,
                "see": SEE_WIRE,
            },
        ),
    )


@dataclass
class ReplyBudget:
    """What is left of one request's reply bound (``limit`` None: no bound)."""

    limit: int | None
    spent: int = 0

    def take(self, size: int) -> bool:
        """Count a reply of ``size`` bytes, or refuse it (False) when it would pass the bound."""
        if self.limit is not None and self.spent + size > self.limit:
            return False
        self.spent += size
        return True


def batch_too_large(items: int, limit: int) -> dict:
    """The -32600 that refuses a whole batch of more than ``limit`` items (HTTP 400)."""
    return jsonrpc.error_response(
        None,
        jsonrpc.INVALID_REQUEST,
        f"Batch too large: {items} items, at most {limit} in one request; send the rest in further requests",
        {
            "field": "batch",
            "expected": f"at most {limit} items",
            "got": items,
            "max_batch_items": limit,
            "see": SEE_LIMITS,
        },
    )


def reply_too_large(request_id: Any, size: int, budget: ReplyBudget) -> dict:
    """The -32003 a call gets instead of a reply that would take the request's reply past the bound."""
    alone = budget.limit is not None and size > budget.limit
    if alone:
        message = (
            f"Reply too large: {size} bytes, over this server's limit of {budget.limit} bytes; "
            "ask for less (e.g. one round of the schedule)"
        )
    else:
        message = (
            f"Reply too large: the replies of this batch would pass this server's limit of {budget.limit} bytes; "
            "send this call again in a request of its own"
        )
    data = {"max_reply_bytes": budget.limit, "reply_bytes": size, "retryable": not alone, "see": SEE_LIMITS}
    return jsonrpc.error_response(request_id, jsonrpc.REPLY_TOO_LARGE, message, data)


def body_too_large(limit: int) -> HttpResponse:
    return _json_response(
        413, jsonrpc.error_response(None, jsonrpc.INVALID_REQUEST, f"Request body larger than {limit} bytes")
    )


def _object_params(params: dict | list) -> dict:
    if not isinstance(params, dict):
        raise JsonRpcError(jsonrpc.INVALID_PARAMS, "params must be an object")
    return params


def _resource_entry(r: Any) -> dict:
    return {"uri": r.uri, "name": r.name, "description": r.description, "mimeType": r.mime_type}


def _template_entry(r: Any) -> dict:
    return {"uriTemplate": r.uri, "name": r.name, "description": r.description, "mimeType": r.mime_type}
