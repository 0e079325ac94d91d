"""The outgoing side: one pooled async HTTP client per process, with the retry policy.

aiohttp, not httpx, on this hot path: httpx's async client measured 10-20×
slower on this machine. Everything outside this module sees only :class:`AgentClient`.

We send dialect A (``method`` = tool name, flat message in ``params``). An endpoint that
answers -32601 but speaks MCP gets ``tools/call`` instead, remembered per endpoint
(docs/protocol.md, "Wire format"); a stateful MCP server that wants a session gets an ``initialize`` first.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import itertools
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import aiohttp.abc
from yarl import URL

from leagueproto.errors import ErrorCode
from leagueproto.jsonutil import dumps, loads

ERROR_MESSAGE_TYPES = frozenset({"LEAGUE_ERROR", "GAME_ERROR"})
DEFAULT_MAX_RESPONSE = 256 * 1024
_JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
# aiohttp's own timer is off: every call runs under asyncio.timeout(), which covers connecting,
# sending and reading the whole body (aiohttp would otherwise arm a second timer per request).
_NO_AIOHTTP_TIMEOUT = aiohttp.ClientTimeout(total=None, connect=None, sock_read=None, sock_connect=None)
_MAX_CACHED_URLS = 4096


@dataclass(frozen=True)
class RetryPolicy:
    """E001 (timeout) and E009 (connection) are retried ``retries`` times, ``delay`` s apart."""

    retries: int = 3
    delay: float = 2.0


NO_RETRY = RetryPolicy(retries=0, delay=0.0)


@dataclass
class CallResult:
    reply: dict[str, Any]
    is_error: bool  # the agent answered with LEAGUE_ERROR / GAME_ERROR (or MCP isError)
    latency_ms: float
    attempts: int
    dialect: str


class CallFailed(Exception):
    """No usable reply: E001 timeout, E009 connection, E010 HTTP 5xx, E002 malformed reply."""

    def __init__(
        self,
        code: ErrorCode,
        detail: str,
        *,
        attempts: int = 1,
        latency_ms: float = 0.0,
        http_status: int | None = None,
        rpc_error: dict | None = None,
        maybe_delivered: bool = True,
    ) -> None:
        super().__init__(f"{code.value} {detail}")
        self.code = code
        self.detail = detail
        self.attempts = attempts
        self.latency_ms = latency_ms
        self.http_status = http_status
        self.rpc_error = rpc_error
        # Whether the agent may have received the request (in any of the call's attempts): False
        # only when no attempt got as far as a connection (refused, no such host, a bad URL, an
        # address refused before connecting). A timeout or a connection lost after connecting may
        # have delivered it: the agent may be acting on it.
        self.maybe_delivered = maybe_delivered


def _final(exc: CallFailed, attempts: int, started: float, policy: RetryPolicy) -> bool:
    """Note on ``exc`` how many tries it took and how long; whether to give up (not a timeout
    or connection failure, or no retry left)."""
    exc.attempts = attempts
    exc.latency_ms = (time.perf_counter() - started) * 1000
    retryable = exc.code in (ErrorCode.TIMEOUT_ERROR, ErrorCode.CONNECTION_ERROR)
    return not retryable or attempts > policy.retries


class _MethodNotFound(Exception):
    pass


def unwrap_reply(result: Any) -> tuple[dict[str, Any], bool]:
    """Read a reply from ``result``, ``structuredContent``, ``content[0].text`` or ``response``."""
    if not isinstance(result, dict):
        raise CallFailed(ErrorCode.INVALID_MESSAGE_FORMAT, "result is not a JSON object")
    is_error = bool(result.get("isError"))
    reply: Any = result
    if isinstance(result.get("structuredContent"), dict):
        reply = result["structuredContent"]
    elif isinstance(result.get("content"), list) and result["content"]:
        first = result["content"][0]
        if isinstance(first, dict) and isinstance(first.get("text"), str):
            try:
                reply = loads(first["text"])
            except ValueError as exc:
                raise CallFailed(ErrorCode.INVALID_MESSAGE_FORMAT, "content text is not JSON") from exc
    elif isinstance(result.get("response"), dict):
        reply = result["response"]
    if not isinstance(reply, dict):
        raise CallFailed(ErrorCode.INVALID_MESSAGE_FORMAT, "reply is not a JSON object")
    return reply, is_error or reply.get("message_type") in ERROR_MESSAGE_TYPES


def _parse_sse(text: str) -> Any:
    """The last JSON-RPC message in a text/event-stream body (MCP servers may answer so)."""
    found = None
    for line in text.splitlines():
        if line.startswith("data:"):
            data = line[5:].strip()
            if data:
                try:
                    found = loads(data)
                except ValueError:
                    continue
    if found is None:
        raise ValueError("no JSON data event in the stream")
    return found


def _wants_mcp_session(exc: CallFailed) -> bool:
    """A stateful MCP server (e.g. one built on the official SDK) refusing a call without a session."""
    message = str((exc.rpc_error or {}).get("message", ""))
    return exc.http_status in (400, 404) and "session" in message.lower()


def _read_payload(status: int, body: bytes, content_type: str) -> Any:
    """The JSON of a reply body (JSON or an event stream); CallFailed if it has none."""
    try:
        # orjson reads the bytes directly (and refuses bad UTF-8 with the same ValueError).
        return _parse_sse(body.decode("utf-8")) if "text/event-stream" in content_type else loads(body)
    except ValueError as exc:
        if status >= 500:
            raise CallFailed(ErrorCode.INTERNAL_SERVER_ERROR, f"HTTP {status}", http_status=status) from exc
        raise CallFailed(
            ErrorCode.INVALID_MESSAGE_FORMAT, f"reply is not JSON (HTTP {status})", http_status=status
        ) from exc


def _result_of(method: str, payload: Any, status: int) -> Any:
    """The ``result`` of one JSON-RPC response; its error as CallFailed (-32601: _MethodNotFound)."""
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        error = payload["error"]
        if error.get("code") == -32601:
            raise _MethodNotFound(method)
        raise CallFailed(
            ErrorCode.INVALID_MESSAGE_FORMAT,
            f"JSON-RPC error {error.get('code')}: {error.get('message')}",
            http_status=status,
            rpc_error=error,
        )
    if status >= 500:
        raise CallFailed(ErrorCode.INTERNAL_SERVER_ERROR, f"HTTP {status}", http_status=status)
    if not isinstance(payload, dict) or "result" not in payload:
        raise CallFailed(ErrorCode.INVALID_MESSAGE_FORMAT, "reply is not a JSON-RPC response", http_status=status)
    return payload["result"]


# ``check(host, port, address)``: why the client may not connect to ``address`` (what ``host``
# resolved to) on ``port``, or None. The LM passes its endpoint policy (league/endpoints.py).
AddressCheck = Callable[[str, int, str], Awaitable[str | None]]


class AddressRefused(OSError):
    """Every address a host resolved to was refused by the client's address check."""


class _CheckedResolver(aiohttp.abc.AbstractResolver):
    """DNS as usual, then the address check on every answer: a name registered while it pointed at
    an agent and pointing elsewhere now (DNS rebinding) is not followed. Only checked answers
    reach aiohttp's DNS cache."""

    def __init__(self, check: AddressCheck) -> None:
        self._inner = aiohttp.DefaultResolver()
        self._check = check

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET) -> list:
        found = await self._inner.resolve(host, port, family)
        kept, problems = [], []
        for item in found:
            problem = await self._check(host, port, item["host"])
            if problem:
                problems.append(problem)
            else:
                kept.append(item)
        if not kept:
            raise AddressRefused(f"{host} resolves to a refused address: {problems[0] if problems else 'none'}")
        return kept

    async def close(self) -> None:
        await self._inner.close()


@functools.lru_cache(maxsize=1024)
def _literal(host: str | None) -> bool:
    """Whether ``host`` is an IP address. Kept per host: a referee calls the same few hosts
    thousands of times a league, and parsing the address was ~1.5 % of its CPU."""
    try:
        ipaddress.ip_address(host or "")
    except ValueError:
        return False
    return True


class AgentClient:
    """Pooled keep-alive client. Create inside the event loop that will use it; close it last.

    ``address_check``: run on every address the client connects to (each DNS answer, and the
    address written in the URL), so the check made when an endpoint was registered holds at the
    time of the call too. A refused address is a connection failure (E009).
    """

    def __init__(
        self,
        *,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE,
        connection_limit: int = 1024,
        user_agent: str = "even-odd-league/1.0",
        address_check: AddressCheck | None = None,
    ) -> None:
        self.address_check = address_check
        self.max_response_bytes = max_response_bytes
        self.connection_limit = connection_limit
        self.user_agent = user_agent
        self._session: aiohttp.ClientSession | None = None
        self._ids = itertools.count(1)
        self._dialects: dict[str, str] = {}  # endpoint → "mcp" once it refused dialect A
        self._mcp_sessions: dict[str, str] = {}  # endpoint → Mcp-Session-Id for stateful servers
        self._mcp_initialized: set[str] = set()
        self._urls: dict[str, URL] = {}  # endpoint → parsed once (a league calls the same few)

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            resolver = _CheckedResolver(self.address_check) if self.address_check is not None else None
            connector = aiohttp.TCPConnector(
                limit=self.connection_limit, limit_per_host=0, ttl_dns_cache=300, resolver=resolver
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                # The headers every call sends, merged once here rather than per call. Replies
                # are not compressed: "identity" says so, and unlike skip_auto_headers it costs
                # aiohttp no per-request header copy.
                headers={"User-Agent": self.user_agent, "Accept-Encoding": "identity", **_JSON_HEADERS},
                timeout=_NO_AIOHTTP_TIMEOUT,
                # The protocol has no cookies (MCP sessions use a header): skip the jar's per-call work.
                cookie_jar=aiohttp.DummyCookieJar(),
            )
        return self._session

    def _url(self, endpoint: str) -> URL:
        url = self._urls.get(endpoint)
        if url is None:
            if len(self._urls) >= _MAX_CACHED_URLS:
                self._urls.clear()
            try:
                url = URL(endpoint)
            except (ValueError, TypeError) as exc:
                raise aiohttp.InvalidURL(endpoint) from exc
            self._urls[endpoint] = url
        return url

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def dialect_of(self, endpoint: str) -> str:
        return self._dialects.get(endpoint, "direct")

    async def call(
        self,
        endpoint: str,
        method: str,
        params: dict[str, Any],
        *,
        timeout: float = 10.0,
        policy: RetryPolicy = NO_RETRY,
        headers: dict[str, str] | None = None,
    ) -> CallResult:
        """Call ``method`` on an agent; retries E001/E009 per ``policy``; raises CallFailed."""
        started = time.perf_counter()
        attempts = 0
        delivered = False  # whether an earlier attempt may have reached the agent
        while True:
            attempts += 1
            try:
                reply, is_error, dialect = await self._attempt(endpoint, method, params, timeout, headers)
                latency = (time.perf_counter() - started) * 1000
                return CallResult(reply, is_error, latency, attempts, dialect)
            except CallFailed as exc:
                delivered = exc.maybe_delivered = delivered or exc.maybe_delivered
                if _final(exc, attempts, started, policy):
                    raise
            await asyncio.sleep(policy.delay)

    async def _attempt(
        self, endpoint: str, method: str, params: dict[str, Any], timeout: float, headers: dict[str, str] | None
    ) -> tuple[dict[str, Any], bool, str]:
        if self._dialects.get(endpoint) != "mcp":
            try:
                result = await self._rpc(endpoint, method, params, timeout, headers)
                reply, is_error = unwrap_reply(result)
                return reply, is_error, "direct"
            except _MethodNotFound:
                pass  # fall back to the MCP form below, and remember it
            except CallFailed as exc:
                if not _wants_mcp_session(exc):
                    raise
        result = await self._mcp_call(endpoint, method, params, timeout, headers)
        self._dialects[endpoint] = "mcp"
        reply, is_error = unwrap_reply(result)
        return reply, is_error, "mcp"

    async def _mcp_call(
        self, endpoint: str, method: str, params: dict[str, Any], timeout: float, headers: dict[str, str] | None
    ) -> Any:
        call_params = {"name": method, "arguments": params}
        try:
            return await self._rpc(endpoint, "tools/call", call_params, timeout, headers, mcp=True)
        except _MethodNotFound as exc:
            raise CallFailed(ErrorCode.INVALID_MESSAGE_FORMAT, f"agent has no method or tool {method!r}") from exc
        except CallFailed as exc:
            # A stateful MCP server refuses calls without a session: open one, then retry once.
            if exc.http_status not in (400, 404) or endpoint in self._mcp_initialized:
                raise
            await self._open_mcp_session(endpoint, timeout, headers)
            return await self._rpc(endpoint, "tools/call", call_params, timeout, headers, mcp=True)

    async def _open_mcp_session(self, endpoint: str, timeout: float, headers: dict[str, str] | None) -> None:
        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "even-odd-league", "version": "1.0.0"},
        }
        self._mcp_sessions.pop(endpoint, None)
        await self._rpc(endpoint, "initialize", init, timeout, headers, mcp=True)
        self._mcp_initialized.add(endpoint)
        await self._post(endpoint, {"jsonrpc": "2.0", "method": "notifications/initialized"}, timeout, headers, True)

    async def _rpc(
        self,
        endpoint: str,
        method: str,
        params: dict[str, Any],
        timeout: float,
        headers: dict[str, str] | None,
        mcp: bool = False,
    ) -> Any:
        request_id = next(self._ids)
        status, body, content_type = await self._post(
            endpoint, {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}, timeout, headers, mcp
        )
        return _result_of(method, _read_payload(status, body, content_type), status)

    async def call_batch(
        self,
        endpoint: str,
        calls: list[tuple[str, dict[str, Any]]],
        *,
        timeout: float = 10.0,
        policy: RetryPolicy = NO_RETRY,
        headers: dict[str, str] | None = None,
    ) -> list[CallResult | CallFailed]:
        """Send ``calls`` (method, params) as one JSON-RPC batch in one POST, direct dialect only
        (for the LM, whose ``/mcp`` serves it). Returns one outcome per call, in order: its
        :class:`CallResult`, or a :class:`CallFailed` for its JSON-RPC error or unusable reply.
        A failure of the POST itself (timeout, connection, HTTP 5xx, a body that is no batch
        reply) raises CallFailed for the whole batch; E001/E009 are retried per ``policy``."""
        started = time.perf_counter()
        attempts = 0
        while True:
            attempts += 1
            ids = [next(self._ids) for _ in calls]
            batch = [
                {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
                for rid, (method, params) in zip(ids, calls, strict=True)
            ]
            try:
                status, body, content_type = await self._post(endpoint, batch, timeout, headers, False)
                payload = _read_payload(status, body, content_type)
                if not isinstance(payload, list) or status >= 500:
                    _result_of("batch", payload, status)  # raises: one error (or a 5xx) for the whole batch
                    raise CallFailed(ErrorCode.INVALID_MESSAGE_FORMAT, "not a batch reply", http_status=status)
                break
            except CallFailed as exc:
                if _final(exc, attempts, started, policy):
                    raise
            except _MethodNotFound as exc:
                raise CallFailed(ErrorCode.INVALID_MESSAGE_FORMAT, "batch refused as a method") from exc
            await asyncio.sleep(policy.delay)
        latency = (time.perf_counter() - started) * 1000
        by_id = {item.get("id"): item for item in payload if isinstance(item, dict)}
        outcomes: list[CallResult | CallFailed] = []
        for rid, (method, _) in zip(ids, calls, strict=True):
            try:
                item = by_id.get(rid)
                if item is None:
                    raise CallFailed(ErrorCode.INVALID_MESSAGE_FORMAT, "no reply to this call in the batch")
                reply, is_error = unwrap_reply(_result_of(method, item, status))
                outcomes.append(CallResult(reply, is_error, latency, attempts, "direct"))
            except _MethodNotFound:
                outcomes.append(CallFailed(ErrorCode.INVALID_MESSAGE_FORMAT, f"agent has no method {method!r}"))
            except CallFailed as exc:
                exc.attempts, exc.latency_ms = attempts, latency
                outcomes.append(exc)
        return outcomes

    async def _post(
        self, endpoint: str, payload: dict | list, timeout: float, headers: dict[str, str] | None, mcp: bool
    ) -> tuple[int, bytes, str]:
        send_headers: dict[str, str] | None = None  # the session's defaults are enough
        if mcp and endpoint in self._mcp_sessions:
            send_headers = {"Mcp-Session-Id": self._mcp_sessions[endpoint]}
        if headers:
            send_headers = {**(send_headers or {}), **headers}
        if self.address_check is not None:
            await self._check_literal(endpoint)
        try:
            async with asyncio.timeout(timeout):
                async with self._get_session().post(
                    self._url(endpoint), data=dumps(payload), headers=send_headers, allow_redirects=False
                ) as resp:
                    if mcp and resp.headers.get("Mcp-Session-Id"):
                        self._mcp_sessions[endpoint] = resp.headers["Mcp-Session-Id"]
                    if 300 <= resp.status < 400:
                        raise CallFailed(
                            ErrorCode.CONNECTION_ERROR,
                            f"redirect to {resp.headers.get('Location')!r} not followed",
                            http_status=resp.status,
                        )
                    declared = resp.content_length
                    if declared is not None and declared > self.max_response_bytes:
                        raise CallFailed(ErrorCode.INVALID_MESSAGE_FORMAT, "reply too large", http_status=resp.status)
                    if declared is not None:
                        # The parser stops at Content-Length, so this reads at most the limit.
                        body = await resp.read()
                    else:
                        body = await self._read_capped(resp)
                    return resp.status, body, resp.headers.get("Content-Type", "")
        except TimeoutError as exc:
            raise CallFailed(ErrorCode.TIMEOUT_ERROR, f"no reply within {timeout:g} s") from exc
        except aiohttp.ClientConnectorDNSError as exc:
            if isinstance(exc.os_error, AddressRefused):
                raise CallFailed(
                    ErrorCode.CONNECTION_ERROR, f"not connecting: {exc.os_error}", maybe_delivered=False
                ) from exc
            raise CallFailed(
                ErrorCode.CONNECTION_ERROR, f"DNS: host {exc.host!r} does not resolve", maybe_delivered=False
            ) from exc
        except aiohttp.ClientConnectorError as exc:
            if isinstance(exc.os_error, ConnectionRefusedError):
                detail = f"connection refused by {exc.host}:{exc.port} (nothing listens there)"
            else:
                detail = f"cannot connect to {exc.host}:{exc.port}: {exc.os_error}"
            raise CallFailed(ErrorCode.CONNECTION_ERROR, detail, maybe_delivered=False) from exc
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, OSError) as exc:
            raise CallFailed(ErrorCode.CONNECTION_ERROR, f"connection failed: {exc.__class__.__name__}: {exc}") from exc
        except (aiohttp.InvalidURL, aiohttp.NonHttpUrlClientError) as exc:
            # (aiohttp raises the second for a URL without http:// or https://, e.g. "127.0.0.1:8000/mcp")
            raise CallFailed(
                ErrorCode.CONNECTION_ERROR,
                f"invalid endpoint URL {endpoint!r}: expected http://host:port/mcp",
                maybe_delivered=False,
            ) from exc
        except aiohttp.ClientResponseError as exc:
            raise CallFailed(ErrorCode.INVALID_MESSAGE_FORMAT, f"bad HTTP reply: {exc}") from exc

    async def _check_literal(self, endpoint: str) -> None:
        """The address check for an endpoint whose host is an address (no DNS answer to check)."""
        try:
            url = self._url(endpoint)
        except aiohttp.InvalidURL:
            return  # the request itself reports the bad URL
        if self.address_check is None or not _literal(url.host):
            return
        problem = await self.address_check(url.host or "", url.port or 0, url.host or "")
        if problem:
            raise CallFailed(ErrorCode.CONNECTION_ERROR, f"not connecting: {problem}", maybe_delivered=False)

    async def _read_capped(self, resp: aiohttp.ClientResponse) -> bytes:
        """A body of unknown length (chunked, or until close), refused once past the limit."""
        body = bytearray()
        async for chunk in resp.content.iter_chunked(65536):
            body += chunk
            if len(body) > self.max_response_bytes:
                raise CallFailed(ErrorCode.INVALID_MESSAGE_FORMAT, "reply too large", http_status=resp.status)
        return bytes(body)
