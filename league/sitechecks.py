"""Django's own checks for what the LM serves beside Django: ``/mcp`` (league/mcp/endpoint.py),
the relay endpoint (league/relay/endpoint.py), the agents' sockets (league/relay/consumer.py) and
a league's page (league/pages/endpoint.py), ASGI applications that Channels routes to before
Django's views (leaguesite/asgi.py).

A request's head is read once into a :class:`Head` (its ``META`` as Django's ASGI handler fills
it). The Host is judged by ``HttpRequest.get_host()`` itself (ALLOWED_HOSTS,
USE_X_FORWARDED_HOST, the DEBUG default) and every answer gets the headers of Django's own
``SecurityMiddleware``, ``XFrameOptionsMiddleware`` and ``ContentSecurityPolicyMiddleware``, run
through the documented middleware protocol: a new Django default there reaches these routes as it
reaches every view.

Both are asked once per distinct input and settings state, not once per call: an agent's every
call passes here, and a Django request and response built for each cost the LM about a tenth of
its CPU in a relayed league (docs/benchmarks.md). What each judgement reads is what Django
documents it to read: ``get_host()`` the ``X-Forwarded-Host`` (with USE_X_FORWARDED_HOST) and
``Host`` headers, else ``SERVER_NAME`` and the port (``X-Forwarded-Port`` with
USE_X_FORWARDED_PORT, else ``SERVER_PORT``); the middleware's headers, whether the request is
secure (``is_secure()``: the SECURE_PROXY_SSL_HEADER's header; these routes are reached over
plain HTTP behind any TLS proxy). With SECURE_SSL_REDIRECT on, the middleware may answer a
request itself (a redirect that depends on its path), so then each call runs the whole chain.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.csp import ContentSecurityPolicyMiddleware
from django.middleware.security import SecurityMiddleware

TEXT = "text/plain; charset=utf-8"
# Where Django logs a refused Host, so an operator's logging for views covers these routes too.
security_logger = logging.getLogger("django.security.DisallowedHost")

# What get_host() reads of META (Django's documentation of HttpRequest.get_host and get_port).
_HOST_KEYS = ("HTTP_X_FORWARDED_HOST", "HTTP_HOST", "SERVER_NAME", "SERVER_PORT", "HTTP_X_FORWARDED_PORT")
# Distinct heads judged and kept: a client sending a new Host on every call costs a judgement each,
# never memory without bound.
_JUDGED = 1024


@dataclass(frozen=True, slots=True)
class Head:
    """A request's head as the routes beside Django read it: method, path and ``META`` (headers
    as ``HTTP_*``, the server's name and port, the client's address), as Django fills them."""

    method: str
    path: str
    meta: dict[str, str]

    def header(self, name: str) -> str | None:
        """A header's value by its HTTP name (repeated headers joined with commas, as Django)."""
        key = name.upper().replace("-", "_")
        return self.meta.get(key if key in ("CONTENT_LENGTH", "CONTENT_TYPE") else f"HTTP_{key}")

    def headers(self) -> dict[str, str]:
        """Every header, by its lower-case name."""
        found = {}
        for key, value in self.meta.items():
            if key.startswith("HTTP_"):
                found[key[5:].lower().replace("_", "-")] = value
            elif key in ("CONTENT_LENGTH", "CONTENT_TYPE"):
                found[key.lower().replace("_", "-")] = value
        return found


def head_of(scope: dict[str, Any]) -> Head:
    """The head of an ASGI ``scope`` (http or websocket)."""
    method = scope.get("method", "GET")
    path = scope.get("path", "/")
    server = scope.get("server") or ("unknown", "0")
    client = scope.get("client") or ("", 0)
    meta: dict[str, str] = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": scope.get("query_string", b"").decode("latin-1"),
        "SERVER_NAME": str(server[0]),
        "SERVER_PORT": str(server[1] or "0"),
        "REMOTE_ADDR": client[0],
    }
    for raw_name, raw_value in scope.get("headers") or []:
        key = _meta_key(raw_name)
        value = raw_value.decode("latin-1")
        meta[key] = f"{meta[key]},{value}" if key in meta else value  # repeated headers, as Django joins them
    return Head(method, path, meta)


@functools.lru_cache(maxsize=256)
def _meta_key(raw_name: bytes) -> str:
    """A header's ``META`` key, as Django's ASGI handler names it (agents send the same few)."""
    name = raw_name.decode("latin-1").upper().replace("-", "_")
    return name if name in ("CONTENT_LENGTH", "CONTENT_TYPE") else f"HTTP_{name}"


def django_request(head: Head) -> HttpRequest:
    """The head as a Django ``HttpRequest`` (method, path, ``META``)."""
    request = HttpRequest()
    request.method = head.method
    request.path = request.path_info = head.path
    request.META = dict(head.meta)
    return request


def host_refused(head: Head) -> str | None:
    """Why Django refuses the request's Host (``get_host`` raises DisallowedHost), or None."""
    return _host_judgement(tuple(head.meta.get(key) for key in _HOST_KEYS))


@functools.lru_cache(maxsize=_JUDGED)
def _host_judgement(values: tuple[str | None, ...]) -> str | None:
    probe = HttpRequest()
    probe.META = {key: value for key, value in zip(_HOST_KEYS, values, strict=True) if value is not None}
    try:
        probe.get_host()
    except DisallowedHost as exc:
        return str(exc)
    return None


def host_answer(head: Head) -> tuple[int, bytes, list[tuple[str, str]]] | None:
    """The answer (status, body, headers) to a request whose Host Django refuses, logged as
    Django logs it; None when the Host is the site's."""
    problem = host_refused(head)
    if problem is None:
        return None
    security_logger.error(problem)
    return 400, b"Bad Request (400)", [("Content-Type", TEXT)]


def origin_refused(head: Head) -> str | None:
    """Why a browser's ``Origin`` is refused, or None: an Origin, when there is one, must name a
    host the site serves (ALLOWED_HOSTS, judged by Django as a Host is), the dashboard's rule
    (Channels' AllowedHostsOriginValidator). Agents are programs: they send no Origin."""
    origin = head.meta.get("HTTP_ORIGIN")
    if origin is None:
        return None
    try:
        netloc = urlsplit(origin).netloc
    except ValueError:
        netloc = ""
    if not netloc or _host_judgement((None, netloc, "", "", None)):
        return f"Origin {origin!r} is not one of this site's"
    return None


def _answer_of(request: HttpRequest) -> HttpResponse:
    return request.answer


@functools.cache
def _chain() -> SecurityMiddleware:
    """The middleware chain, made once (as Django makes a site's): a middleware reads its settings
    when it is made, a dozen of them for the security middleware."""
    return SecurityMiddleware(XFrameOptionsMiddleware(ContentSecurityPolicyMiddleware(_answer_of)))


def _through_chain(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    request.answer = response  # what the chain's view gives back: this call's answer
    return _chain()(request)


def _secure_key(head: Head) -> str | None:
    """What ``is_secure()`` reads of a request that reached these routes over plain HTTP: the
    SECURE_PROXY_SSL_HEADER's header, when one is set."""
    proxy = settings.SECURE_PROXY_SSL_HEADER
    return head.meta.get(proxy[0]) if proxy else None


@functools.lru_cache(maxsize=64)
def _added_headers(secure_key: str | None) -> tuple[tuple[str, str], ...]:
    """The headers the chain adds to an answer of ours, for requests that read as ``secure_key``."""
    probe = HttpRequest()
    proxy = settings.SECURE_PROXY_SSL_HEADER
    if proxy and secure_key is not None:
        probe.META[proxy[0]] = secure_key
    probe.META.update(SERVER_NAME="localhost", SERVER_PORT="80")
    before = HttpResponse(b"")
    answered = _through_chain(probe, before)
    return tuple((name, value) for name, value in answered.items() if name.lower() not in ("content-type",))


@functools.lru_cache(maxsize=64)
def _added_raw(secure_key: str | None) -> tuple[tuple[bytes, bytes], ...]:
    """``_added_headers`` as ASGI sends them (names in lower case, encoded)."""
    added = _added_headers(secure_key)
    return tuple((name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in added)


@receiver(setting_changed)
def _settings_changed(**kwargs: Any) -> None:
    _chain.cache_clear()
    _host_judgement.cache_clear()
    _added_headers.cache_clear()
    _added_raw.cache_clear()


async def send_response(
    send: Any, head: Head, status: int, body: bytes, headers: list[tuple[str, str]] | None = None
) -> None:
    """An answer sent over ASGI with its length and the headers Django's security and clickjacking
    middleware add to it."""
    headers = [*(headers or []), ("Content-Length", str(len(body)))]
    if settings.SECURE_SSL_REDIRECT:
        response = HttpResponse(body, status=status)
        for name, value in headers:
            response[name] = value
        response = _through_chain(django_request(head), response)
        status, body, headers = response.status_code, response.content, list(response.items())
        added: tuple[tuple[bytes, bytes], ...] = ()
    else:
        added = _added_raw(_secure_key(head))
    raw = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers]
    if added:
        given = {name for name, _ in raw}
        raw += [(name, value) for name, value in added if name not in given]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
