"""Django's own checks for what the LM serves beside Django: ``/mcp`` (league/mcp/endpoint.py),
the relay endpoint (league/relay/endpoint.py) and the agents' sockets (league/relay/consumer.py),
ASGI applications that Channels routes to before Django's views (leaguesite/asgi.py).

Each request is read into a Django ``HttpRequest`` (its ``META`` as Django's ASGI handler fills
it), so that the Host is judged by ``HttpRequest.get_host()`` itself (ALLOWED_HOSTS,
USE_X_FORWARDED_HOST, the DEBUG default) and the response gets its headers from Django's own
``SecurityMiddleware`` and ``XFrameOptionsMiddleware``, run through the documented middleware
protocol: a new Django default there reaches these routes as it reaches every view.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import DisallowedHost
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.security import SecurityMiddleware

TEXT = "text/plain; charset=utf-8"
# Where Django logs a refused Host, so an operator's logging for views covers these routes too.
security_logger = logging.getLogger("django.security.DisallowedHost")


def django_request(scope: dict[str, Any]) -> HttpRequest:
    """The request of an ASGI ``scope`` (http or websocket) as a Django ``HttpRequest``: method,
    path and ``META`` (headers as ``HTTP_*``, the server's name and port, the client's address)."""
    request = HttpRequest()
    request.method = scope.get("method", "GET")
    request.path = request.path_info = scope.get("path", "/")
    server = scope.get("server") or ("unknown", "0")
    client = scope.get("client") or ("", 0)
    meta: dict[str, Any] = {
        "REQUEST_METHOD": request.method,
        "PATH_INFO": request.path,
        "QUERY_STRING": scope.get("query_string", b"").decode("latin-1"),
        "SERVER_NAME": str(server[0]),
        "SERVER_PORT": str(server[1] or "0"),
        "REMOTE_ADDR": client[0],
    }
    for raw_name, raw_value in scope.get("headers") or []:
        name = raw_name.decode("latin-1").upper().replace("-", "_")
        key = name if name in ("CONTENT_LENGTH", "CONTENT_TYPE") else f"HTTP_{name}"
        value = raw_value.decode("latin-1")
        meta[key] = f"{meta[key]},{value}" if key in meta else value  # repeated headers, as Django joins them
    request.META = meta
    return request


def host_refused(request: HttpRequest) -> str | None:
    """Why Django refuses the request's Host (``get_host`` raises DisallowedHost), or None."""
    try:
        request.get_host()
    except DisallowedHost as exc:
        return str(exc)
    return None


def host_answer(request: HttpRequest) -> HttpResponse | None:
    """The answer to a request whose Host Django refuses (logged as Django logs it), or None."""
    problem = host_refused(request)
    if problem is None:
        return None
    security_logger.error(problem)
    return HttpResponse(b"Bad Request (400)", status=400, content_type=TEXT)


def origin_refused(request: HttpRequest) -> str | None:
    """Why a browser's ``Origin`` is refused, or None: an Origin, when there is one, must name a
    host the site serves (ALLOWED_HOSTS, judged by Django as a Host is), the dashboard's rule
    (Channels' AllowedHostsOriginValidator). Agents are programs: they send no Origin."""
    origin = request.META.get("HTTP_ORIGIN")
    if origin is None:
        return None
    try:
        netloc = urlsplit(origin).netloc
    except ValueError:
        netloc = ""
    probe = HttpRequest()
    probe.META = {"HTTP_HOST": netloc, "SERVER_NAME": "", "SERVER_PORT": ""}
    if not netloc or host_refused(probe):
        return f"Origin {origin!r} is not one of this site's"
    return None


def with_site_headers(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    """``response`` as Django's security and clickjacking middleware leave it for ``request``."""
    request.answer = response  # what the chain's view gives back: this call's answer
    return _site_headers()(request)


def _answer_of(request: HttpRequest) -> HttpResponse:
    return request.answer


@functools.cache
def _site_headers() -> SecurityMiddleware:
    """The middleware chain, made once (as Django makes a site's): a middleware reads its settings
    when it is made, a dozen of them for the security middleware, and every agent's call passes it.
    Made again when a setting changes (tests)."""
    return SecurityMiddleware(XFrameOptionsMiddleware(_answer_of))


@receiver(setting_changed)
def _settings_changed(**kwargs: Any) -> None:
    _site_headers.cache_clear()


def asgi_headers(response: HttpResponse) -> Iterable[tuple[bytes, bytes]]:
    """A Django response's headers as ASGI sends them."""
    return [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in response.items()]


async def send_response(send: Any, request: HttpRequest, response: HttpResponse) -> None:
    """``response`` sent over ASGI with its length and the headers Django's security and
    clickjacking middleware add."""
    response["Content-Length"] = str(len(response.content))
    response = with_site_headers(request, response)
    await send({"type": "http.response.start", "status": response.status_code, "headers": asgi_headers(response)})
    await send({"type": "http.response.body", "body": response.content})
