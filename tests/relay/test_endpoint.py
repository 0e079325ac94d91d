"""The relay endpoint refuses the Hosts Django refuses and sends the security headers Django's
middleware sends, for the same settings: compared with Django's own answers (league/sitechecks.py
has Django judge them)."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import HttpCommunicator
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest
from django.test import Client

from league.relay.endpoint import RelayEndpoint
from league.sitechecks import head_of, host_refused

SECURITY = ("x-content-type-options", "x-frame-options", "referrer-policy", "cross-origin-opener-policy")


def django_allows(host: str) -> bool:
    request = HttpRequest()
    request.META["HTTP_HOST"] = host
    try:
        request.get_host()
    except DisallowedHost:
        return False
    return True


HOSTS = ["localhost", "localhost:8000", "127.0.0.1:8000", "[::1]:8000", "a.localhost", "evil.example", "", "x:y:z"]


@pytest.mark.parametrize("allowed", [["localhost", "127.0.0.1"], [".example.org"], ["*"], []], ids=str)
@pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])
def test_it_allows_exactly_the_hosts_django_allows(settings, allowed, debug):
    settings.ALLOWED_HOSTS = allowed
    settings.DEBUG = debug
    for host in [*HOSTS, "api.example.org", "example.org:443"]:
        scope = {"headers": [(b"host", host.encode())], "server": ("127.0.0.1", 8000)}
        assert (host_refused(head_of(scope)) is None) == django_allows(host), host


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"X_FRAME_OPTIONS": "sameorigin", "SECURE_REFERRER_POLICY": ["origin", "strict-origin"]},
        {"SECURE_CONTENT_TYPE_NOSNIFF": False, "SECURE_CROSS_ORIGIN_OPENER_POLICY": None},
        {"SECURE_REFERRER_POLICY": None, "SECURE_CROSS_ORIGIN_OPENER_POLICY": "same-origin-allow-popups"},
    ],
    ids=["site", "lists-and-case", "off", "other-values"],
)
def test_its_security_headers_are_those_djangos_middleware_sends(settings, overrides):
    for name, value in overrides.items():
        setattr(settings, name, value)
    answer = Client().get("/no-such-page/")  # Django's own 404, through the site's middleware
    expected = {name: answer.headers[name] for name in SECURITY if name in answer.headers}
    relayed = async_to_sync(_answer)([(b"host", b"localhost")])  # the relay's 405
    assert relayed["status"] == 405
    assert {k.decode(): v.decode() for k, v in relayed["headers"] if k.decode() in SECURITY} == expected


async def _answer(headers: list[tuple[bytes, bytes]], method: str = "GET", **scope: Any) -> dict[str, Any]:
    """What the relay endpoint answers a bodiless request, served without a server."""
    communicator = HttpCommunicator(RelayEndpoint(), method, "/relay/x/P01/mcp", headers=headers)
    communicator.scope.update(scope)
    return await communicator.get_response()


async def _refused(headers: list[tuple[bytes, bytes]], method: str = "GET", **scope: Any) -> int:
    return (await _answer(headers, method, **scope))["status"]


@pytest.mark.parametrize(
    ("headers", "scope", "forwarded", "status"),
    [
        ([(b"host", b"evil.example")], {}, False, 400),
        ([(b"host", b"localhost:8000")], {}, False, 405),
        ([], {"server": ("127.0.0.1", 8000)}, False, 405),  # no Host: the server's, as Django
        ([], {"server": ("evil.example", 80)}, False, 400),
        ([(b"host", b"localhost"), (b"x-forwarded-host", b"evil.example")], {}, False, 405),
        ([(b"host", b"localhost"), (b"x-forwarded-host", b"evil.example")], {}, True, 400),
        ([(b"host", b"evil.example"), (b"x-forwarded-host", b"localhost")], {}, True, 405),
    ],
)
def test_it_reads_the_host_where_django_reads_it(settings, headers, scope, forwarded, status):
    settings.USE_X_FORWARDED_HOST = forwarded
    assert async_to_sync(_refused)(headers, **scope) == status


HSTS = ("strict-transport-security",)


@pytest.mark.parametrize("proxied", ["https", "http", None], ids=["behind-tls", "plain-through-proxy", "no-header"])
def test_a_request_secure_behind_a_tls_proxy_gets_hsts_as_from_django(settings, proxied):
    """The middleware's headers depend on whether the request is secure (the proxy's header)."""
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SECURE_HSTS_SECONDS = 3600
    settings.SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    extra = {"HTTP_X_FORWARDED_PROTO": proxied} if proxied else {}
    page = Client().get("/no-such-page/", **extra)
    headers = [(b"host", b"localhost")] + ([(b"x-forwarded-proto", proxied.encode())] if proxied else [])
    relayed = async_to_sync(_answer)(headers)
    got = {k.decode(): v.decode() for k, v in relayed["headers"]}
    names = SECURITY + HSTS
    assert {n: got[n] for n in names if n in got} == {n: page.headers[n] for n in names if n in page.headers}
    assert ("strict-transport-security" in got) == (proxied == "https")


def test_with_ssl_redirect_on_a_plain_request_is_redirected_as_django_redirects_it(settings):
    settings.SECURE_SSL_REDIRECT = True
    page = Client().get("/relay/x/P01/mcp", HTTP_HOST="localhost")
    relayed = async_to_sync(_answer)([(b"host", b"localhost")])
    got = {k.decode(): v.decode() for k, v in relayed["headers"]}
    assert relayed["status"] == page.status_code == 301
    assert got["location"] == page.headers["Location"] == "https://localhost/relay/x/P01/mcp"
