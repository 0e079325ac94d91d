"""Temporary, for league/relay/view.py only: its ASGI bypass (``lean_relay``) still imports these
two. /mcp itself is a Django view (league/mcp/view.py). Delete this module once the relay's
endpoint is a Django view too."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http.request import split_domain_port, validate_host


def _security_headers() -> list[tuple[bytes, bytes]]:
    """The headers SecurityMiddleware and XFrameOptionsMiddleware would add."""
    headers = [(b"x-frame-options", settings.X_FRAME_OPTIONS.encode())]
    if settings.SECURE_CONTENT_TYPE_NOSNIFF:
        headers.append((b"x-content-type-options", b"nosniff"))
    if settings.SECURE_REFERRER_POLICY:
        headers.append((b"referrer-policy", str(settings.SECURE_REFERRER_POLICY).encode()))
    opener = getattr(settings, "SECURE_CROSS_ORIGIN_OPENER_POLICY", None)
    if opener:
        headers.append((b"cross-origin-opener-policy", opener.encode()))
    return headers


def _host_allowed(scope: dict[str, Any]) -> bool:
    """Django's ALLOWED_HOSTS check, on an ASGI scope."""
    host = next((v for k, v in scope.get("headers", ()) if k == b"host"), b"")
    domain, _port = split_domain_port(host.decode("latin-1"))
    allowed = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    return bool(domain) and validate_host(domain, allowed)
