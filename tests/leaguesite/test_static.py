"""/static/ through the site's ASGI app (leaguesite/static.py: WhiteNoise over the finders' folders)."""

from __future__ import annotations

import re
import socket

import httpx

STATUS_LINE = re.compile(rb"HTTP/1\.1 (\d{3}) ")


def test_it_serves_the_sites_and_the_apps_static_files(lm_server):
    base = lm_server.removesuffix("/mcp")
    script = httpx.get(f"{base}/static/league/league.js", timeout=10)
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert script.headers["x-content-type-options"] == "nosniff"
    assert httpx.get(f"{base}/static/vendor/chart.umd.min.js", timeout=10).status_code == 200
    # An app's own static folder (the admin's), as Django's finders would find it.
    assert httpx.get(f"{base}/static/admin/css/base.css", timeout=10).status_code == 200


def test_anything_else_under_static_is_not_found(lm_server):
    base = lm_server.removesuffix("/mcp")
    for path in ("/static/league/nope.js", "/static/../manage.py", "/static/%2e%2e/manage.py", "/static/"):
        assert httpx.get(base + path, timeout=10).status_code == 404, path
    # Pages are still the site's.
    assert httpx.get(f"{base}/", timeout=10).status_code == 200


def test_requests_pipelined_after_a_static_file_are_served(lm_server):
    """A client that sends its next requests on the connection before a static file's answer is
    complete (the server holds them in a pipeline) gets them all answered: the file's answer is
    sent from WhiteNoise's thread, and the next request must not inherit that thread's state
    (asgiref's executor, gone once the file is sent: each such request was a 500)."""
    host, port = lm_server.removeprefix("http://").removesuffix("/mcp").split(":")
    paths = ["/static/league/league.js", "/static/admin/css/base.css", "/static/league/favicon.svg", "/check/"] * 2
    requests = "".join(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n" for path in paths)
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(requests.encode())
        received = b""
        while len(STATUS_LINE.findall(received)) < len(paths):
            chunk = conn.recv(1 << 16)
            assert chunk, received[-300:]
            received += chunk
    # Each answer's status line follows the previous body directly (no blank line between).
    statuses = STATUS_LINE.findall(received)
    assert statuses == [b"200"] * len(paths)
