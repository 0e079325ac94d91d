"""When two spellings of an agent's URL name the same endpoint (pure: no DNS, no Django).

One agent must hold one seat however its URL is written, and a player must recognise its
referee however the LM and the invitation spell it, so both compare ``canonical_endpoint``:
the scheme and host in lower case; every address of this machine (``localhost``,
``127.0.0.0/8``, ``::1``, ``0.0.0.0``) as ``127.0.0.1``; addresses in their standard spelling
(also the legacy IPv4 forms ``127.1``, ``0x7f.1``, ``2130706433``); the port explicit; and the
path as an HTTP server routes it: percent-escapes of unreserved characters decoded (``%6d`` is
``m``), ``;parameters`` dropped, repeated slashes collapsed, ``.`` and ``..`` resolved, no
trailing slash; no query, fragment or credentials.
"""

from __future__ import annotations

import ipaddress
import posixpath
import re
from urllib.parse import urlsplit

from leagueproto.endpoint_policy import DEFAULT_PORTS, ip_of, this_machine

THIS_MACHINE = "127.0.0.1"  # how every address of this machine is written in the canonical form

_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_SLASHES = re.compile(r"/{2,}")


def _unescape(match: re.Match[str]) -> str:
    char = chr(int(match.group(1), 16))
    return char if char in _UNRESERVED else f"%{match.group(1).upper()}"


def canonical_path(path: str) -> str:
    """``path`` as a server routes it: ``/%6dcp``, ``//mcp``, ``/mcp/.``, ``/x/../mcp``,
    ``/mcp;x`` and ``/mcp/`` are all ``/mcp``; an empty path is ``""``."""
    path = _ESCAPE.sub(_unescape, path)
    path = "/".join(segment.split(";", 1)[0] for segment in path.split("/"))
    path = _SLASHES.sub("/", path)
    if not path or path == "/":
        return ""
    normal = posixpath.normpath(path if path.startswith("/") else f"/{path}")
    return "" if normal == "/" else normal


def canonical_endpoint(endpoint: str) -> str:
    """The form two endpoints are compared in: ``scheme://host:port/path`` (see the module's
    docstring). An unparsable URL is returned as is."""
    try:
        parts = urlsplit(endpoint.strip())
        port = parts.port
    except ValueError:
        return endpoint
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").rstrip(".")
    address = ip_of(host)
    if host == "localhost" or host.endswith(".localhost") or (address is not None and this_machine(address)):
        host = THIS_MACHINE
    elif isinstance(address, ipaddress.IPv6Address):
        host = f"[{address.compressed}]"
    elif address is not None:
        host = str(address)
    port = port or DEFAULT_PORTS.get(scheme, 0)
    return f"{scheme}://{host}:{port}{canonical_path(parts.path)}"
