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

DEFAULT_PORTS = {"http": 80, "https": 443}
THIS_MACHINE = "127.0.0.1"  # how every address of this machine is written in the canonical form

_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_SLASHES = re.compile(r"/{2,}")


def legacy_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """The address ``host`` means in the BSD ``inet_aton`` notations (``127.1``, ``0x7f.1``,
    ``0177.0.0.1``, ``2130706433``), or None when it is not one of them."""
    parts = host.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    values = []
    for part in parts:
        try:
            if part.lower().startswith("0x"):
                values.append(int(part[2:], 16))
            elif len(part) > 1 and part.startswith("0"):
                values.append(int(part, 8))
            elif part.isdigit():
                values.append(int(part))
            else:
                return None
        except ValueError:
            return None
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (4 - len(head)):
        return None
    number = last
    for index, value in enumerate(head):
        number += value << (8 * (3 - index))
    return ipaddress.IPv4Address(number)


def host_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address a host literal names in any spelling (IPv4-mapped IPv6 as IPv4), else None."""
    try:
        address = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return legacy_ipv4(host)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def is_this_machine(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return address.is_loopback or address.is_unspecified


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
    address = host_address(host)
    if host == "localhost" or host.endswith(".localhost") or (address is not None and is_this_machine(address)):
        host = THIS_MACHINE
    elif isinstance(address, ipaddress.IPv6Address):
        host = f"[{address.compressed}]"
    elif address is not None:
        host = str(address)
    port = port or DEFAULT_PORTS.get(scheme, 0)
    return f"{scheme}://{host}:{port}{canonical_path(parts.path)}"
